// gpu_bench's support (bench/gpu/bench_support.hpp).
#include "bench_support.hpp"

namespace dcalign::gpu_bench {

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

int host_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::max(1u, std::min(n, 64u)));
}

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

template json measure_gemm<float>(size_t);
template json measure_gemm<double>(size_t);

}  // namespace dcalign::gpu_bench
