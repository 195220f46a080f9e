#pragma once
// gpu_probe's harness (bench/gpu_probe.cpp): CUDA error checks, device buffers, the shared
// handles and streams, the timing of a case (CUDA events or host clock), the random inputs, and
// the declarations of the cases (bench/gpu/probe_cases.cpp).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dcalign/backend.hpp"
#include "dcalign/random.hpp"
#include "sweep/sweep.hpp"

namespace dcalign::gpu_probe {

using json = nlohmann::ordered_json;
using dcalign::bench::now_seconds;

void check(cudaError_t e, const char* what);
void check(cublasStatus_t s, const char* what);
void check(cusolverStatus_t s, const char* what);
#define PROBE(call) ::dcalign::gpu_probe::check((call), #call)

/// Device memory freed on scope exit.
template <typename T>
struct Dev {
  T* p = nullptr;
  explicit Dev(size_t n) {
    PROBE(cudaMalloc(reinterpret_cast<void**>(&p), sizeof(T) * (n ? n : 1)));
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

template <typename T>
cudaDataType data_type() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;
}

/// The probe's parameters.
struct Config {
  int repetitions = 10, warmup = 2;
  double max_seconds_per_case = 3, max_seconds_total = 90;
  std::uint64_t seed = 20261127;
  std::vector<int> streams{1, 4, 8};
};

/// Repetitions, median, min and max of times in ms (both kinds of case report these).
json summary_ms(std::vector<double> ms);
/// Times `run` (which queues work on `stream`) with CUDA events: up to `warmup` untimed runs,
/// then up to cfg.repetitions timed ones (at least one) while the case is under its cap. Median,
/// min and max in ms.
json time_case(const Config& cfg, cudaStream_t stream, const std::function<void()>& run);
/// Host seconds of `f`, median of up to cfg.repetitions runs under the case cap.
json time_host(const Config& cfg, const std::function<void()>& f);

/// `count` values with mean 0 and variance 1 (uniform on [-sqrt 3, sqrt 3), several times cheaper
/// to draw than normal variates; a Gram matrix of them has the Marchenko-Pastur spectrum of a
/// Gaussian one) from the seed, on the device.
template <typename T>
void upload_random(T* dst, size_t count, std::uint64_t seed, std::uint64_t stream_id) {
  dcalign::Rng rng = dcalign::Rng::stream(seed, stream_id);
  std::vector<T> h(count);
  for (auto& x : h) x = static_cast<T>((rng.uniform() - 0.5) * 3.4641016151377544);
  PROBE(cudaMemcpy(dst, h.data(), sizeof(T) * count, cudaMemcpyHostToDevice));
}

/// Shared handles of one run.
struct Handles {
  cudaStream_t main = nullptr;
  cublasHandle_t blas = nullptr;
  std::vector<cudaStream_t> side;
  std::vector<cusolverDnHandle_t> solver;  // solver[i] on side[i]
  cusolverDnParams_t params = nullptr;
  std::vector<cudaEvent_t> done;
  cudaEvent_t fork = nullptr;
  explicit Handles(int streams) {
    PROBE(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
    PROBE(cublasCreate(&blas));
    PROBE(cublasSetStream(blas, main));
    PROBE(cusolverDnCreateParams(&params));
    PROBE(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    side.resize(streams);
    solver.resize(streams);
    done.resize(streams);
    for (int i = 0; i < streams; ++i) {
      PROBE(cudaStreamCreateWithFlags(&side[i], cudaStreamNonBlocking));
      PROBE(cusolverDnCreate(&solver[i]));
      PROBE(cusolverDnSetStream(solver[i], side[i]));
      PROBE(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
    }
  }
  ~Handles() {
    for (size_t i = 0; i < side.size(); ++i) {
      cusolverDnDestroy(solver[i]);
      cudaStreamDestroy(side[i]);
      cudaEventDestroy(done[i]);
    }
    cudaEventDestroy(fork);
    cusolverDnDestroyParams(params);
    cublasDestroy(blas);
    cudaStreamDestroy(main);
  }
  /// The first `used` side streams wait for the main stream's work so far.
  void fork_to(int used) {
    PROBE(cudaEventRecord(fork, main));
    for (int i = 0; i < used; ++i) PROBE(cudaStreamWaitEvent(side[i], fork, 0));
  }
  /// The main stream waits for the first `used` side streams.
  void join(int used) {
    for (int i = 0; i < used; ++i) {
      PROBE(cudaEventRecord(done[i], side[i]));
      PROBE(cudaStreamWaitEvent(main, done[i], 0));
    }
  }
};

/// The fields every batched case starts with.
template <typename T>
json case_header(const char* name, int n, int c, bool flops) {
  json out;
  out["case"] = name;
  out["n"] = n;
  out["count"] = c;
  out["precision"] = std::is_same_v<T, float> ? "float32" : "float64";
  if (flops) out["flops_per_run"] = 2.0 * static_cast<double>(n) * n * n * c;
  return out;
}

// The cases (bench/gpu/probe_cases.cpp), for float and double where a case has both.
template <typename T>
json probe_inverse(const Config& cfg, Handles& h, int n, int c);
template <typename T>
json probe_gemm(const Config& cfg, Handles& h, int n, int c);
template <typename T>
json probe_syev_batched(const Config& cfg, Handles& h, int n, int c);
template <typename T>
json probe_topk(const Config& cfg, Handles& h, int n, int k);
json probe_haar(const Config& cfg, Handles& h, int n);

/// The whole of `text` as an integer in 1..hi, or an error naming the option.
int parse_count(const std::string& text, const char* option, int hi);
/// "950x50,500x50" -> {(950, 50), (500, 50)} with the separator `sep`; "" -> none. Sizes are
/// bounded by 16384, counts by 100000.
std::vector<std::pair<int, int>> parse_pairs(const std::string& spec, char sep, const char* option);

}  // namespace dcalign::gpu_probe
