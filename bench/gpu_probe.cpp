// gpu_probe: times the cuBLAS and cuSOLVER routes that the open GPU goals could take, so that
// one short GPU window decides between them instead of a guess. Each case is a library call
// sequence on device-resident data, timed with CUDA events, median of --repetitions runs.
//
// Cases run in this order, cheapest first, so that a capped run still has the first ones (random
// matrices: mean 0, variance 1, from --seed):
//
//   haar     n       ODC's Haar O as the library draws it on the host (Gaussian + LAPACK QR),
//                    the Gaussian alone, a device QR (geqrf + orgqr) of an n x n matrix, and
//                    the library's device route (core::haar_rotation_on_backend)
//   topk     n:k     k largest eigenpairs of an n x n Gram matrix W^T W (W 4n x n random):
//                    syevdx (what the backend calls) against the full syevd
//   inverse  n x c   batched inverses, as the Newton polar iteration needs them at large l:
//                    cuBLAS getrfBatched + getriBatched (the backend's route above n = 32), and
//                    cuSOLVER's 64-bit getrf + getrs(B = I) per matrix over 1, 4, 8 streams
//   gemm     n x c   one strided-batched n x n x n product (the unit of a Newton-Schulz step)
//   syevb    n x c   cuSOLVER's batched symmetric eigensolver (syevBatched, all vectors)
//
// The residual of every inverse route (max |X Y - I| of the first matrix) is recorded, so a fast
// route that is wrong shows. Nothing here is used by the library; bench/README.md ("GPU probe")
// says how to read the output.
//
//   gpu_probe --json gpu_probe.json
//   gpu_probe --inverse 950x50 --gemm "" --syevb "" --topk "" --haar "" --precision float64
//
// Exit status: 0 when every case ran, 1 when some failed (the JSON says which), 2 for usage
// errors, 3 without a usable GPU.
#include "gpu/probe_harness.hpp"

using namespace dcalign::gpu_probe;

int main(int argc, char** argv) {
  Config cfg;
  std::string inverse = "950x50,500x50,128x50", gemm = "950x50,500x50", syevb = "950x50,50x50",
              topk = "2500:50,1000:50,1000:950", haar = "950,500,50",
              precisions = "float64,float32", json_path, streams = "1,4,8";
  int device = 0;
  CLI::App app{"gpu_probe: cuBLAS/cuSOLVER routes for the open GPU goals (bench/README.md)"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--inverse", inverse, "batched inverses n x count, comma-separated ('' skips)")
      ->capture_default_str();
  app.add_option("--streams", streams, "stream counts of the per-matrix cuSOLVER route (1-16)")
      ->capture_default_str();
  app.add_option("--gemm", gemm, "strided-batched products n x count")->capture_default_str();
  app.add_option("--syevb", syevb, "batched eigensolver n x count")->capture_default_str();
  app.add_option("--topk", topk, "top-k eigenpairs n:k of a Gram matrix")->capture_default_str();
  app.add_option("--haar", haar, "Haar draws of order n, comma-separated")->capture_default_str();
  app.add_option("--precision", precisions, "float64, float32 (topk and haar: float64 only)")
      ->capture_default_str();
  app.add_option("--repetitions", cfg.repetitions, "timed runs per case")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--warmup", cfg.warmup, "untimed runs per case")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  app.add_option("--max-seconds-per-case", cfg.max_seconds_per_case,
                 "start no further timed run of a case after this many seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-seconds-total", cfg.max_seconds_total,
                 "start no further case after this many seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", cfg.seed, "every draw")->capture_default_str();
  app.add_option("--device", device, "CUDA device ordinal")->capture_default_str();
  app.add_option("--json", json_path, "write the results here (rewritten after each case)");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::pair<int, int>> inv, mm, eb, tk;
  std::vector<int> orders;
  std::vector<std::string> precs;
  try {
    inv = parse_pairs(inverse, 'x', "--inverse");
    mm = parse_pairs(gemm, 'x', "--gemm");
    eb = parse_pairs(syevb, 'x', "--syevb");
    tk = parse_pairs(topk, ':', "--topk");
    for (const auto& [n, k] : tk)
      if (k > n) throw std::invalid_argument("--topk: k = " + std::to_string(k) + " > n");
    std::istringstream hs(haar), ps(precisions), ss(streams);
    std::string item;
    while (std::getline(hs, item, ','))
      if (!item.empty()) orders.push_back(parse_count(item, "--haar", 8192));
    while (std::getline(ps, item, ','))
      if (!item.empty()) {
        if (item != "float32" && item != "float64")
          throw std::invalid_argument("--precision: unknown '" + item + "'");
        precs.push_back(item);
      }
    cfg.streams.clear();
    while (std::getline(ss, item, ','))
      if (!item.empty()) cfg.streams.push_back(parse_count(item, "--streams", 16));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_probe: %s\n", e.what());
    return 2;
  }

  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  json doc;
  doc["schema"] = "dcalign-gpu-probe/1";
  doc["command"] = command;
  doc["started"] = dcalign::bench::utc_timestamp();
  doc["results"] = json::array();
  auto save = [&] {
    if (!json_path.empty()) dcalign::bench::write_file_atomic(json_path, doc.dump(2) + "\n");
  };
  std::string why;
  if (!dcalign::cuda_available(&why)) {
    doc["status"] = "no_gpu";
    doc["reason"] = why;
    std::fprintf(stderr, "gpu_probe: no usable GPU: %s\n", why.c_str());
    try {
      save();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpu_probe: %s\n", e.what());
    }
    return 3;
  }
  int failures = 0;
  try {
    PROBE(cudaSetDevice(device));
    cudaDeviceProp prop{};
    PROBE(cudaGetDeviceProperties(&prop, device));
    int cusolver_version = 0, cublas_version = 0, runtime = 0;
    cusolverGetVersion(&cusolver_version);
    cudaRuntimeGetVersion(&runtime);
    const int max_streams = *std::max_element(cfg.streams.begin(), cfg.streams.end());
    Handles h(std::max(1, max_streams));
    cublasGetVersion(h.blas, &cublas_version);
    doc["machine"] = {{"gpu", prop.name},
                      {"sms", prop.multiProcessorCount},
                      {"cuda_runtime", runtime},
                      {"cublas", cublas_version},
                      {"cusolver", cusolver_version}};
    std::fprintf(stderr, "gpu_probe: %s, cuBLAS %d, cuSOLVER %d\n", prop.name, cublas_version,
                 cusolver_version);
    const double t0 = now_seconds();
    auto run = [&](const char* what, const std::function<json()>& f) {
      if (now_seconds() - t0 > cfg.max_seconds_total) {
        doc["results"].push_back({{"case", what}, {"skipped", "--max-seconds-total reached"}});
        save();
        return;
      }
      json r;
      try {
        r = f();
      } catch (const std::exception& e) {
        r = {{"case", what}, {"error", e.what()}};
      }
      const std::string text = r.dump();
      if (text.find("\"error\"") != std::string::npos) ++failures;
      std::fprintf(stderr, "%s\n", text.c_str());
      doc["results"].push_back(r);
      save();
    };
    for (int n : orders) run("haar", [&, n] { return probe_haar(cfg, h, n); });
    for (const auto& [n, k] : tk)
      run("topk", [&, n = n, k = k] { return probe_topk<double>(cfg, h, n, k); });
    for (const auto& p : precs) {
      const bool f32 = p == "float32";
      for (const auto& [n, c] : inv)
        run("inverse", [&, n = n, c = c] {
          return f32 ? probe_inverse<float>(cfg, h, n, c) : probe_inverse<double>(cfg, h, n, c);
        });
      for (const auto& [n, c] : mm)
        run("gemm", [&, n = n, c = c] {
          return f32 ? probe_gemm<float>(cfg, h, n, c) : probe_gemm<double>(cfg, h, n, c);
        });
      for (const auto& [n, c] : eb)
        run("syev_batched", [&, n = n, c = c] {
          return f32 ? probe_syev_batched<float>(cfg, h, n, c)
                     : probe_syev_batched<double>(cfg, h, n, c);
        });
    }
    doc["wall_seconds"] = now_seconds() - t0;
  } catch (const std::exception& e) {
    doc["error"] = e.what();
    std::fprintf(stderr, "gpu_probe: %s\n", e.what());
    ++failures;
  }
  doc["finished"] = dcalign::bench::utc_timestamp();
  doc["status"] = failures ? "some_failed" : "ok";
  try {
    save();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_probe: %s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
