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
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/random.hpp"
#include "sweep/sweep.hpp"

namespace {

using json = nlohmann::ordered_json;
using dcalign::index_t;

// ---------------------------------------------------------------------------------------------
// Small utilities

#define BENCH_CUDA(call)                                                                     \
  do {                                                                                       \
    const cudaError_t err_ = (call);                                                         \
    if (err_ != cudaSuccess)                                                                 \
      throw std::runtime_error(std::string(#call) + " failed: " + cudaGetErrorString(err_)); \
  } while (0)

#define BENCH_CUBLAS(call)                                                      \
  do {                                                                          \
    const cublasStatus_t st_ = (call);                                          \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                           \
      throw std::runtime_error(std::string(#call) + " failed: cuBLAS status " + \
                               std::to_string(static_cast<int>(st_)));          \
  } while (0)

using dcalign::bench::now_seconds;
using dcalign::bench::utc_timestamp;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) {
    cur.erase(0, cur.find_first_not_of(" \t"));
    cur.erase(cur.find_last_not_of(" \t") + 1);
    if (!cur.empty()) out.push_back(cur);
  }
  return out;
}

struct Point {
  index_t a = 0, l = 0, c = 0;
};

std::vector<Point> parse_points(const std::string& spec) {
  std::vector<Point> points;
  for (const auto& item : split(spec, ';')) {
    const auto v = split(item, ',');
    if (v.size() != 3) throw std::invalid_argument("--points: '" + item + "' is not 'a,l,c'");
    Point p;
    try {
      p.a = std::stoll(v[0]);
      p.l = std::stoll(v[1]);
      p.c = std::stoll(v[2]);
    } catch (const std::exception&) {
      throw std::invalid_argument("--points: '" + item + "' is not three integers a,l,c");
    }
    if (p.a < 1 || p.l < 1 || p.c < 1 || p.l > p.a)
      throw std::invalid_argument("--points: '" + item + "' needs a >= l >= 1 and c >= 1");
    points.push_back(p);
  }
  if (points.empty()) throw std::invalid_argument("--points: no point given");
  return points;
}

/// Median, min, max, mean and the 10th/90th percentiles (linear interpolation between order
/// statistics, NumPy's default) of a list of times.
json stats(std::vector<double> t) {
  json j;
  j["repetitions"] = t.size();
  if (t.empty()) return j;
  std::sort(t.begin(), t.end());
  auto q = [&](double p) {
    const double x = p * static_cast<double>(t.size() - 1);
    const auto i = static_cast<size_t>(std::floor(x));
    const size_t k = std::min(i + 1, t.size() - 1);
    return t[i] + (x - static_cast<double>(i)) * (t[k] - t[i]);
  };
  double sum = 0;
  for (double x : t) sum += x;
  j["median"] = q(0.5);
  j["min"] = t.front();
  j["p10"] = q(0.1);
  j["p90"] = q(0.9);
  j["max"] = t.back();
  j["mean"] = sum / static_cast<double>(t.size());
  return j;
}

double median_of(std::vector<double> t) {
  if (t.empty()) return NAN;
  return stats(std::move(t))["median"].get<double>();
}

void write_json_atomically(const std::string& path, const json& j) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) throw std::runtime_error("cannot write " + tmp);
    f << j.dump(2) << "\n";
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + tmp + " to " + path);
}

/// Host memory for the anchors: pinned (cudaMallocHost) or pageable (operator new).
template <typename T>
class HostBuffer {
 public:
  HostBuffer(size_t n, bool pinned) : n_(n), pinned_(pinned) {
    if (pinned_) {
      void* p = nullptr;
      if (cudaMallocHost(&p, n * sizeof(T)) == cudaSuccess) {
        p_ = static_cast<T*>(p);
        return;
      }
      cudaGetLastError();
      throw std::runtime_error("cudaMallocHost of " + std::to_string(n * sizeof(T)) +
                               " bytes failed (use --host-memory pageable)");
    }
    p_ = new T[n];
  }
  ~HostBuffer() {
    if (pinned_)
      cudaFreeHost(p_);
    else
      delete[] p_;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  T* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
  bool pinned_ = false;
};

int host_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::max(1u, std::min(n, 64u)));
}

/// Anchor stack (c matrices a x l, column-major, back to back) with i.i.d. N(0, 1) entries:
/// user i's block from Rng::stream(point_seed, i), so the numbers depend on the seed and the
/// point only (not on the thread count); float32 anchors are the float64 draws rounded.
template <typename T>
void generate_anchors(T* out, const Point& p, std::uint64_t seed) {
  const std::uint64_t point_seed = seed ^ (static_cast<std::uint64_t>(p.a) << 40) ^
                                   (static_cast<std::uint64_t>(p.l) << 20) ^
                                   static_cast<std::uint64_t>(p.c);
  const index_t block = p.a * p.l;
  const int nt = static_cast<int>(std::min<index_t>(host_threads(), p.c));
  std::vector<std::thread> pool;
  for (int t = 0; t < nt; ++t)
    pool.emplace_back([=] {
      for (index_t i = t; i < p.c; i += nt) {
        dcalign::Rng rng = dcalign::Rng::stream(point_seed, static_cast<std::uint64_t>(i));
        T* dst = out + i * block;
        for (index_t k = 0; k < block; ++k) dst[k] = static_cast<T>(rng.normal());
      }
    });
  for (auto& th : pool) th.join();
}

// ---------------------------------------------------------------------------------------------
// Machine description and reference rates

json describe_machine(int device, dcalign::Backend* backend) {
  json m;
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int cublas_version = 0;
  {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
      cublasGetVersion(h, &cublas_version);
      cublasDestroy(h);
    }
  }
  auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  };
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  char bus[32] = {0};
  cudaDeviceGetPCIBusId(bus, sizeof bus, device);
  m["gpu"] = {{"name", prop.name},
              {"device", device},
              {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
              {"multiprocessors", prop.multiProcessorCount},
              {"memory_bytes", total_b},
              {"memory_free_bytes_at_start", free_b},
              {"l2_bytes", prop.l2CacheSize},
              {"pci_bus_id", bus}};
  m["cuda_driver_version"] = version(driver);
  m["cuda_runtime_version"] = version(runtime);
  m["cublas_version"] = cublas_version;
  if (backend) m["backend"] = backend->description();
  m["host"] = {{"logical_cpus", std::thread::hardware_concurrency()}};
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line))
    if (line.rfind("model name", 0) == 0) {
      m["host"]["cpu_model"] = line.substr(line.find(':') + 2);
      break;
    }
  return m;
}

/// Seconds of `work` (queued on stream s) by CUDA events: 3 untimed and 10 timed runs.
template <typename Work>
std::vector<double> event_times(cudaStream_t s, Work&& work) {
  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  std::vector<double> times;
  for (int r = 0; r < 13; ++r) {
    BENCH_CUDA(cudaEventRecord(e0, s));
    work();
    BENCH_CUDA(cudaEventRecord(e1, s));
    BENCH_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 3) times.push_back(ms * 1e-3);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return times;
}

/// Device-to-device copy bandwidth, counting the bytes read and written.
json measure_copy(size_t free_bytes) {
  size_t bytes = size_t(2) << 30;
  while (bytes > (size_t(64) << 20) && 2 * bytes > free_bytes / 2) bytes /= 2;
  void *src = nullptr, *dst = nullptr;
  BENCH_CUDA(cudaMalloc(&src, bytes));
  BENCH_CUDA(cudaMalloc(&dst, bytes));
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  BENCH_CUDA(cudaMemsetAsync(src, 1, bytes, s));
  const std::vector<double> times = event_times(
      s, [&] { BENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)); });
  cudaStreamDestroy(s);
  cudaFree(src);
  cudaFree(dst);
  json j = {{"bytes_per_copy", bytes}, {"seconds", times}};
  const double med = median_of(times);
  j["median"] = med;
  j["bandwidth_bytes_per_s"] = 2.0 * static_cast<double>(bytes) / med;
  j["note"] = "cudaMemcpyAsync device to device; bandwidth counts bytes read plus bytes written";
  return j;
}

/// cuBLAS GEMM rate (default math mode: no TF32 for float) on n x n random matrices.
template <typename T>
json measure_gemm(size_t free_bytes) {
  int n = 8192;
  while (n > 1024 && 3.0 * n * n * sizeof(T) > 0.5 * static_cast<double>(free_bytes)) n /= 2;
  const size_t nn = size_t(n) * size_t(n);
  std::vector<T> host(nn);
  dcalign::Rng rng(12345);
  for (auto& x : host) x = static_cast<T>(rng.uniform() - 0.5);
  void *pa = nullptr, *pb = nullptr, *pc = nullptr;
  BENCH_CUDA(cudaMalloc(&pa, nn * sizeof(T)));
  BENCH_CUDA(cudaMalloc(&pb, nn * sizeof(T)));
  BENCH_CUDA(cudaMalloc(&pc, nn * sizeof(T)));
  T* A = static_cast<T*>(pa);
  T* B = static_cast<T*>(pb);
  T* C = static_cast<T*>(pc);
  BENCH_CUDA(cudaMemcpy(A, host.data(), nn * sizeof(T), cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemcpy(B, host.data(), nn * sizeof(T), cudaMemcpyHostToDevice));
  cublasHandle_t h;
  BENCH_CUBLAS(cublasCreate(&h));
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  BENCH_CUBLAS(cublasSetStream(h, s));
  const T one = 1, zero = 0;
  const std::vector<double> times = event_times(s, [&] {
    if constexpr (std::is_same_v<T, float>)
      BENCH_CUBLAS(
          cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, n, B, n, &zero, C, n));
    else
      BENCH_CUBLAS(
          cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, n, B, n, &zero, C, n));
  });
  cublasDestroy(h);
  cudaStreamDestroy(s);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  const double med = median_of(times);
  return json{{"n", n},
              {"seconds", times},
              {"median", med},
              {"flops_per_s", 2.0 * n * static_cast<double>(n) * n / med},
              {"note", std::string(std::is_same_v<T, float> ? "cublasSgemm" : "cublasDgemm") +
                           ", default math mode (no TF32), uniform [-0.5, 0.5) entries"}};
}

/// Device memory a point may use: what the driver has free plus what the stream-ordered pool
/// holds cached but unused (the CUDA backend allocates from the default pool).
size_t available_device_memory(int device) {
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
    std::uint64_t reserved = 0, used = 0;
    if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) ==
            cudaSuccess &&
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess &&
        reserved > used)
      free_b += static_cast<size_t>(reserved - used);
  }
  cudaGetLastError();
  return free_b;
}

// ---------------------------------------------------------------------------------------------
// The measurements

struct Config {
  std::vector<Point> points;
  std::vector<std::string> methods, precisions;
  int repetitions = 20, warmup = 3;
  std::uint64_t seed = 20240601;
  double max_seconds_per_series = 60, max_seconds_total = 0;
  std::string polar = "auto", svd = "gram", host_memory = "pageable", upload = "staged", json_path;
  int device = 0;
  std::int64_t inverse_per_matrix_from = 0;
  bool references = true;
};

struct Run {
  const Config& cfg;
  dcalign::Backend& backend;
  cudaStream_t stream;
  json& doc;
  double t_start = now_seconds();
  double copy_bandwidth = NAN;
  double gemm_rate[2] = {NAN, NAN};  // float32, float64
  bool any_error = false;

  bool past_total() const {
    return cfg.max_seconds_total > 0 && now_seconds() - t_start > cfg.max_seconds_total;
  }
  void save() { write_json_atomically(cfg.json_path, doc); }
};

std::string fmt(double v, const char* f = "%.3f") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

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

}  // namespace

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
