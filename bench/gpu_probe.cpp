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

#include "core/common.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/random.hpp"
#include "sweep/sweep.hpp"

namespace {

using json = nlohmann::ordered_json;
using dcalign::bench::now_seconds;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " +
                             std::to_string(static_cast<int>(s)));
}
void check(cusolverStatus_t s, const char* what) {
  if (s != CUSOLVER_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuSOLVER status " +
                             std::to_string(static_cast<int>(s)));
}
#define PROBE(call) check((call), #call)

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
json summary_ms(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t m = ms.size();
  json j;
  j["repetitions"] = m;
  j["median_ms"] = m % 2 ? ms[m / 2] : 0.5 * (ms[m / 2 - 1] + ms[m / 2]);
  j["min_ms"] = ms.front();
  j["max_ms"] = ms.back();
  return j;
}

/// Times `run` (which queues work on `stream`) with CUDA events: up to `warmup` untimed runs,
/// then up to cfg.repetitions timed ones (at least one) while the case is under its cap. Median,
/// min and max in ms.
json time_case(const Config& cfg, cudaStream_t stream, const std::function<void()>& run) {
  cudaEvent_t start, stop;
  PROBE(cudaEventCreate(&start));
  PROBE(cudaEventCreate(&stop));
  std::vector<double> ms;
  const double t0 = now_seconds();
  try {
    for (int i = 0; i < cfg.warmup; ++i) {  // the cap bounds warm-up runs too, but one runs
      if (i > 0 && now_seconds() - t0 > cfg.max_seconds_per_case) break;
      run();
    }
    PROBE(cudaStreamSynchronize(stream));
    for (int i = 0; i < cfg.repetitions; ++i) {
      if (i > 0 && now_seconds() - t0 > cfg.max_seconds_per_case) break;
      PROBE(cudaEventRecord(start, stream));
      run();
      PROBE(cudaEventRecord(stop, stream));
      PROBE(cudaEventSynchronize(stop));
      float e = 0;
      PROBE(cudaEventElapsedTime(&e, start, stop));
      ms.push_back(e);
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return summary_ms(std::move(ms));
}

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

/// max |X Y - I| of one n x n pair on the device (a GEMM, then the host reads n^2 values).
template <typename T>
double inverse_residual(cublasHandle_t blas, const T* X, const T* Y, int n) {
  Dev<T> r(static_cast<size_t>(n) * n);
  const T one = 1, zero = 0;
  PROBE(cublasGemmEx(
      blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, X, data_type<T>(), n, Y, data_type<T>(), n,
      &zero, r.p, data_type<T>(), n,
      std::is_same_v<T, float> ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_64F_PEDANTIC,
      CUBLAS_GEMM_DEFAULT));
  std::vector<T> h(static_cast<size_t>(n) * n);
  PROBE(cudaMemcpy(h.data(), r.p, sizeof(T) * h.size(), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i)
      worst = std::max(worst, std::abs(static_cast<double>(h[static_cast<size_t>(j) * n + i]) -
                                       (i == j ? 1.0 : 0.0)));
  return worst;
}

cublasStatus_t getrf_batched(cublasHandle_t h, int n, float* const a[], int* piv, int* info,
                             int count) {
  return cublasSgetrfBatched(h, n, a, n, piv, info, count);
}
cublasStatus_t getrf_batched(cublasHandle_t h, int n, double* const a[], int* piv, int* info,
                             int count) {
  return cublasDgetrfBatched(h, n, a, n, piv, info, count);
}
cublasStatus_t getri_batched(cublasHandle_t h, int n, const float* const a[], const int* piv,
                             float* const y[], int* info, int count) {
  return cublasSgetriBatched(h, n, a, n, piv, y, n, info, count);
}
cublasStatus_t getri_batched(cublasHandle_t h, int n, const double* const a[], const int* piv,
                             double* const y[], int* info, int count) {
  return cublasDgetriBatched(h, n, a, n, piv, y, n, info, count);
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

template <typename T>
json probe_inverse(const Config& cfg, Handles& h, int n, int c) {
  const size_t nn = static_cast<size_t>(n) * n, total = nn * c;
  Dev<T> X(total), LU(total), Y(total), eye(total);
  upload_random(X.p, total, cfg.seed, 1);
  {
    std::vector<T> id(total, T(0));
    for (int k = 0; k < c; ++k)
      for (int i = 0; i < n; ++i) id[k * nn + static_cast<size_t>(i) * (n + 1)] = T(1);
    PROBE(cudaMemcpy(eye.p, id.data(), sizeof(T) * total, cudaMemcpyHostToDevice));
  }
  json out = case_header<T>("inverse", n, c, true);
  json routes = json::object();
  // cuBLAS batched LU and inverse from pointer arrays (src/cuda/polar_ops.cu, n > 32).
  {
    std::vector<T*> pa(c), py(c);
    for (int k = 0; k < c; ++k) {
      pa[k] = LU.p + k * nn;
      py[k] = Y.p + k * nn;
    }
    Dev<T*> dpa(c), dpy(c);
    Dev<int> piv(static_cast<size_t>(n) * c), info(c);
    PROBE(cudaMemcpy(dpa.p, pa.data(), sizeof(T*) * c, cudaMemcpyHostToDevice));
    PROBE(cudaMemcpy(dpy.p, py.data(), sizeof(T*) * c, cudaMemcpyHostToDevice));
    json r;
    try {
      r = time_case(cfg, h.main, [&] {
        PROBE(cudaMemcpyAsync(LU.p, X.p, sizeof(T) * total, cudaMemcpyDeviceToDevice, h.main));
        PROBE(getrf_batched(h.blas, n, dpa.p, piv.p, info.p, c));
        PROBE(getri_batched(h.blas, n, dpa.p, piv.p, dpy.p, info.p, c));
      });
      r["residual_first"] = inverse_residual(h.blas, X.p, Y.p, n);
    } catch (const std::exception& e) {
      r["error"] = e.what();
    }
    routes["cublas_getrf_getri_batched"] = r;
  }
  // cuSOLVER 64-bit getrf + getrs against I, one matrix per call, round robin over s streams.
  for (int s : cfg.streams) {
    if (s < 1 || s > static_cast<int>(h.side.size())) continue;
    json r;
    try {
      size_t dev_bytes = 0, host_bytes = 0;
      PROBE(cusolverDnXgetrf_bufferSize(h.solver[0], h.params, n, n, data_type<T>(), X.p, n,
                                        data_type<T>(), &dev_bytes, &host_bytes));
      std::vector<std::unique_ptr<Dev<char>>> work;
      std::vector<std::vector<char>> host_work(s, std::vector<char>(host_bytes ? host_bytes : 1));
      for (int i = 0; i < s; ++i) work.push_back(std::make_unique<Dev<char>>(dev_bytes));
      Dev<std::int64_t> piv(static_cast<size_t>(n) * c);
      Dev<int> info(c);
      r = time_case(cfg, h.main, [&] {
        PROBE(cudaMemcpyAsync(LU.p, X.p, sizeof(T) * total, cudaMemcpyDeviceToDevice, h.main));
        PROBE(cudaMemcpyAsync(Y.p, eye.p, sizeof(T) * total, cudaMemcpyDeviceToDevice, h.main));
        h.fork_to(s);
        for (int k = 0; k < c; ++k) {
          const int i = k % s;
          PROBE(cusolverDnXgetrf(h.solver[i], h.params, n, n, data_type<T>(), LU.p + k * nn, n,
                                 piv.p + static_cast<size_t>(k) * n, data_type<T>(), work[i]->p,
                                 dev_bytes, host_work[i].data(), host_bytes, info.p + k));
          PROBE(cusolverDnXgetrs(h.solver[i], h.params, CUBLAS_OP_N, n, n, data_type<T>(),
                                 LU.p + k * nn, n, piv.p + static_cast<size_t>(k) * n,
                                 data_type<T>(), Y.p + k * nn, n, info.p + k));
        }
        h.join(s);
      });
      r["residual_first"] = inverse_residual(h.blas, X.p, Y.p, n);
    } catch (const std::exception& e) {
      r["error"] = e.what();
    }
    routes["cusolver_getrf_getrs_streams_" + std::to_string(s)] = r;
  }
  out["routes"] = routes;
  return out;
}

template <typename T>
json probe_gemm(const Config& cfg, Handles& h, int n, int c) {
  const size_t nn = static_cast<size_t>(n) * n, total = nn * c;
  Dev<T> A(total), B(total), C(total);
  upload_random(A.p, total, cfg.seed, 2);
  upload_random(B.p, total, cfg.seed, 3);
  json out = case_header<T>("gemm", n, c, true);
  const T one = 1, zero = 0;
  const auto nnl = static_cast<long long>(nn);
  try {
    out["timing"] = time_case(cfg, h.main, [&] {
      PROBE(cublasGemmStridedBatchedEx(
          h.blas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, A.p, data_type<T>(), n, nnl, B.p,
          data_type<T>(), n, nnl, &zero, C.p, data_type<T>(), n, nnl, c,
          std::is_same_v<T, float> ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_64F_PEDANTIC,
          CUBLAS_GEMM_DEFAULT));
    });
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  return out;
}

/// c symmetric positive semidefinite n x n Gram matrices W_k^T W_k (W_k m x n random) on the
/// device, back to back.
template <typename T>
void upload_grams(Handles& h, T* S, int n, int m, int c, std::uint64_t seed) {
  Dev<T> W(static_cast<size_t>(m) * n);
  const T one = 1, zero = 0;
  for (int k = 0; k < c; ++k) {
    upload_random(W.p, static_cast<size_t>(m) * n, seed, 100 + static_cast<std::uint64_t>(k));
    PROBE(cublasGemmEx(
        h.blas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, m, &one, W.p, data_type<T>(), m, W.p,
        data_type<T>(), m, &zero, S + static_cast<size_t>(k) * n * n, data_type<T>(), n,
        std::is_same_v<T, float> ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_64F_PEDANTIC,
        CUBLAS_GEMM_DEFAULT));
    PROBE(cudaStreamSynchronize(h.main));
  }
}

template <typename T>
json probe_syev_batched(const Config& cfg, Handles& h, int n, int c) {
  const size_t total = static_cast<size_t>(n) * n * c;
  json out = case_header<T>("syev_batched", n, c, false);
  try {
    Dev<T> S(total), A(total), w(static_cast<size_t>(n) * c);
    Dev<int> info(c);
    upload_grams(h, S.p, n, 2 * n, c, cfg.seed);
    PROBE(cusolverDnSetStream(h.solver[0], h.main));
    size_t dev_bytes = 0, host_bytes = 0;
    PROBE(cusolverDnXsyevBatched_bufferSize(
        h.solver[0], h.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, data_type<T>(),
        A.p, n, data_type<T>(), w.p, data_type<T>(), &dev_bytes, &host_bytes, c));
    Dev<char> work(dev_bytes);
    std::vector<char> host_work(host_bytes ? host_bytes : 1);
    out["timing"] = time_case(cfg, h.main, [&] {
      PROBE(cudaMemcpyAsync(A.p, S.p, sizeof(T) * total, cudaMemcpyDeviceToDevice, h.main));
      PROBE(cusolverDnXsyevBatched(h.solver[0], h.params, CUSOLVER_EIG_MODE_VECTOR,
                                   CUBLAS_FILL_MODE_LOWER, n, data_type<T>(), A.p, n,
                                   data_type<T>(), w.p, data_type<T>(), work.p, dev_bytes,
                                   host_work.data(), host_bytes, info.p, c));
    });
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  cusolverDnSetStream(h.solver[0], h.side[0]);
  return out;
}

template <typename T>
json probe_topk(const Config& cfg, Handles& h, int n, int k) {
  const size_t nn = static_cast<size_t>(n) * n;
  json out;
  out["case"] = "topk";
  out["n"] = n;
  out["k"] = k;
  out["precision"] = std::is_same_v<T, float> ? "float32" : "float64";
  json routes = json::object();
  try {
    Dev<T> S(nn), A(nn), w(n);
    Dev<int> info(1);
    upload_grams(h, S.p, n, 4 * n, 1, cfg.seed);
    PROBE(cusolverDnSetStream(h.solver[0], h.main));
    auto copy_in = [&] {
      PROBE(cudaMemcpyAsync(A.p, S.p, sizeof(T) * nn, cudaMemcpyDeviceToDevice, h.main));
    };
    {
      json r;
      try {
        T vl = 0, vu = 0;
        std::int64_t found = 0;
        size_t dev_bytes = 0, host_bytes = 0;
        PROBE(cusolverDnXsyevdx_bufferSize(
            h.solver[0], h.params, CUSOLVER_EIG_MODE_VECTOR, CUSOLVER_EIG_RANGE_I,
            CUBLAS_FILL_MODE_LOWER, n, data_type<T>(), A.p, n, &vl, &vu, n - k + 1, n, &found,
            data_type<T>(), w.p, data_type<T>(), &dev_bytes, &host_bytes));
        Dev<char> work(dev_bytes);
        std::vector<char> host_work(host_bytes ? host_bytes : 1);
        r = time_case(cfg, h.main, [&] {
          copy_in();
          PROBE(cusolverDnXsyevdx(h.solver[0], h.params, CUSOLVER_EIG_MODE_VECTOR,
                                  CUSOLVER_EIG_RANGE_I, CUBLAS_FILL_MODE_LOWER, n, data_type<T>(),
                                  A.p, n, &vl, &vu, n - k + 1, n, &found, data_type<T>(), w.p,
                                  data_type<T>(), work.p, dev_bytes, host_work.data(), host_bytes,
                                  info.p));
        });
        r["eigenpairs"] = found;
      } catch (const std::exception& e) {
        r["error"] = e.what();
      }
      routes["syevdx_top_k"] = r;
    }
    {
      json r;
      try {
        size_t dev_bytes = 0, host_bytes = 0;
        PROBE(cusolverDnXsyevd_bufferSize(
            h.solver[0], h.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n,
            data_type<T>(), A.p, n, data_type<T>(), w.p, data_type<T>(), &dev_bytes, &host_bytes));
        Dev<char> work(dev_bytes);
        std::vector<char> host_work(host_bytes ? host_bytes : 1);
        r = time_case(cfg, h.main, [&] {
          copy_in();
          PROBE(cusolverDnXsyevd(h.solver[0], h.params, CUSOLVER_EIG_MODE_VECTOR,
                                 CUBLAS_FILL_MODE_LOWER, n, data_type<T>(), A.p, n, data_type<T>(),
                                 w.p, data_type<T>(), work.p, dev_bytes, host_work.data(),
                                 host_bytes, info.p));
        });
      } catch (const std::exception& e) {
        r["error"] = e.what();
      }
      routes["syevd_all"] = r;
    }
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  cusolverDnSetStream(h.solver[0], h.side[0]);
  out["routes"] = routes;
  return out;
}

/// Host seconds of `f`, median of up to cfg.repetitions runs under the case cap.
json time_host(const Config& cfg, const std::function<void()>& f) {
  std::vector<double> t;
  const double t0 = now_seconds();
  for (int i = 0; i < cfg.repetitions; ++i) {
    if (i > 0 && now_seconds() - t0 > cfg.max_seconds_per_case) break;
    const double s = now_seconds();
    f();
    t.push_back(1e3 * (now_seconds() - s));
  }
  return summary_ms(std::move(t));
}

json probe_haar(const Config& cfg, Handles& h, int n) {
  json out;
  out["case"] = "haar";
  out["n"] = n;
  json routes = json::object();
  // As src/core/validate.cpp draws ODC's O (same stream id), on this machine's host.
  routes["host_random_orthogonal"] = time_host(cfg, [&] {
    dcalign::Rng rng = dcalign::Rng::stream(cfg.seed, dcalign::core::kHaarStream);
    (void)dcalign::random_orthogonal<double>(n, rng);
  });
  routes["host_gaussian_only"] = time_host(cfg, [&] {
    dcalign::Rng rng = dcalign::Rng::stream(cfg.seed, dcalign::core::kHaarStream);
    (void)dcalign::random_normal<double>(n, n, rng);
  });
  json r;
  try {
    const size_t nn = static_cast<size_t>(n) * n;
    Dev<double> G(nn), Q(nn), tau(n);
    Dev<int> info(1);
    upload_random(G.p, nn, cfg.seed, dcalign::core::kHaarStream);
    PROBE(cusolverDnSetStream(h.solver[0], h.main));
    int lw_qr = 0, lw_org = 0;
    PROBE(cusolverDnDgeqrf_bufferSize(h.solver[0], n, n, Q.p, n, &lw_qr));
    PROBE(cusolverDnDorgqr_bufferSize(h.solver[0], n, n, n, Q.p, n, tau.p, &lw_org));
    Dev<double> work(static_cast<size_t>(std::max(lw_qr, lw_org)));
    r = time_case(cfg, h.main, [&] {
      PROBE(cudaMemcpyAsync(Q.p, G.p, sizeof(double) * nn, cudaMemcpyDeviceToDevice, h.main));
      PROBE(cusolverDnDgeqrf(h.solver[0], n, n, Q.p, n, tau.p, work.p, lw_qr, info.p));
      PROBE(cusolverDnDorgqr(h.solver[0], n, n, n, Q.p, n, tau.p, work.p, lw_org, info.p));
    });
  } catch (const std::exception& e) {
    r["error"] = e.what();
  }
  cusolverDnSetStream(h.solver[0], h.side[0]);
  routes["device_geqrf_orgqr_float64"] = r;
  // The route that ODC takes on a GPU from l = haar_on_backend_from on (src/core/odc.cpp): the
  // host's Gaussian, uploaded, the backend's qr_batched in float64 (CholeskyQR2 first), R's
  // diagonal read back, the sign flips; wall time to the finished O, against the first route
  // plus its upload.
  try {
    const auto backend = dcalign::make_backend(dcalign::Device::cuda);
    auto& p = backend->f64();
    routes["library_on_backend_float64"] = time_host(cfg, [&] {
      (void)dcalign::core::haar_rotation_on_backend(p, cfg.seed, n);
      p.synchronize();
    });
  } catch (const std::exception& e) {
    routes["library_on_backend_float64"] = json{{"error", e.what()}};
  }
  out["routes"] = routes;
  return out;
}

/// The whole of `text` as an integer in 1..hi, or an error naming the option.
int parse_count(const std::string& text, const char* option, int hi) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 1 || v > hi)
    throw std::invalid_argument(std::string(option) + ": '" + text + "' is not an integer in 1.." +
                                std::to_string(hi));
  return static_cast<int>(v);
}

/// "950x50,500x50" -> {(950, 50), (500, 50)} with the separator `sep`; "" -> none. Sizes are
/// bounded by 16384, counts by 100000.
std::vector<std::pair<int, int>> parse_pairs(const std::string& spec, char sep,
                                             const char* option) {
  std::vector<std::pair<int, int>> out;
  std::istringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto at = item.find(sep);
    if (at == std::string::npos)
      throw std::invalid_argument(std::string(option) + ": '" + item + "' is not two integers " +
                                  "joined by '" + sep + "'");
    try {
      out.emplace_back(parse_count(item.substr(0, at), "size", 16384),
                       parse_count(item.substr(at + 1), sep == 'x' ? "count" : "k", 100000));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(option) + " '" + item + "': " + e.what());
    }
  }
  return out;
}

}  // namespace

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
