#pragma once
// gpu_bench's support (bench/gpu_bench.cpp): the points and the timing statistics, host buffers,
// the anchors, the machine's description, CUDA-event timing and the copy and GEMM references;
// and the measurement of one point (bench/gpu/bench_run.cpp).
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

namespace dcalign::gpu_bench {

using json = nlohmann::ordered_json;
using dcalign::index_t;

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

std::vector<std::string> split(const std::string& s, char sep);
struct Point {
  index_t a = 0, l = 0, c = 0;
};
std::vector<Point> parse_points(const std::string& spec);
json stats(std::vector<double> t);
double median_of(std::vector<double> t);
void write_json_atomically(const std::string& path, const json& j);
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
int host_threads();
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
json describe_machine(int device, dcalign::Backend* backend);
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
json measure_copy(size_t free_bytes);
template <typename T>
json measure_gemm(size_t free_bytes);
size_t available_device_memory(int device);

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

/// The table's header and one row (the console output).
void print_header();
void print_row(const json& r);
/// One point in one precision: every method, resident and with upload (bench/gpu/bench_run.cpp).
template <typename T>
void run_point_precision(Run& run, const Point& pt, const std::string& precision);

}  // namespace dcalign::gpu_bench
