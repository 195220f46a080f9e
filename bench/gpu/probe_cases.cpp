// gpu_probe's cases (bench/gpu_probe.cpp lists them): each a library call sequence on
// device-resident data, timed by the harness.
#include "core/common.hpp"
#include "probe_harness.hpp"

namespace dcalign::gpu_probe {
namespace {

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

}  // namespace

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

json probe_haar(const Config& cfg, Handles& h, int n) {
  json out;
  out["case"] = "haar";
  out["n"] = n;
  json routes = json::object();
  // As src/core/shared_steps.cpp draws ODC's O (same stream id), on this machine's host.
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

template json probe_inverse<float>(const Config&, Handles&, int, int);
template json probe_inverse<double>(const Config&, Handles&, int, int);
template json probe_gemm<float>(const Config&, Handles&, int, int);
template json probe_gemm<double>(const Config&, Handles&, int, int);
template json probe_syev_batched<float>(const Config&, Handles&, int, int);
template json probe_syev_batched<double>(const Config&, Handles&, int, int);
template json probe_topk<double>(const Config&, Handles&, int, int);

}  // namespace dcalign::gpu_probe
