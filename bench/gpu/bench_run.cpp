// gpu_bench's measurement of one point (bench/gpu/bench_support.hpp): every method resident and
// with upload, ODC's phases, and the console table.
#include "bench_support.hpp"

namespace dcalign::gpu_bench {
namespace {

std::string fmt(double v, const char* f = "%.3f") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

json report_json(const dcalign::AlignReport& rep) {
  json phases = json::object();
  for (const auto& [name, s] : rep.seconds) phases[name] = s;
  return json{{"iterations", rep.iterations},
              {"converged", rep.converged},
              {"total_seconds", rep.total_seconds},
              {"phases", phases}};
}

// ODC's phase split, each phase on its own between CUDA events on the backend's stream:
// products W^T Z (one GEMM, as core::procrustes_step forms them), the polar factors of those
// products (as core::polar_of_products takes them: no orthogonality measurement, doubtful
// float32 users left to the float64 recomputation) and the evaluation (an evaluated
// align_resident less the resident median). Z holds the target of the last run. The medians of
// event_times' 10 timed runs each, and the rest of the resident median (target, checks).
template <typename T>
json odc_phases(Run& run, dcalign::StackView<const T> anchors, dcalign::MatrixView<T> Z,
                dcalign::StackView<T> g, dcalign::AlignOptions opts, double resident_median) {
  auto& p = run.backend.primitives<T>();
  const index_t c = anchors.count(), l = anchors.cols();
  dcalign::Buffer<T> M = p.allocate(c * l * l);
  dcalign::PolarOptions po;
  po.method = opts.polar;
  po.measure_orthogonality = false;
  po.promote = false;
  po.defer_doubtful = true;
  const dcalign::MatrixView<const T> W = anchors.concatenated();
  auto products = [&] {
    p.gemm(dcalign::Op::trans, dcalign::Op::none, T(1), W, dcalign::MatrixView<const T>(Z), T(0),
           dcalign::MatrixView<T>(M.data(), c * l, l));
  };
  products();
  const dcalign::StackView<const T> Ms(M.data(), c, l, l, c * l, l);
  auto polar = [&] { dcalign::polar_factor(p, Ms, false, g, po); };
  opts.evaluate = true;
  auto evaluated = [&] { dcalign::align_resident(p, anchors, g, Z, opts); };
  const double prod = median_of(event_times(run.stream, products)),
               pol = median_of(event_times(run.stream, polar)),
               ev = median_of(event_times(run.stream, evaluated));
  json j;
  j["repetitions"] = 10;
  j["products"] = prod;
  j["polar"] = pol;
  j["rest"] = resident_median - prod - pol;
  j["evaluation"] = ev - resident_median;
  j["evaluated_align"] = ev;
  return j;
}

}  // namespace

void print_header() {
  std::printf("%-18s %-8s %-9s %11s %11s %11s %12s %5s %6s %7s %7s  %s\n", "point (a,l,c)", "prec",
              "method", "resident ms", "p10 ms", "p90 ms", "w/upload ms", "reps", "iters", "BW %",
              "FLOP %", "status");
  std::fflush(stdout);
}

void print_row(const json& r) {
  const std::string pt = std::to_string(r["a"].get<index_t>()) + "," +
                         std::to_string(r["l"].get<index_t>()) + "," +
                         std::to_string(r["c"].get<index_t>());
  auto get = [&](const char* series, const char* key) {
    if (!r.contains(series) || !r[series].contains(key)) return double(NAN);
    return r[series][key].get<double>() * 1e3;
  };
  auto derived = [&](const char* key) {
    if (!r.contains("derived") || !r["derived"].contains(key) || r["derived"][key].is_null())
      return double(NAN);
    return r["derived"][key].get<double>() * 100;
  };
  const long reps = r.contains("resident") ? r["resident"].value("repetitions", 0L) : 0L;
  const long iters = r.contains("report") ? r["report"].value("iterations", 0L) : 0L;
  std::string status = r.value("status", "");
  if (r.contains("reason")) status += " (" + r["reason"].get<std::string>() + ")";
  std::printf("%-18s %-8s %-9s %11s %11s %11s %12s %5ld %6ld %7s %7s  %s\n", pt.c_str(),
              r["precision"].get<std::string>().c_str(), r["method"].get<std::string>().c_str(),
              fmt(get("resident", "median")).c_str(), fmt(get("resident", "p10")).c_str(),
              fmt(get("resident", "p90")).c_str(), fmt(get("with_upload", "median")).c_str(), reps,
              iters, fmt(derived("anchor_bandwidth_fraction"), "%.1f").c_str(),
              fmt(derived("product_flop_fraction"), "%.1f").c_str(), status.c_str());
  std::fflush(stdout);
}

template <typename T>
void run_point_precision(Run& run, const Point& pt, const std::string& precision) {
  const Config& cfg = run.cfg;
  auto& p = run.backend.primitives<T>();
  const index_t n = pt.a * pt.l * pt.c;
  const double anchor_bytes = static_cast<double>(n) * sizeof(T);
  auto base = [&](const std::string& method) {
    return json{
        {"a", pt.a}, {"l", pt.l}, {"c", pt.c}, {"precision", precision}, {"method", method}};
  };
  auto skip_all = [&](const std::string& status, const std::string& reason) {
    for (const auto& m : cfg.methods) {
      json r = base(m);
      r["status"] = status;
      r["reason"] = reason;
      run.doc["results"].push_back(r);
      print_row(r);
    }
    run.save();
  };
  if (run.past_total()) return skip_all("skipped", "--max-seconds-total reached");

  // Memory: the anchors, about as much again for a copy that some methods factorise in place
  // and for workspaces, plus a margin. An estimate; an allocation failure is caught anyway.
  const double need = 3.0 * anchor_bytes + 512.0 * (1 << 20);
  const double avail = static_cast<double>(available_device_memory(cfg.device));
  if (need > avail) {
    char why[160];
    std::snprintf(why, sizeof why, "needs about %.1f GiB of device memory, %.1f GiB available",
                  need / (1 << 30), avail / (1 << 30));
    return skip_all("skipped", why);
  }

  const bool pinned = cfg.host_memory == "pinned";
  double t0 = now_seconds();
  std::unique_ptr<HostBuffer<T>> host;
  dcalign::Buffer<T> A, G, Z;
  double upload_first = NAN, generate_seconds = NAN;
  try {
    host = std::make_unique<HostBuffer<T>>(static_cast<size_t>(n), pinned);
    generate_anchors(host->data(), pt, cfg.seed);
    generate_seconds = now_seconds() - t0;
    A = p.allocate(n);
    G = p.allocate(pt.c * pt.l * pt.l);
    Z = p.allocate(pt.a * pt.l);
    t0 = now_seconds();
    p.to_device(host->data(), A.data(), n);
    p.synchronize();
    upload_first = now_seconds() - t0;
  } catch (const std::exception& e) {
    cudaGetLastError();
    run.any_error = true;
    return skip_all("error", std::string("setting up the point: ") + e.what());
  }
  std::fprintf(stderr,
               "gpu_bench: point (%lld, %lld, %lld) %s: anchors %.2f GiB generated in %.2f s, "
               "first upload %.3f s\n",
               static_cast<long long>(pt.a), static_cast<long long>(pt.l),
               static_cast<long long>(pt.c), precision.c_str(), anchor_bytes / (1 << 30),
               generate_seconds, upload_first);

  dcalign::StackView<const T> anchors(A.data(), pt.c, pt.a, pt.l);
  dcalign::StackView<T> g(G.data(), pt.c, pt.l, pt.l);
  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  const int prec_index = std::is_same_v<T, float> ? 0 : 1;

  for (const auto& method_name : cfg.methods) {
    json r = base(method_name);
    r["anchor_bytes"] = anchor_bytes;
    r["generate_seconds"] = generate_seconds;
    r["first_upload_seconds"] = upload_first;
    if (run.past_total()) {
      r["status"] = "skipped";
      r["reason"] = "--max-seconds-total reached";
      run.doc["results"].push_back(r);
      print_row(r);
      run.save();
      continue;
    }
    dcalign::AlignOptions opts;
    opts.method = dcalign::parse_method(method_name);
    opts.seed = cfg.seed;
    opts.polar = dcalign::parse_polar_method(cfg.polar);
    opts.svd.algorithm = dcalign::parse_svd_algorithm(cfg.svd);
    dcalign::MatrixView<T> target = opts.method == dcalign::Method::kawakami
                                        ? dcalign::MatrixView<T>()
                                        : dcalign::MatrixView<T>(Z.data(), pt.a, pt.l);
    const double series_start = now_seconds();
    auto over_cap = [&] {
      return (cfg.max_seconds_per_series > 0 &&
              now_seconds() - series_start > cfg.max_seconds_per_series) ||
             run.past_total();
    };
    std::vector<double> warm, resident, resident_wall, upload, upload_wall;
    std::string cap_reason;
    try {
      // Once, untimed: an evaluated run for the record (objective, orthogonality).
      opts.evaluate = true;
      double t = now_seconds();
      const auto ev = dcalign::align_resident(p, anchors, g, target, opts);
      p.synchronize();
      r["evaluated"] = {{"objective", ev.objective},
                        {"consensus_objective", ev.consensus_objective},
                        {"orthogonality_error", ev.orthogonality_error},
                        {"constraint_error", ev.constraint_error},
                        {"min_rank_ratio", ev.min_rank_ratio},
                        {"iterations", ev.iterations},
                        {"converged", ev.converged},
                        {"wall_seconds", now_seconds() - t}};
      opts.evaluate = false;

      auto timed = [&](bool with_upload, double* wall) {
        const double w0 = now_seconds();
        BENCH_CUDA(cudaEventRecord(e0, run.stream));
        if (with_upload) p.to_device(host->data(), A.data(), n);
        auto rep = dcalign::align_resident(p, anchors, g, target, opts);
        BENCH_CUDA(cudaEventRecord(e1, run.stream));
        BENCH_CUDA(cudaEventSynchronize(e1));
        *wall = now_seconds() - w0;
        float ms = 0;
        BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        return std::make_pair(static_cast<double>(ms) * 1e-3, std::move(rep));
      };
      dcalign::AlignReport last;
      // The evaluated run above was the first warm-up run.
      for (int w = 1; w < cfg.warmup; ++w) {
        if (over_cap()) {
          cap_reason = "time cap reached during the warm-up runs";
          break;
        }
        double wall = 0;
        warm.push_back(timed(false, &wall).first);
      }
      // At least one timed pair, unless the total cap is reached.
      for (int k = 0; k < cfg.repetitions; ++k) {
        if (k > 0 ? over_cap() : run.past_total()) {
          cap_reason = "time cap reached after " + std::to_string(k) + " of " +
                       std::to_string(cfg.repetitions) + " repetitions";
          break;
        }
        double wall = 0;
        auto res = timed(false, &wall);
        resident.push_back(res.first);
        resident_wall.push_back(wall);
        last = std::move(res.second);
        auto up = timed(true, &wall);
        upload.push_back(up.first);
        upload_wall.push_back(wall);
      }
      r["status"] = cap_reason.empty() ? "ok" : "capped";
      if (!cap_reason.empty()) r["reason"] = cap_reason;
      if (!resident.empty()) r["report"] = report_json(last);
      if (opts.method == dcalign::Method::odc && !resident.empty()) {
        // 39 runs in all (13 of each phase, the evaluated one about twice the resident time).
        const double med = median_of(resident);
        if (39 * 2 * med <= std::max(cfg.max_seconds_per_series, 1.0) && !run.past_total()) {
          r["phases"] = odc_phases(run, anchors, target, g, opts, med);
          const json& ph = r["phases"];
          std::fprintf(stderr,
                       "gpu_bench:   ODC phases (CUDA events, medians): products %.3f ms, polar "
                       "%.3f ms, rest %.3f ms; evaluation %.3f ms more\n",
                       1e3 * ph["products"].get<double>(), 1e3 * ph["polar"].get<double>(),
                       1e3 * ph["rest"].get<double>(), 1e3 * ph["evaluation"].get<double>());
        } else
          r["phases"] = {{"skipped", "the 39 runs of the phase split would exceed the series cap"}};
      }
    } catch (const std::exception& e) {
      cudaGetLastError();
      run.any_error = true;
      r["status"] = "error";
      r["reason"] = e.what();
    }
    r["warmup_seconds"] = warm;
    r["resident"] = stats(resident);
    r["resident"]["seconds"] = resident;
    r["resident"]["wall_median"] =
        resident_wall.empty() ? json(nullptr) : json(median_of(resident_wall));
    r["with_upload"] = stats(upload);
    r["with_upload"]["seconds"] = upload;
    r["with_upload"]["wall_median"] =
        upload_wall.empty() ? json(nullptr) : json(median_of(upload_wall));
    r["series_seconds"] = now_seconds() - series_start;
    if (!resident.empty()) {
      const double med = median_of(resident);
      const double flops = 2.0 * pt.a * static_cast<double>(pt.c) * pt.l * pt.l;
      json d;
      d["anchor_read_bytes_per_s"] = anchor_bytes / med;
      d["anchor_bandwidth_fraction"] = std::isfinite(run.copy_bandwidth)
                                           ? json(anchor_bytes / med / run.copy_bandwidth)
                                           : json(nullptr);
      d["product_flops"] = flops;
      d["product_flops_per_s"] = flops / med;
      d["product_flop_fraction"] = std::isfinite(run.gemm_rate[prec_index])
                                       ? json(flops / med / run.gemm_rate[prec_index])
                                       : json(nullptr);
      if (!upload.empty()) {
        const double extra = median_of(upload) - med;
        d["upload_seconds_estimate"] = extra;
        d["upload_bytes_per_s_estimate"] = extra > 0 ? json(anchor_bytes / extra) : json(nullptr);
      }
      r["derived"] = d;
    }
    run.doc["results"].push_back(r);
    print_row(r);
    run.save();
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

template void run_point_precision<float>(Run&, const Point&, const std::string&);
template void run_point_precision<double>(Run&, const Point&, const std::string&);

}  // namespace dcalign::gpu_bench
