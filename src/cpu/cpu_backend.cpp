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
#include "cpu/kernels.hpp"
#include "dcalign/random.hpp"

namespace dcalign::cpu {

using namespace base;  // the host BLAS/LAPACK wrappers
namespace {

lapack_int li(index_t v) {
  if (v > std::numeric_limits<lapack_int>::max())
    throw InvalidInput("dimension " + std::to_string(v) +
                       " exceeds the 32-bit LAPACK integer range");
  return static_cast<lapack_int>(v);
}

// Whether any of n values is NaN or Inf: the exponent field all ones. An OR over integer tests
// vectorises, where a loop on std::isfinite with an early exit does not (4x faster on the
// anchors' scan in bench/bm_004); the first offender is then found by the plain loop.
template <typename T>
bool any_nonfinite(const T* x, index_t n) {
  using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  constexpr Bits mask = sizeof(T) == 8 ? Bits(0x7FF0000000000000ULL) : Bits(0x7F800000U);
  Bits bad = 0;
  for (index_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, x + i, sizeof b);
    bad |= Bits((b & mask) == mask);
  }
  return bad != 0;
}

// Whether the lower triangle of a square matrix (what LAPACK's symmetric routines read) is
// free of NaN and Inf. They need not return on an Inf, so the eigensolvers check first.
template <typename T>
bool lower_triangle_finite(MatrixView<const T> S) {
  for (index_t j = 0; j < S.cols(); ++j)
    if (any_nonfinite(&S(j, j), S.rows() - j)) return false;
  return true;
}

// An exception that leaves an OpenMP region terminates the program, so the loops over matrices
// run their bodies through one ParallelErrors: it keeps the failure of the lowest matrix index
// (the report does not depend on the schedule), lets the matrices after it be skipped, and
// rethrow() raises it on the calling thread, after the region, naming the primitive and the
// matrix. A failure outside the per-matrix body (a workspace query) is recorded as index -1.
class ParallelErrors {
 public:
  explicit ParallelErrors(const char* primitive) : primitive_(primitive) {}
  /// Runs body() for matrix k (k = -1: the region's set-up) unless an earlier matrix failed.
  template <typename F>
  void run(index_t k, F&& body) noexcept {
    if (k > first_.load(std::memory_order_relaxed)) return;
    try {
      body();
    } catch (...) {
      record(k, std::current_exception());
    }
  }
  bool failed() const { return first_.load(std::memory_order_relaxed) != kNone; }
  /// Rethrows the recorded failure (if any) as the same dcalign exception type, its message
  /// prefixed with the primitive and the matrix index.
  void rethrow() const {
    if (!error_) return;
    const std::string where =
        std::string(primitive_) + (index_ >= 0 ? ", matrix " + std::to_string(index_) : "") + ": ";
    try {
      std::rethrow_exception(error_);
    } catch (const InvalidInput& e) {
      throw InvalidInput(where + e.what());
    } catch (const NumericalError& e) {
      throw NumericalError(where + e.what());
    } catch (const BackendError& e) {
      throw BackendError(where + e.what());
    } catch (const IoError& e) {
      throw IoError(where + e.what());
    } catch (const Error& e) {
      throw Error(where + e.what());
    }
    // Anything else (std::bad_alloc) propagates unchanged from rethrow_exception.
  }

 private:
  static constexpr index_t kNone = std::numeric_limits<index_t>::max();
  void record(index_t k, std::exception_ptr e) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (k < index_) {
      index_ = k;
      error_ = std::move(e);
      first_.store(k, std::memory_order_relaxed);
    }
  }
  const char* primitive_;
  std::atomic<index_t> first_{kNone};
  std::mutex mutex_;
  index_t index_ = kNone;
  std::exception_ptr error_;
};

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

template <typename T>
lapack_int qr_lwork(lapack_int m, lapack_int n) {
  T q1 = 0, q2 = 0, dummy = 0;
  check_info(geqrf(m, n, &dummy, std::max(1, m), &dummy, &q1, -1), "geqrf (workspace query)");
  check_info(orgqr(m, n, n, &dummy, std::max(1, m), &dummy, &q2, -1), "orgqr (workspace query)");
  return static_cast<lapack_int>(std::max(q1, q2)) + 1;
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

// Orthonormal basis of the columns of Y (m x s, s <= m), overwriting Y.
template <typename T>
void orthonormalise(std::vector<T>& y, lapack_int m, lapack_int s) {
  std::vector<T> tau(s), work(qr_lwork<T>(m, s));
  check_info(
      geqrf(m, s, y.data(), m, tau.data(), work.data(), static_cast<lapack_int>(work.size())),
      "geqrf");
  check_info(
      orgqr(m, s, s, y.data(), m, tau.data(), work.data(), static_cast<lapack_int>(work.size())),
      "orgqr");
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
  const int nt = team(20.0 * double(count) * double(l) * double(l) * double(l));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::unique_ptr<SvdWorkspace<T>> wsp;
    errors.run(-1, [&] { wsp = std::make_unique<SvdWorkspace<T>>(l, l); });
#pragma omp for schedule(dynamic, 4)
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
  BlasThreads one(1);
  const int nt = team(4.0 * double(count) * double(a) * double(l) * double(l));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<T> tau, work;
    errors.run(-1, [&] {
      tau.resize(static_cast<size_t>(l));
      work.resize(static_cast<size_t>(qr_lwork<T>(a, l)));
    });
#pragma omp for schedule(dynamic, 2)
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
void CpuPrimitives<T>::svd_topk(MatrixView<const T> W, index_t k, const SvdOptions& opts, T* s,
                                MatrixView<T> U, MatrixView<T> V) {
  const lapack_int m = li(W.rows()), n = li(W.cols());
  const lapack_int p = std::min(m, n);
  if (k < 1 || k > p) throw InvalidInput("svd_topk: k out of range (internal error)");
  const bool want_u = U.data() != nullptr, want_v = V.data() != nullptr;
  lapack_int width = p;  // columns of the subspace that is decomposed exactly
  if (opts.algorithm == SvdAlgorithm::randomized)
    width =
        static_cast<lapack_int>(std::min<index_t>(p, k + std::max<index_t>(opts.oversampling, 0)));
  if (opts.algorithm == SvdAlgorithm::exact || width >= p) {
    SvdWorkspace<T> ws(m, n);
    copy_in(W, ws.a.data());
    ws.run();
    for (index_t j = 0; j < k; ++j) {
      s[j] = ws.s[j];
      if (want_u) std::memcpy(&U(0, j), ws.u.data() + j * m, sizeof(T) * m);
      if (want_v)
        for (lapack_int i = 0; i < n; ++i) V(i, j) = ws.vt[j + static_cast<size_t>(i) * p];
    }
    return;
  }
  // Randomized range finder (Halko, Martinsson & Tropp 2011, Alg. 4.4): Y = W Omega, then q
  // power iterations Y = W (W^T Q), each followed by re-orthonormalisation for stability.
  Rng rng(opts.seed);
  std::vector<T> omega(static_cast<size_t>(n) * width);
  for (auto& v : omega) v = static_cast<T>(rng.normal());
  std::vector<T> q(static_cast<size_t>(m) * width), z(static_cast<size_t>(n) * width);
  MatrixView<T> Q(q.data(), m, width), Z(z.data(), n, width);
  gemm(Op::none, Op::none, T(1), W, MatrixView<const T>(omega.data(), n, width), T(0), Q);
  orthonormalise(q, m, width);
  for (int it = 0; it < opts.power_iterations; ++it) {
    gemm(Op::trans, Op::none, T(1), W, MatrixView<const T>(Q), T(0), Z);
    orthonormalise(z, n, width);
    gemm(Op::none, Op::none, T(1), W, MatrixView<const T>(Z), T(0), Q);
    orthonormalise(q, m, width);
  }
  // B = Q^T W (width x n); its SVD B = Ub S Vt gives W ~ (Q Ub) S Vt.
  SvdWorkspace<T> ws(width, n);
  gemm(Op::trans, Op::none, T(1), MatrixView<const T>(Q), W, T(0),
       MatrixView<T>(ws.a.data(), width, n));
  ws.run();
  for (index_t j = 0; j < k; ++j) s[j] = ws.s[j];
  if (want_u)
    gemm(Op::none, Op::none, T(1), MatrixView<const T>(Q),
         MatrixView<const T>(ws.u.data(), width, k, width), T(0), U);
  if (want_v)
    for (index_t j = 0; j < k; ++j)
      for (lapack_int i = 0; i < n; ++i) V(i, j) = ws.vt[j + static_cast<size_t>(i) * width];
}

template <typename T>
std::vector<T> CpuPrimitives<T>::lstsq_batched(StackView<const T> A, MatrixView<const T> Z,
                                               StackView<T> G) {
  const index_t count = A.count();
  const lapack_int a = li(A.rows()), l = li(A.cols()), nz = li(Z.cols());
  std::vector<T> ratio(static_cast<size_t>(count), T(0));
  ParallelErrors errors("lstsq_batched");
  BlasThreads one(1);
  const int nt = team(8.0 * double(count) * double(a) * double(l) * double(l));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::unique_ptr<SvdWorkspace<T>> wsp;
    std::vector<T> utz;
    errors.run(-1, [&] {
      wsp = std::make_unique<SvdWorkspace<T>>(a, l);
      utz.resize(static_cast<size_t>(l) * nz);
    });
#pragma omp for schedule(dynamic, 2)
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

namespace {

// Eigenpairs il..iu (1-based, ascending) of the symmetric S (lower triangle; overwritten) by
// LAPACK's syevr: eigenvalues into w (n entries), eigenvectors into Z (n x (iu - il + 1), ldz).
template <typename T>
void eigenpairs_in_range(MatrixView<T> S, index_t il, index_t iu, T* w, T* Z, index_t ldz) {
  const lapack_int n = li(S.rows()), want = li(iu - il + 1);
  lapack_int found = 0, iquery = 0;
  T query = 0;
  std::vector<lapack_int> isuppz(2 * static_cast<size_t>(want));
  check_info(cpu::syevr(n, S.data(), li(S.ld()), li(il), li(iu), &found, w, Z, li(ldz),
                        isuppz.data(), &query, -1, &iquery, -1),
             "syevr (workspace query)");
  std::vector<T> work(static_cast<size_t>(query) + 64);  // spare: see allocate()
  std::vector<lapack_int> iwork(static_cast<size_t>(std::max<lapack_int>(iquery, 1)));
  check_info(cpu::syevr(n, S.data(), li(S.ld()), li(il), li(iu), &found, w, Z, li(ldz),
                        isuppz.data(), work.data(), static_cast<lapack_int>(work.size()),
                        iwork.data(), static_cast<lapack_int>(iwork.size())),
             "syevr");
  if (found != want)
    throw NumericalError("syevr returned " + std::to_string(found) + " eigenpairs, expected " +
                         std::to_string(want));
}

// Starts of the diagonal blocks of a symmetric matrix (lower triangle read), followed by n: the
// finest partition with every nonzero entry inside a diagonal block. {0, n} when B is not
// block diagonal.
template <typename T>
std::vector<index_t> diagonal_blocks(MatrixView<const T> B) {
  const index_t n = B.rows();
  std::vector<index_t> starts{0};
  index_t reach = 0;  // the last row holding a nonzero in the columns of the current block
  for (index_t j = 0; j < n; ++j) {
    for (index_t i = n - 1; i > reach && i > j; --i)
      if (B(i, j) != T(0)) {
        reach = i;
        break;
      }
    reach = std::max(reach, j);
    if (reach == j && j + 1 < n) starts.push_back(j + 1);
  }
  starts.push_back(n);
  return starts;
}

}  // namespace

template <typename T>
void CpuPrimitives<T>::syev_largest(MatrixView<T> S, index_t k, T* evals, MatrixView<T> V) {
  const index_t n = S.rows();
  if (S.cols() != n || k < 1 || k > n || V.rows() != n || V.cols() != k)
    throw InvalidInput("syev_largest: shapes do not match (internal error)");
  if (!lower_triangle_finite(MatrixView<const T>(S)))
    throw NumericalError("syevr: the matrix holds NaN or Inf");
  std::vector<T> w(static_cast<size_t>(n)), z(static_cast<size_t>(n) * k);
  BlasThreads one(1);
  eigenpairs_in_range(S, n - k + 1, n, w.data(), z.data(), n);
  // syevr returns them ascending; the largest first here.
  for (index_t j = 0; j < k; ++j) {
    const index_t from = k - 1 - j;
    evals[j] = w[static_cast<size_t>(from)];
    std::memcpy(&V(0, j), z.data() + from * n, sizeof(T) * n);
  }
}

template <typename T>
void CpuPrimitives<T>::sygv_smallest(MatrixView<T> S, MatrixView<T> B, index_t k, T* evals,
                                     MatrixView<T> V) {
  // sygvx's steps with syevr (MRRR) for the reduced problem instead of syevx's bisection and
  // inverse iteration, which took 15% of GEP at paper 004's Heart disease size (bench/bm_004):
  // B = L L^T, C = L^{-1} S L^{-T}, C y = lambda y, v = L^{-T} y (so V^T B V = I).
  const index_t n = S.rows();
  if (S.cols() != n || B.rows() != n || B.cols() != n || k < 1 || k > n || V.rows() != n ||
      V.cols() != k)
    throw InvalidInput("sygv_smallest: shapes do not match (internal error)");
  const lapack_int ni = li(n), ki = li(k), lds = li(S.ld()), ldb = li(B.ld());
  if (!lower_triangle_finite(MatrixView<const T>(S)) ||
      !lower_triangle_finite(MatrixView<const T>(B)))
    throw NumericalError("sygv: the pencil holds NaN or Inf");
  BlasThreads one(1);
  const std::vector<index_t> starts = diagonal_blocks(MatrixView<const T>(B));
  // Cholesky per diagonal block (one block: B = L L^T as a whole).
  for (size_t b = 0; b + 1 < starts.size(); ++b) {
    const index_t s = starts[b], e = starts[b + 1];
    const lapack_int minor = cpu::potrf_lower(li(e - s), &B(s, s), ldb);
    if (minor > 0)
      throw InvalidInput(
          "generalized eigenproblem: the block-diagonal Gram matrix is not positive "
          "definite (leading minor " +
          std::to_string(s + minor) + "); some A_i is rank deficient");
    check_info(minor, "potrf");
  }
  if (starts.size() == 2) {
    check_info(cpu::sygst_lower(ni, S.data(), lds, B.data(), ldb), "sygst");
  } else {
    // C = L^{-1} S L^{-T} with block-diagonal L, block by block: C_ij = L_i^{-1} S_ij L_j^{-T}
    // for i >= j. sygst treats L as dense and costs O(n^3) (93 us of GEP's 440 us at paper
    // 004's Pima size, n = 78 in blocks of 6); the blocks cost O(n^2 b).
    for (size_t b = 0; b + 1 < starts.size(); ++b) {  // diagonal blocks in full
      const index_t s = starts[b], e = starts[b + 1];
      for (index_t j = s; j < e; ++j)
        for (index_t i = s; i < j; ++i) S(i, j) = S(j, i);
    }
    for (size_t b = 0; b + 1 < starts.size(); ++b) {  // rows of block b, columns 0..e-1
      const index_t s = starts[b], e = starts[b + 1];
      cpu::trsm({true, false, false}, li(e - s), li(e), &B(s, s), ldb, &S(s, 0), lds);
    }
    for (size_t b = 0; b + 1 < starts.size(); ++b) {  // columns of block b, rows s..n-1
      const index_t s = starts[b], e = starts[b + 1];
      cpu::trsm({false, false, true}, li(n - s), li(e - s), &B(s, s), ldb, &S(s, s), lds);
    }
  }
  std::vector<T> w(static_cast<size_t>(n));
  eigenpairs_in_range(S, 1, k, w.data(), V.data(), V.ld());
  cpu::trsm({true, false, true}, ni, ki, B.data(), ldb, V.data(), li(V.ld()));
  for (index_t j = 0; j < k; ++j) evals[j] = w[static_cast<size_t>(j)];
}

// The polar iteration's steps: one pass per matrix, in parallel over matrices, with the shared
// per-matrix decisions of base/polar_scalar.hpp.
template <typename T>
void CpuPrimitives<T>::polar_start(StackView<const T> M, bool transposed, StackView<T> X,
                                   T* state) {
  const index_t l = M.rows();
  const int nt = team(2.0 * double(M.count()) * double(l) * double(l));
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t k = 0; k < M.count(); ++k) {
    const auto m = M[k];
    auto x = X[k];
    double s = 0;
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < l; ++i) s += static_cast<double>(m(i, j)) * m(i, j);
    const T f = polar::start(state + k * polar::kStateSize, s);
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < l; ++i) (transposed ? x(j, i) : x(i, j)) = f * m(i, j);
  }
}

namespace {

// Per-thread workspace of the inverses: LAPACK pivots and work array, Gauss-Jordan's
// permutation and scratch (cpu/kernels.hpp).
template <typename T>
struct InverseWorkspace {
  std::vector<lapack_int> ipiv;
  std::vector<index_t> perm;
  std::vector<T> work;
  explicit InverseWorkspace(lapack_int l) : ipiv(static_cast<size_t>(l)), perm(ipiv.size()) {
    T query = 0;
    check_info(getri(l, &query, l, ipiv.data(), &query, -1), "getri (workspace query)");
    work.resize(
        std::max(static_cast<size_t>(query), static_cast<size_t>(gauss_jordan_workspace(l))) +
        static_cast<size_t>(l));
  }
  // y = x^{-1} (l x l, contiguous); false on a zero pivot.
  bool invert(const T* x, T* y, lapack_int l) {
    std::memcpy(y, x, sizeof(T) * l * l);
    if (l <= kSmallInverse) return gauss_jordan_inverse(y, l, perm.data(), work.data());
    const lapack_int info = getrf(l, y, l, ipiv.data());
    check_info(std::min<lapack_int>(info, 0), "getrf");
    if (info > 0) return false;
    check_info(getri(l, y, l, ipiv.data(), work.data(), static_cast<lapack_int>(work.size())),
               "getri");
    return true;
  }
};

// One scaled Newton step on an active matrix x with y = x^{-1}; the decisions are
// base/polar_scalar.hpp's.
template <typename T>
void newton_update(MatrixView<T> x, MatrixView<const T> y, T* st, int iteration, double tol) {
  const index_t l = x.rows();
  double fx = 0, fy = 0;
  for (index_t j = 0; j < l; ++j)
    for (index_t i = 0; i < l; ++i) {
      fx += static_cast<double>(x(i, j)) * x(i, j);
      fy += static_cast<double>(y(i, j)) * y(i, j);
    }
  const T zeta = polar::newton_zeta(st, fx, fy, iteration);
  if (!(zeta > T(0))) return;
  const T a = zeta / T(2), b = T(1) / (T(2) * zeta);
  double dx = 0, xn = 0;
  for (index_t j = 0; j < l; ++j)
    for (index_t i = 0; i < l; ++i) {
      const T v = a * x(i, j) + b * y(j, i);
      const double d = static_cast<double>(v) - x(i, j);
      dx += d * d;
      xn += static_cast<double>(v) * v;
      x(i, j) = v;
    }
  polar::newton_after(st, dx, xn, tol, static_cast<int>(l));
}

}  // namespace

template <typename T>
void CpuPrimitives<T>::inverse_batched(StackView<const T> X, StackView<T> Y, T* state) {
  const lapack_int l = li(X.rows());
  ParallelErrors errors("inverse_batched");
  BlasThreads one(1);
  const int nt = team(2.0 * double(X.count()) * double(l) * double(l) * double(l));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::unique_ptr<InverseWorkspace<T>> ws;
    errors.run(-1, [&] { ws = std::make_unique<InverseWorkspace<T>>(l); });
#pragma omp for schedule(dynamic, 4)
    for (index_t k = 0; k < X.count(); ++k)
      errors.run(k, [&] {
        T* st = state + k * polar::kStateSize;
        if (!polar::active(st)) return;  // converged matrices drop out of the work
        if (!ws->invert(X[k].data(), Y[k].data(), l)) polar::mark_singular(st);
      });
  }
  errors.rethrow();
}

template <typename T>
index_t CpuPrimitives<T>::polar_newton_step(StackView<T> X, StackView<const T> Y, T* state,
                                            int iteration, double tolerance) {
  index_t active = 0;
  const int nt = team(4.0 * double(X.count()) * double(X.rows()) * double(X.rows()));
#pragma omp parallel for schedule(static) reduction(+ : active) num_threads(nt) if (nt > 1)
  for (index_t k = 0; k < X.count(); ++k) {
    T* st = state + k * polar::kStateSize;
    if (!polar::active(st)) continue;
    newton_update(X[k], Y[k], st, iteration, tolerance);
    if (polar::active(st)) ++active;
  }
  return active;
}

// Fused: each matrix runs all its steps while it and its inverse sit in cache, instead of one
// pass over the whole batch per primitive and step (which costs memory traffic of the batch's
// size per step; bench/bm_polar).
template <typename T>
index_t CpuPrimitives<T>::polar_newton_steps(StackView<T> X, StackView<T> Y, T* state,
                                             int max_steps, double tolerance) {
  const lapack_int l = li(X.rows());
  index_t active = 0;
  ParallelErrors errors("polar_newton_steps");
  BlasThreads one(1);
  const int nt = team(2.0 * max_steps * double(X.count()) * double(l) * double(l) * double(l));
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(+ : active)
  {
    std::unique_ptr<InverseWorkspace<T>> ws;
    errors.run(-1, [&] { ws = std::make_unique<InverseWorkspace<T>>(l); });
#pragma omp for schedule(dynamic, 4)
    for (index_t k = 0; k < X.count(); ++k)
      errors.run(k, [&] {
        T* st = state + k * polar::kStateSize;
        for (int it = 0; it < max_steps && polar::active(st); ++it) {
          if (!ws->invert(X[k].data(), Y[k].data(), l)) {
            polar::mark_singular(st);
            break;
          }
          newton_update(X[k], MatrixView<const T>(Y[k]), st, it, tolerance);
        }
        if (polar::active(st)) ++active;
      });
  }
  errors.rethrow();
  return active;
}

template <typename T>
void CpuPrimitives<T>::add_identity_batched(T alpha, StackView<T> C) {
  const int nt = team(double(C.count()) * double(C.rows()));
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t k = 0; k < C.count(); ++k) {
    auto c = C[k];
    for (index_t i = 0; i < c.rows(); ++i) c(i, i) += alpha;
  }
}

template <typename T>
bool CpuPrimitives<T>::all_finite(const T* x, index_t n) {
  bool bad = false;
  const index_t chunk = 1 << 16;
  const index_t chunks = (n + chunk - 1) / chunk;
  const int nt = team(double(n));
#pragma omp parallel for reduction(||                      \
                                   : bad) schedule(static) \
    num_threads(nt) if (nt > 1 && chunks > 1)
  for (index_t q = 0; q < chunks; ++q)
    bad = bad || any_nonfinite(x + q * chunk, std::min(chunk, n - q * chunk));
  return !bad;
}

template <typename T>
std::vector<index_t> CpuPrimitives<T>::first_nonfinite_batched(StackView<const T> x) {
  std::vector<index_t> first(static_cast<size_t>(x.count()), -1);
  const index_t size = x.rows() * x.cols();
  const int nt = team(double(x.count()) * double(size));
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t k = 0; k < x.count(); ++k) {
    const T* p = x[k].data();
    if (!any_nonfinite(p, size)) continue;
    for (index_t i = 0; i < size; ++i)
      if (!std::isfinite(p[i])) {
        first[k] = i;
        break;
      }
  }
  return first;
}

template <typename T>
std::vector<T> CpuPrimitives<T>::orthogonality_errors(StackView<const T> G) {
  // G_k is r x l (square for the polar factors, but nothing here needs it).
  const lapack_int r = li(G.rows()), l = li(G.cols()), ldg = std::max<lapack_int>(r, 1);
  std::vector<T> err(static_cast<size_t>(G.count()), T(0));
  if (l == 0) return err;
  ParallelErrors errors("orthogonality_errors");
  BlasThreads one(1);
  const int nt = team(2.0 * double(G.count()) * double(r) * double(l) * double(l));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<T> gtg;
    errors.run(-1, [&] { gtg.resize(static_cast<size_t>(l) * l); });
#pragma omp for schedule(static)
    for (index_t k = 0; k < G.count(); ++k) {
      if (errors.failed()) continue;
      cpu::gemm(true, false, l, l, r, T(1), G[k].data(), ldg, G[k].data(), ldg, T(0), gtg.data(),
                l);
      double s = 0;
      for (lapack_int j = 0; j < l; ++j)
        for (lapack_int i = 0; i < l; ++i) {
          const double d = gtg[i + static_cast<size_t>(j) * l] - (i == j ? 1.0 : 0.0);
          s += d * d;
        }
      err[k] = static_cast<T>(std::sqrt(s));
    }
  }
  errors.rethrow();
  return err;
}

template <typename T>
std::vector<T> CpuPrimitives<T>::residuals(StackView<const T> A, StackView<const T> G,
                                           MatrixView<const T> Z) {
  const lapack_int a = li(A.rows()), l = li(A.cols()), nz = li(G.cols());
  std::vector<T> res(static_cast<size_t>(A.count()), T(0));
  ParallelErrors errors("residuals");
  BlasThreads one(1);
  const int nt = team(2.0 * double(A.count()) * double(a) * double(l) * double(nz));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<T> y;
    errors.run(-1, [&] { y.resize(static_cast<size_t>(a) * nz); });
#pragma omp for schedule(static)
    for (index_t k = 0; k < A.count(); ++k) {
      if (errors.failed()) continue;
      cpu::gemm(false, false, a, nz, l, T(1), A[k].data(), std::max(a, 1), G[k].data(),
                std::max(l, 1), T(0), y.data(), std::max(a, 1));
      double s = 0;
      for (lapack_int j = 0; j < nz; ++j)
        for (lapack_int i = 0; i < a; ++i) {
          const double d = static_cast<double>(y[i + static_cast<size_t>(j) * a]) - Z(i, j);
          s += d * d;
        }
      res[k] = static_cast<T>(s);
    }
  }
  errors.rethrow();
  return res;
}

template <typename T>
std::vector<T> CpuPrimitives<T>::product_column_norms(StackView<const T> A, StackView<const T> G) {
  const lapack_int a = li(A.rows()), l = li(A.cols()), nz = li(G.cols());
  const index_t count = A.count();
  std::vector<T> out(static_cast<size_t>(count * nz), T(0));
  ParallelErrors errors("product_column_norms");
  BlasThreads one(1);
  const int nt = team(2.0 * double(count) * double(a) * double(l) * double(nz));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<T> y;
    errors.run(-1, [&] { y.resize(static_cast<size_t>(a) * nz); });
#pragma omp for schedule(static)
    for (index_t k = 0; k < count; ++k) {
      if (errors.failed()) continue;
      cpu::gemm(false, false, a, nz, l, T(1), A[k].data(), std::max(a, 1), G[k].data(),
                std::max(l, 1), T(0), y.data(), std::max(a, 1));
      for (lapack_int j = 0; j < nz; ++j) {
        double s = 0;
        for (lapack_int i = 0; i < a; ++i) {
          const double v = y[i + static_cast<size_t>(j) * a];
          s += v * v;
        }
        out[k + j * count] = static_cast<T>(s);
      }
    }
  }
  errors.rethrow();
  return out;
}

template <typename T>
double CpuPrimitives<T>::sum_squares(const T* x, index_t n) {
  const index_t chunk = 1 << 16;
  const index_t chunks = (n + chunk - 1) / chunk;
  double s = 0;
  const int nt = team(2.0 * double(n));
#pragma omp parallel for reduction(+ : s) schedule(static) num_threads(nt) if (nt > 1 && chunks > 1)
  for (index_t q = 0; q < chunks; ++q) {
    const T* p = x + q * chunk;
    s += dot(p, p, std::min(chunk, n - q * chunk));
  }
  return s;
}

template <typename T>
std::vector<double> CpuPrimitives<T>::inner_products(StackView<const T> X, StackView<const T> Y) {
  std::vector<double> out(static_cast<size_t>(X.count()), 0.0);
  const index_t m = X.rows(), n = X.cols();
  const int nt = team(2.0 * double(X.count()) * double(m) * double(n));
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t k = 0; k < X.count(); ++k) {
    const auto x = X[k], y = Y[k];
    double s = 0;
    if (x.ld() == m && y.ld() == m) {
      s = dot(x.data(), y.data(), m * n);  // contiguous: one pass
    } else {
      for (index_t j = 0; j < n; ++j) s += dot(x.data() + j * x.ld(), y.data() + j * y.ld(), m);
    }
    out[k] = s;
  }
  return out;
}

template class CpuPrimitives<float>;
template class CpuPrimitives<double>;

}  // namespace dcalign::cpu
