// CPU backend: the primitives on BLAS/LAPACK (OpenBLAS). Large products use BLAS threads;
// loops of small per-user factorisations run in parallel over users with OpenMP while BLAS is
// held to one thread (BlasThreads), which is where the CPU's cores pay off for c >> 1.
#include "cpu/cpu_backend.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "base/host_blas.hpp"
#include "base/polar_scalar.hpp"
#include "cpu/cpu_common.hpp"
#include "cpu/kernels.hpp"
#include "dcalign/random.hpp"

namespace dcalign::cpu {

using namespace base;    // the host BLAS/LAPACK wrappers
using namespace detail;  // cpu_common.hpp
namespace {

template <typename T>
lapack_int gesdd_lwork(lapack_int m, lapack_int n) {
  T query = 0;
  T dummy = 0;
  lapack_int idummy = 0;
  check_info(gesdd(m, n, &dummy, std::max(1, m), &dummy, &dummy, std::max(1, m), &dummy,
                   std::max(1, std::min(m, n)), &query, -1, &idummy),
             "gesdd (workspace query)");
  return static_cast<lapack_int>(query) + 1;
}

// Thin SVD of an m x n matrix held in `a` (destroyed), U m x p, VT p x n, p = min(m, n).
template <typename T>
struct SvdWorkspace {
  std::vector<T> a, s, u, vt, work;
  std::vector<lapack_int> iwork;
  lapack_int m = 0, n = 0, p = 0;
  SvdWorkspace(lapack_int m_, lapack_int n_) : m(m_), n(n_), p(std::min(m_, n_)) {
    a.resize(static_cast<size_t>(m) * n);
    s.resize(p);
    u.resize(static_cast<size_t>(m) * p);
    vt.resize(static_cast<size_t>(p) * n);
    work.resize(gesdd_lwork<T>(m, n));
    iwork.resize(8 * static_cast<size_t>(p));
  }
  void run() {
    // gesdd reports a NaN as an illegal argument and does not return on an Inf: check first
    // (O(m n), against the SVD's O(m n min(m, n))).
    for (const T v : a)
      if (!std::isfinite(v)) throw NumericalError("gesdd: the matrix holds NaN or Inf");
    check_info(gesdd(m, n, a.data(), m, s.data(), u.data(), m, vt.data(), p, work.data(),
                     static_cast<lapack_int>(work.size()), iwork.data()),
               "gesdd");
  }
};

template <typename T>
void copy_in(MatrixView<const T> src, T* dst) {
  for (index_t j = 0; j < src.cols(); ++j)
    std::memcpy(dst + j * src.rows(), src.data() + j * src.ld(), sizeof(T) * src.rows());
}

}  // namespace

template <typename T>
CpuPrimitives<T>::CpuPrimitives(int threads, HostPool* pool)
    : threads_(threads > 0 ? threads : omp_get_max_threads()), pool_(pool) {
  kernel_isa();  // a bad DCALIGN_CPU_ISA fails here, when the backend is made
}

// Below this much work a parallel region runs on the calling thread alone. Waking a team of
// two costs 5-50 us when its threads spin and far more when they sleep or share a core with
// another pool's spinning threads: 4 users of 400 x 8, whose ODC takes 0.3 ms on one thread,
// took 0.5 ms in the median and 0.1 s in one run of ten with a team (bench/results/issue27).
// 1e6 flops is 0.1-0.5 ms on one core.
constexpr double kParallelWork = 1e6;

template <typename T>
int CpuPrimitives<T>::team(double work) const {
  return threads_ > 1 && work >= kParallelWork && !omp_in_parallel() ? threads_ : 1;
}

template <typename T>
Buffer<T> CpuPrimitives<T>::allocate(index_t n) {
  if (n < 0) throw InvalidInput("allocate: negative size");
  // One spare cache line past the end: OpenBLAS 0.3.21's generic ("Prescott") ssymv_L kernel,
  // which LAPACK's sytrd calls in the eigensolvers, reads a vector's width past the last entry
  // of a matrix; where the allocation ends at the end of a mapped page (fuzz_align found it
  // under ASan's allocator, on an 8 x 8 float Gram matrix) that read faults. The spare entries
  // are never read as data.
  constexpr index_t kSpare = 64 / static_cast<index_t>(sizeof(T));
  const auto entries = static_cast<size_t>(std::max<index_t>(n, 1) + kSpare);
  if (entries > std::numeric_limits<size_t>::max() / sizeof(T))
    throw InvalidInput("allocate: " + std::to_string(n) + " entries exceed the address space");
  return Buffer<T>(static_cast<T*>(pool_->acquire(entries * sizeof(T))), n, &HostPool::release);
}

template <typename T>
void CpuPrimitives<T>::to_device(const T* host, T* dst, index_t n) {
  if (n > 0 && host != dst) std::memcpy(dst, host, sizeof(T) * n);
}
template <typename T>
void CpuPrimitives<T>::to_host(const T* src, T* host, index_t n) {
  if (n > 0 && host != src) std::memcpy(host, src, sizeof(T) * n);
}
template <typename T>
void CpuPrimitives<T>::copy(const T* src, T* dst, index_t n) {
  if (n > 0 && src != dst) std::memmove(dst, src, sizeof(T) * n);
}
template <typename T>
void CpuPrimitives<T>::fill(T* dst, index_t n, T value) {
  std::fill(dst, dst + n, value);
}

namespace {
// dst = src converted to D (static_cast: exact widening, rounding to nearest when narrowing).
template <typename S, typename D>
void convert_matrix(MatrixView<const S> src, MatrixView<D> dst) {
  if (src.rows() != dst.rows() || src.cols() != dst.cols())
    throw InvalidInput("convert: shapes differ (internal error)");
  for (index_t j = 0; j < src.cols(); ++j)
    for (index_t i = 0; i < src.rows(); ++i) dst(i, j) = static_cast<D>(src(i, j));
}
}  // namespace

template <typename T>
void CpuPrimitives<T>::to_float64(MatrixView<const T> src, MatrixView<double> dst) {
  convert_matrix(src, dst);
}
template <typename T>
void CpuPrimitives<T>::from_float64(MatrixView<const double> src, MatrixView<T> dst) {
  convert_matrix(src, dst);
}

template <typename T>
void CpuPrimitives<T>::gemm(Op ta, Op tb, T alpha, MatrixView<const T> A, MatrixView<const T> B,
                            T beta, MatrixView<T> C) {
  const bool at = ta == Op::trans, bt = tb == Op::trans;
  const index_t m = at ? A.cols() : A.rows(), k = at ? A.rows() : A.cols();
  const index_t kb = bt ? B.cols() : B.rows(), n = bt ? B.rows() : B.cols();
  if (k != kb || C.rows() != m || C.cols() != n)
    throw InvalidInput("gemm: inner or outer dimensions do not match (internal error)");
  if (m == 0 || n == 0) return;
  const lapack_int lda = li(std::max<index_t>(A.ld(), 1)), ldb = li(std::max<index_t>(B.ld(), 1)),
                   ldc = li(std::max<index_t>(C.ld(), 1));
  const lapack_int mi = li(m), ni = li(n), ki = li(k);  // checked here: nothing in a region throws
  // Large products are split over this backend's OpenMP threads, each running single-threaded
  // BLAS on a slab of C, rather than handed to OpenBLAS's own thread pool: the two pools spin
  // on the same cores between the many small parallel loops of a method, which measured 3x
  // slower at (a, l, c) = (1000, 50, 50) than one pool (bench/results/issue9).
  const int nt = omp_in_parallel() ? 1 : threads_;
  const bool rows = m >= n;
  const index_t total = rows ? m : n;
  if (nt > 1 && 2.0 * double(m) * double(n) * double(k) >= 4e6 && total >= 16 * nt) {
    BlasThreads one(1);
#pragma omp parallel num_threads(nt)
    {
      const index_t parts = omp_get_num_threads();
      const index_t chunk = ((total + parts - 1) / parts + 7) / 8 * 8;
      const index_t b = omp_get_thread_num() * chunk, e = std::min(total, b + chunk);
      if (b < e) {
        if (rows)  // rows b..e of C are rows b..e of op(A)
          cpu::gemm(at, bt, static_cast<lapack_int>(e - b), ni, ki, alpha,
                    A.data() + (at ? b * lda : b), lda, B.data(), ldb, beta, C.data() + b, ldc);
        else  // columns b..e of C are columns b..e of op(B)
          cpu::gemm(at, bt, mi, static_cast<lapack_int>(e - b), ki, alpha, A.data(), lda,
                    B.data() + (bt ? b : b * ldb), ldb, beta, C.data() + b * ldc, ldc);
      }
    }
    return;
  }
  // Small (or inside a region): one BLAS thread, so that OpenBLAS's own pool never wakes.
  BlasThreads one(1);
  cpu::gemm(at, bt, mi, ni, ki, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
}

template <typename T>
void CpuPrimitives<T>::gemm_batched(Op ta, Op tb, T alpha, StackView<const T> A,
                                    StackView<const T> B, T beta, StackView<T> C) {
  const index_t count = C.count();
  if ((A.count() != count && A.count() != 1) || (B.count() != count && B.count() != 1))
    throw InvalidInput("gemm_batched: batch counts do not match (internal error)");
  ParallelErrors errors("gemm_batched");
  BlasThreads one(1);
  const int nt = team(2.0 * double(count) * double(C.rows()) * double(C.cols()) *
                      double(ta == Op::trans ? A.rows() : A.cols()));
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t k = 0; k < count; ++k)
    errors.run(k, [&] {
      gemm(ta, tb, alpha, A[A.count() == 1 ? 0 : k], B[B.count() == 1 ? 0 : k], beta, C[k]);
    });
  errors.rethrow();
}

template <typename T>
void CpuPrimitives<T>::trsm_upper_batched(StackView<const T> R, StackView<T> B) {
  const lapack_int m = li(B.rows()), n = li(B.cols());
  const lapack_int ldr = li(std::max<index_t>(R.ld(), 1)), ldb = li(std::max<index_t>(B.ld(), 1));
  if (m == 0 || n == 0) return;
  BlasThreads one(1);
  const int nt = team(double(B.count()) * double(m) * double(m) * double(n));
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t k = 0; k < B.count(); ++k)
    trsm({true, true, false}, m, n, R[k].data(), ldr, B[k].data(), ldb);
}

template <typename T>
void CpuPrimitives<T>::vstack(StackView<const T> in, MatrixView<T> out) {
  for (index_t k = 0; k < in.count(); ++k) {
    auto m = in[k];
    for (index_t j = 0; j < m.cols(); ++j)
      std::memcpy(&out(k * in.rows(), j), &m(0, j), sizeof(T) * in.rows());
  }
}

template <typename T>
void CpuPrimitives<T>::unvstack(MatrixView<const T> in, StackView<T> out) {
  for (index_t k = 0; k < out.count(); ++k) {
    auto m = out[k];
    for (index_t j = 0; j < m.cols(); ++j)
      std::memcpy(&m(0, j), &in(k * out.rows(), j), sizeof(T) * out.rows());
  }
}

template <typename T>
void CpuPrimitives<T>::gather(const T* src, index_t sc, index_t si, index_t sj, StackView<T> dst) {
  for (index_t k = 0; k < dst.count(); ++k) {
    auto m = dst[k];
    const T* s = src + k * sc;
    for (index_t j = 0; j < m.cols(); ++j)
      for (index_t i = 0; i < m.rows(); ++i) m(i, j) = s[i * si + j * sj];
  }
}

template <typename T>
void CpuPrimitives<T>::syrk(Op trans, T alpha, MatrixView<const T> A, T beta, MatrixView<T> C) {
  const bool t = trans == Op::trans;
  const index_t n = t ? A.cols() : A.rows(), k = t ? A.rows() : A.cols();
  if (C.rows() != n || C.cols() != n)
    throw InvalidInput("syrk: C must be square of the product's order (internal error)");
  if (n == 0) return;
  const int nt = omp_in_parallel() ? 1 : threads_;
  if (nt > 1 && double(n) * double(n) * double(k) >= 4e6) {
    // The split gemm above uses this backend's threads (one pool, see there); it computes both
    // triangles, twice syrk's flops on as many cores as there are slabs.
    gemm(t ? Op::trans : Op::none, t ? Op::none : Op::trans, alpha, A, A, beta, C);
  } else {
    BlasThreads one(1);
    cpu::syrk_lower(t, li(n), li(k), alpha, A.data(), li(std::max<index_t>(A.ld(), 1)), beta,
                    C.data(), li(C.ld()));
  }
  // Mirror the lower triangle: C is exactly symmetric whichever branch ran.
  for (index_t j = 0; j < n; ++j)
    for (index_t i = j + 1; i < n; ++i) C(j, i) = C(i, j);
}

template <typename T>
void CpuPrimitives<T>::geam(T alpha, MatrixView<const T> A, T beta, MatrixView<const T> B,
                            MatrixView<T> C) {
  for (index_t j = 0; j < C.cols(); ++j)
    for (index_t i = 0; i < C.rows(); ++i) C(i, j) = alpha * A(i, j) + beta * B(i, j);
}

template <typename T>
PolarInfo<T> CpuPrimitives<T>::polar_batched(StackView<const T> M, bool transposed,
                                             StackView<T> G) {
  const index_t count = M.count();
  const lapack_int l = li(M.rows());
  if (M.rows() != M.cols()) throw InvalidInput("polar_batched: square matrices expected");
  PolarInfo<T> info;
  info.sigma_min.assign(static_cast<size_t>(count), T(0));
  info.sigma_max.assign(static_cast<size_t>(count), T(0));
  ParallelErrors errors("polar_batched");
  BlasThreads one(1);
  const double item = 20.0 * double(l) * double(l) * double(l);
  const int nt = team(double(count) * item), chunk = dynamic_chunk(item);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::unique_ptr<SvdWorkspace<T>> wsp;
    errors.run(-1, [&] { wsp = std::make_unique<SvdWorkspace<T>>(l, l); });
#pragma omp for schedule(dynamic, chunk)
    for (index_t k = 0; k < count; ++k)
      errors.run(k, [&] {
        SvdWorkspace<T>& ws = *wsp;
        copy_in(M[k], ws.a.data());
        ws.run();
        // X = U S V^T. Not transposed: G = U V^T. Transposed (X = M^T): M = V S U^T, so the
        // polar factor of M is V U^T = (V^T)^T U^T.
        if (!transposed)
          cpu::gemm(false, false, l, l, l, T(1), ws.u.data(), l, ws.vt.data(), l, T(0), G[k].data(),
                    l);
        else
          cpu::gemm(true, true, l, l, l, T(1), ws.vt.data(), l, ws.u.data(), l, T(0), G[k].data(),
                    l);
        info.sigma_max[k] = ws.s[0];
        info.sigma_min[k] = ws.s[l - 1];
      });
  }
  errors.rethrow();
  return info;
}

template <typename T>
std::vector<T> CpuPrimitives<T>::qr_batched(StackView<T> A, StackView<T> R) {
  const index_t count = A.count();
  const lapack_int a = li(A.rows()), l = li(A.cols());
  std::vector<T> ratio(static_cast<size_t>(count), T(0));
  ParallelErrors errors("qr_batched");
  // One BLAS thread per matrix of a team; a single matrix (the randomized SVD's sketch) keeps
  // the BLAS's threads.
  BlasThreads one(count == 1 ? openblas_get_num_threads() : 1);
  const double item = 4.0 * double(a) * double(l) * double(l);
  const int nt = team(double(count) * item), chunk = dynamic_chunk(item);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<T> tau, work;
    errors.run(-1, [&] {
      tau.resize(static_cast<size_t>(l));
      work.resize(static_cast<size_t>(qr_lwork<T>(a, l)));
    });
#pragma omp for schedule(dynamic, chunk)
    for (index_t k = 0; k < count; ++k)
      errors.run(k, [&] {
        T* q = A[k].data();
        check_info(geqrf(a, l, q, a, tau.data(), work.data(), static_cast<lapack_int>(work.size())),
                   "geqrf");
        auto r = R[k];
        T dmin = std::numeric_limits<T>::infinity(), dmax = 0;
        for (lapack_int j = 0; j < l; ++j) {
          for (lapack_int i = 0; i < l; ++i) r(i, j) = i <= j ? q[i + j * a] : T(0);
          dmin = std::min(dmin, std::abs(r(j, j)));
          dmax = std::max(dmax, std::abs(r(j, j)));
        }
        ratio[k] = dmax > 0 ? dmin / dmax : T(0);
        check_info(
            orgqr(a, l, l, q, a, tau.data(), work.data(), static_cast<lapack_int>(work.size())),
            "orgqr");
      });
  }
  errors.rethrow();
  return ratio;
}

template <typename T>
void CpuPrimitives<T>::svd_topk(MatrixView<const T> W, index_t k, T* s, MatrixView<T> U,
                                MatrixView<T> V) {
  const lapack_int m = li(W.rows()), n = li(W.cols());
  const lapack_int p = std::min(m, n);
  if (k < 1 || k > p) throw InvalidInput("svd_topk: k out of range (internal error)");
  const bool want_u = U.data() != nullptr, want_v = V.data() != nullptr;
  SvdWorkspace<T> ws(m, n);
  copy_in(W, ws.a.data());
  ws.run();
  for (index_t j = 0; j < k; ++j) {
    s[j] = ws.s[j];
    if (want_u) std::memcpy(&U(0, j), ws.u.data() + j * m, sizeof(T) * m);
    if (want_v)
      for (lapack_int i = 0; i < n; ++i) V(i, j) = ws.vt[j + static_cast<size_t>(i) * p];
  }
}

template <typename T>
std::vector<T> CpuPrimitives<T>::lstsq_batched(StackView<const T> A, MatrixView<const T> Z,
                                               StackView<T> G) {
  const index_t count = A.count();
  const lapack_int a = li(A.rows()), l = li(A.cols()), nz = li(Z.cols());
  std::vector<T> ratio(static_cast<size_t>(count), T(0));
  ParallelErrors errors("lstsq_batched");
  BlasThreads one(1);
  const double item = 8.0 * double(a) * double(l) * double(l);
  const int nt = team(double(count) * item), chunk = dynamic_chunk(item);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::unique_ptr<SvdWorkspace<T>> wsp;
    std::vector<T> utz;
    errors.run(-1, [&] {
      wsp = std::make_unique<SvdWorkspace<T>>(a, l);
      utz.resize(static_cast<size_t>(l) * nz);
    });
#pragma omp for schedule(dynamic, chunk)
    for (index_t k = 0; k < count; ++k)
      errors.run(k, [&] {
        SvdWorkspace<T>& ws = *wsp;
        std::memcpy(ws.a.data(), A[k].data(), sizeof(T) * a * l);
        ws.run();
        // A = U S V^T  =>  A^+ Z = V S^{-1} U^T Z. Columns of S^{-1} U^T Z with s_j = 0 are
        // zeroed (minimum-norm solution); the caller rejects rank-deficient users anyway.
        cpu::gemm(true, false, l, nz, a, T(1), ws.u.data(), a, Z.data(), li(Z.ld()), T(0),
                  utz.data(), l);
        for (lapack_int i = 0; i < l; ++i) {
          const T inv = ws.s[i] > 0 ? T(1) / ws.s[i] : T(0);
          for (lapack_int j = 0; j < nz; ++j) utz[i + static_cast<size_t>(j) * l] *= inv;
        }
        cpu::gemm(true, false, l, nz, l, T(1), ws.vt.data(), l, utz.data(), l, T(0), G[k].data(),
                  l);
        ratio[k] = ws.s[0] > 0 ? ws.s[l - 1] / ws.s[0] : T(0);
      });
  }
  errors.rethrow();
  return ratio;
}

template class CpuPrimitives<float>;
template class CpuPrimitives<double>;

}  // namespace dcalign::cpu
