// CPU backend, continued (see cpu_backend.cpp): the symmetric eigensolvers, the batched polar
// iteration's steps and the reductions.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "base/host_blas.hpp"
#include "base/polar_scalar.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_common.hpp"
#include "cpu/kernels.hpp"

namespace dcalign::cpu {

using namespace base;    // the host BLAS/LAPACK wrappers
using namespace detail;  // cpu_common.hpp

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
void CpuPrimitives<T>::polar_start(StackView<const T> M, bool transposed, StackView<T> X, T* state,
                                   double stop_below) {
  const index_t l = M.rows();
  const int nt = team(2.0 * double(M.count()) * double(l) * double(l));
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t k = 0; k < M.count(); ++k) {
    const auto m = M[k];
    auto x = X[k];
    double s = 0;
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < l; ++i) s += static_cast<double>(m(i, j)) * m(i, j);
    const T f = polar::start(state + k * polar::kStateSize, s, stop_below);
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
  const double item = 2.0 * double(l) * double(l) * double(l);
  const int nt = team(double(X.count()) * item), chunk = dynamic_chunk(item);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::unique_ptr<InverseWorkspace<T>> ws;
    errors.run(-1, [&] { ws = std::make_unique<InverseWorkspace<T>>(l); });
#pragma omp for schedule(dynamic, chunk)
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
  const double item = 2.0 * max_steps * double(l) * double(l) * double(l);
  const int nt = team(double(X.count()) * item), chunk = dynamic_chunk(item);
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(+ : active)
  {
    std::unique_ptr<InverseWorkspace<T>> ws;
    errors.run(-1, [&] { ws = std::make_unique<InverseWorkspace<T>>(l); });
#pragma omp for schedule(dynamic, chunk)
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
  const int nt = team(double(G.count()) * double(r) * double(l) * double(l));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<T> gtg;
    errors.run(-1, [&] { gtg.resize(static_cast<size_t>(l) * l); });
#pragma omp for schedule(static)
    for (index_t k = 0; k < G.count(); ++k) {
      if (errors.failed()) continue;
      // G^T G is symmetric: its lower triangle by SYRK (l^2 r flops, half a GEMM's; at
      // l = 500 this was a third of ODC's default evaluation), each off-diagonal entry counted
      // twice.
      cpu::syrk_lower(true, l, r, T(1), G[k].data(), ldg, T(0), gtg.data(), l);
      double diagonal = 0, off = 0;
      for (lapack_int j = 0; j < l; ++j) {
        const T* column = gtg.data() + static_cast<size_t>(j) * l;
        const double d = static_cast<double>(column[j]) - 1.0;
        diagonal += d * d;
        for (lapack_int i = j + 1; i < l; ++i)
          off += static_cast<double>(column[i]) * static_cast<double>(column[i]);
      }
      err[k] = static_cast<T>(std::sqrt(diagonal + 2.0 * off));
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

// The members defined in this file (cpu_backend.cpp instantiates the class with the others).
#define DCALIGN_CPU_ITERATIONS(T)                                                                  \
  template void CpuPrimitives<T>::syev_largest(MatrixView<T>, index_t, T*, MatrixView<T>);         \
  template void CpuPrimitives<T>::sygv_smallest(MatrixView<T>, MatrixView<T>, index_t, T*,         \
                                                MatrixView<T>);                                    \
  template void CpuPrimitives<T>::polar_start(StackView<const T>, bool, StackView<T>, T*, double); \
  template void CpuPrimitives<T>::inverse_batched(StackView<const T>, StackView<T>, T*);           \
  template index_t CpuPrimitives<T>::polar_newton_step(StackView<T>, StackView<const T>, T*, int,  \
                                                       double);                                    \
  template index_t CpuPrimitives<T>::polar_newton_steps(StackView<T>, StackView<T>, T*, int,       \
                                                        double);                                   \
  template void CpuPrimitives<T>::add_identity_batched(T, StackView<T>);                           \
  template bool CpuPrimitives<T>::all_finite(const T*, index_t);                                   \
  template std::vector<index_t> CpuPrimitives<T>::first_nonfinite_batched(StackView<const T>);     \
  template std::vector<T> CpuPrimitives<T>::orthogonality_errors(StackView<const T>);              \
  template std::vector<T> CpuPrimitives<T>::residuals(StackView<const T>, StackView<const T>,      \
                                                      MatrixView<const T>);                        \
  template std::vector<T> CpuPrimitives<T>::product_column_norms(StackView<const T>,               \
                                                                 StackView<const T>);              \
  template double CpuPrimitives<T>::sum_squares(const T*, index_t);                                \
  template std::vector<double> CpuPrimitives<T>::inner_products(StackView<const T>,                \
                                                                StackView<const T>);
DCALIGN_CPU_ITERATIONS(float)
DCALIGN_CPU_ITERATIONS(double)

}  // namespace dcalign::cpu
