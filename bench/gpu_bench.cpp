// gpu_bench: dcalign's alignment methods on the CUDA backend, timed with CUDA events on the
// backend's stream, at a few (a, l, c) points, with the anchors resident on the device and
// with their upload from the host included. Also measures, once per run, the device-to-device
// copy bandwidth and the cuBLAS GEMM rate of both precisions, against which the achieved
// fractions are stated. JSON schema and options: bench/README.md ("GPU benchmark").
//
//   gpu_bench --json gpu_bench.json
//   gpu_bench --points "1000,50,1000" --methods odc --precision float64 --repetitions 50
//
// Exit status: 0 when every series ran (capped or skipped for memory included), 1 when some
// series failed, 2 for usage errors, 3 when there is no usable GPU (the JSON says why).
#include "gpu/bench_support.hpp"

using namespace dcalign::gpu_bench;

int main(int argc, char** argv) {
  Config cfg;
  std::string points = "20000,50,50;1000,50,1000;1000,950,50;1000,50,10000";
  std::string methods = "odc,gopp,imakura,kawakami", precisions = "float32,float64";
  CLI::App app{
      "gpu_bench: dcalign's alignment methods on the CUDA backend, timed with CUDA events "
      "(bench/README.md)"};
  // A repeated option takes its last value: scripts/gpu-check.sh appends --bench-args after its
  // own defaults (CLI11's default refuses the repetition, exit 114).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--points", points, "semicolon-separated points a,l,c")->capture_default_str();
  app.add_option("--methods", methods, "comma-separated: odc, gopp, imakura, kawakami")
      ->capture_default_str();
  app.add_option("--precision", precisions, "comma-separated: float32, float64")
      ->capture_default_str();
  app.add_option("--repetitions", cfg.repetitions,
                 "timed runs per series (each resident and with "
                 "upload)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", cfg.warmup,
                 "untimed runs per series before the timed ones (the evaluated run is the first)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", cfg.seed, "anchors and every random draw")->capture_default_str();
  app.add_option("--json", cfg.json_path, "write the results here (rewritten after each series)");
  app.add_option("--max-seconds-per-series", cfg.max_seconds_per_series,
                 "start no further run of a series after this many seconds (0: no cap)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-seconds-total", cfg.max_seconds_total,
                 "start no further series after this many seconds (0: no cap)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--polar", cfg.polar, "polar factor of ODC and GOPP: auto, svd, iterative")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "svd", "iterative"}));
  app.add_option("--svd", cfg.svd, "SVD of Imakura-DC, Kawakami-DC and GOPP's start")
      ->capture_default_str()
      ->check(CLI::IsMember({"exact", "randomized", "gram"}));
  app.add_option("--upload", cfg.upload,
                 "copies from pageable host memory: staged (the backend's default, "
                 "BackendOptions::staged_upload) or driver (the CUDA driver's own copy)")
      ->capture_default_str()
      ->check(CLI::IsMember({"staged", "driver"}));
  app.add_option("--host-memory", cfg.host_memory,
                 "host buffer the 'with upload' runs copy from: pageable or pinned")
      ->capture_default_str()
      ->check(CLI::IsMember({"pageable", "pinned"}));
  app.add_option("--inverse-per-matrix-from", cfg.inverse_per_matrix_from,
                 "order from which the polar iteration inverts each matrix with cuSOLVER's "
                 "getrf + getrs instead of cuBLAS's batched LU "
                 "(BackendOptions::cuda_inverse_per_matrix_from; 0: never)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
  app.add_option("--device", cfg.device, "CUDA device ordinal")->capture_default_str();
  app.add_flag("!--no-references", cfg.references,
               "skip the copy-bandwidth and GEMM-rate measurements");
  CLI11_PARSE(app, argc, argv);

  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  json doc;
  doc["schema"] = "dcalign-gpu-bench/1";
  doc["command"] = command;
  doc["started"] = utc_timestamp();
  try {
    cfg.points = parse_points(points);
    cfg.methods = split(methods, ',');
    cfg.precisions = split(precisions, ',');
    for (const auto& m : cfg.methods) dcalign::parse_method(m);
    for (const auto& p : cfg.precisions)
      if (p != "float32" && p != "float64")
        throw std::invalid_argument("--precision: unknown '" + p + "'");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 2;
  }
  json params;
  params["points"] = json::array();
  for (const auto& p : cfg.points) params["points"].push_back({{"a", p.a}, {"l", p.l}, {"c", p.c}});
  params["methods"] = cfg.methods;
  params["precisions"] = cfg.precisions;
  params["repetitions"] = cfg.repetitions;
  params["warmup"] = cfg.warmup;
  params["seed"] = cfg.seed;
  params["max_seconds_per_series"] = cfg.max_seconds_per_series;
  params["max_seconds_total"] = cfg.max_seconds_total;
  params["polar"] = cfg.polar;
  params["svd"] = cfg.svd;
  params["host_memory"] = cfg.host_memory;
  params["upload"] = cfg.upload;
  params["inverse_per_matrix_from"] = cfg.inverse_per_matrix_from;
  params["anchors"] =
      "i.i.d. N(0,1), user i from dcalign::Rng::stream(seed ^ a<<40 ^ l<<20 ^ c, i); float32 = "
      "the float64 draws rounded";
  params["timed"] =
      "resident: CUDA events on the backend's stream around align_resident (evaluate = false, G "
      "and target preallocated); with_upload: the same plus Primitives::to_device of the anchors "
      "from the host buffer; resident and with-upload runs alternate; the untimed evaluated run "
      "(objective, orthogonality) is the first warm-up run";
  doc["parameters"] = params;
  doc["results"] = json::array();

  std::string why;
  if (!dcalign::cuda_available(&why)) {
    doc["status"] = "no_gpu";
    doc["reason"] = why;
    std::fprintf(stderr, "gpu_bench: no usable GPU: %s\n", why.c_str());
    try {
      write_json_atomically(cfg.json_path, doc);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    }
    return 3;
  }

  try {
    BENCH_CUDA(cudaSetDevice(cfg.device));
    dcalign::BackendOptions bo;
    bo.device_id = cfg.device;
    bo.allow_tf32 = false;
    bo.staged_upload = cfg.upload == "staged";
    bo.cuda_inverse_per_matrix_from = cfg.inverse_per_matrix_from;
    auto backend = dcalign::make_backend(dcalign::Device::cuda, bo);
    Run run{cfg, *backend, dcalign::cuda::stream_of(*backend), doc};
    run.doc["machine"] = describe_machine(cfg.device, backend.get());
    std::fprintf(stderr, "gpu_bench: %s, %s\n",
                 run.doc["machine"]["gpu"]["name"].get<std::string>().c_str(),
                 backend->description().c_str());
    if (cfg.references) {
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      json ref;
      try {
        ref["d2d_copy"] = measure_copy(free_b);
        run.copy_bandwidth = ref["d2d_copy"]["bandwidth_bytes_per_s"].get<double>();
        ref["gemm"]["float32"] = measure_gemm<float>(free_b);
        ref["gemm"]["float64"] = measure_gemm<double>(free_b);
        run.gemm_rate[0] = ref["gemm"]["float32"]["flops_per_s"].get<double>();
        run.gemm_rate[1] = ref["gemm"]["float64"]["flops_per_s"].get<double>();
      } catch (const std::exception& e) {
        cudaGetLastError();
        ref["error"] = e.what();
      }
      run.doc["reference"] = ref;
      std::fprintf(stderr,
                   "gpu_bench: device-to-device copy %.0f GB/s (read + write), GEMM float32 %.1f "
                   "TFLOP/s, float64 %.1f TFLOP/s\n",
                   run.copy_bandwidth / 1e9, run.gemm_rate[0] / 1e12, run.gemm_rate[1] / 1e12);
    }
    run.save();
    print_header();
    for (const auto& pt : cfg.points)
      for (const auto& prec : cfg.precisions) {
        if (prec == "float32")
          run_point_precision<float>(run, pt, prec);
        else
          run_point_precision<double>(run, pt, prec);
      }
    run.doc["finished"] = utc_timestamp();
    run.doc["wall_seconds"] = now_seconds() - run.t_start;
    run.doc["status"] = run.any_error ? "errors" : "ok";
    run.save();
    return run.any_error ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: error: %s\n", e.what());
    doc["status"] = "error";
    doc["reason"] = e.what();
    try {
      write_json_atomically(cfg.json_path, doc);
    } catch (const std::exception&) {
    }
    return 1;
  }
}
