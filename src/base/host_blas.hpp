#pragma once
// Overloads that map float/double onto the s/d BLAS and LAPACK routines, so the CPU backend is
// written once as a template. Column-major throughout. LAPACK errors become exceptions here.
#include <cblas.h>
#include <lapack.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "dcalign/error.hpp"

// OpenBLAS thread control (declared in OpenBLAS's cblas.h; repeated for other vendors' headers).
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace dcalign::base {

inline void check_info(lapack_int info, const char* routine) {
  if (info < 0)
    throw NumericalError(std::string(routine) + ": argument " + std::to_string(-info) +
                         " had an illegal value (internal error)");
  if (info > 0)
    throw NumericalError(std::string(routine) +
                         " did not converge (info = " + std::to_string(info) + ")");
}

inline CBLAS_TRANSPOSE cblas_op(bool t) { return t ? CblasTrans : CblasNoTrans; }

inline void gemm(bool ta, bool tb, lapack_int m, lapack_int n, lapack_int k, float alpha,
                 const float* A, lapack_int lda, const float* B, lapack_int ldb, float beta,
                 float* C, lapack_int ldc) {
  cblas_sgemm(CblasColMajor, cblas_op(ta), cblas_op(tb), m, n, k, alpha, A, lda, B, ldb, beta, C,
              ldc);
}
inline void gemm(bool ta, bool tb, lapack_int m, lapack_int n, lapack_int k, double alpha,
                 const double* A, lapack_int lda, const double* B, lapack_int ldb, double beta,
                 double* C, lapack_int ldc) {
  cblas_dgemm(CblasColMajor, cblas_op(ta), cblas_op(tb), m, n, k, alpha, A, lda, B, ldb, beta, C,
              ldc);
}

// Lower triangle of C = alpha op(A)^T op(A) + beta C: trans = true gives A^T A (A is k x n),
// false gives A A^T (A is n x k).
inline void syrk_lower(bool trans, lapack_int n, lapack_int k, float alpha, const float* A,
                       lapack_int lda, float beta, float* C, lapack_int ldc) {
  cblas_ssyrk(CblasColMajor, CblasLower, cblas_op(trans), n, k, alpha, A, lda, beta, C, ldc);
}
inline void syrk_lower(bool trans, lapack_int n, lapack_int k, double alpha, const double* A,
                       lapack_int lda, double beta, double* C, lapack_int ldc) {
  cblas_dsyrk(CblasColMajor, CblasLower, cblas_op(trans), n, k, alpha, A, lda, beta, C, ldc);
}

// B <- op(T)^{-1} B (side left) or B op(T)^{-1} (side right) for triangular T with a non-unit
// diagonal; B is m x n.
struct Triangle {
  bool left, upper, trans;
};
inline void trsm(Triangle t, lapack_int m, lapack_int n, const float* T, lapack_int ldt, float* B,
                 lapack_int ldb) {
  cblas_strsm(CblasColMajor, t.left ? CblasLeft : CblasRight, t.upper ? CblasUpper : CblasLower,
              t.trans ? CblasTrans : CblasNoTrans, CblasNonUnit, m, n, 1.0f, T, ldt, B, ldb);
}
inline void trsm(Triangle t, lapack_int m, lapack_int n, const double* T, lapack_int ldt, double* B,
                 lapack_int ldb) {
  cblas_dtrsm(CblasColMajor, t.left ? CblasLeft : CblasRight, t.upper ? CblasUpper : CblasLower,
              t.trans ? CblasTrans : CblasNoTrans, CblasNonUnit, m, n, 1.0, T, ldt, B, ldb);
}

// The LAPACK routines through LAPACK's own C declarations (lapack.h, which passes Fortran's
// hidden string lengths), not LAPACKE: libopenblas holds LAPACK, and loading liblapacke with the
// liblapack and libtmglib it pulls in cost 3.5-4 ms of every process start (2-core Zen, AVX2;
// bench/results/issue27/README.md). Column-major throughout; each returns LAPACK's info.
#define DCALIGN_LAPACK_CALL(routine, ...) \
  [&] {                                   \
    lapack_int info_ = 0;                 \
    routine(__VA_ARGS__, &info_);         \
    return info_;                         \
  }()

// gesdd with jobz = 'S' (thin U and V^T). `work`/`iwork` are caller-provided; a query with
// lwork = -1 returns the optimal size in work[0].
inline lapack_int gesdd(lapack_int m, lapack_int n, float* A, lapack_int lda, float* s, float* U,
                        lapack_int ldu, float* VT, lapack_int ldvt, float* work, lapack_int lwork,
                        lapack_int* iwork) {
  return DCALIGN_LAPACK_CALL(LAPACK_sgesdd, "S", &m, &n, A, &lda, s, U, &ldu, VT, &ldvt, work,
                             &lwork, iwork);
}
inline lapack_int gesdd(lapack_int m, lapack_int n, double* A, lapack_int lda, double* s, double* U,
                        lapack_int ldu, double* VT, lapack_int ldvt, double* work, lapack_int lwork,
                        lapack_int* iwork) {
  return DCALIGN_LAPACK_CALL(LAPACK_dgesdd, "S", &m, &n, A, &lda, s, U, &ldu, VT, &ldvt, work,
                             &lwork, iwork);
}

inline lapack_int geqrf(lapack_int m, lapack_int n, float* A, lapack_int lda, float* tau,
                        float* work, lapack_int lwork) {
  return DCALIGN_LAPACK_CALL(LAPACK_sgeqrf, &m, &n, A, &lda, tau, work, &lwork);
}
inline lapack_int geqrf(lapack_int m, lapack_int n, double* A, lapack_int lda, double* tau,
                        double* work, lapack_int lwork) {
  return DCALIGN_LAPACK_CALL(LAPACK_dgeqrf, &m, &n, A, &lda, tau, work, &lwork);
}
inline lapack_int orgqr(lapack_int m, lapack_int n, lapack_int k, float* A, lapack_int lda,
                        const float* tau, float* work, lapack_int lwork) {
  return DCALIGN_LAPACK_CALL(LAPACK_sorgqr, &m, &n, &k, A, &lda, tau, work, &lwork);
}
inline lapack_int orgqr(lapack_int m, lapack_int n, lapack_int k, double* A, lapack_int lda,
                        const double* tau, double* work, lapack_int lwork) {
  return DCALIGN_LAPACK_CALL(LAPACK_dorgqr, &m, &n, &k, A, &lda, tau, work, &lwork);
}

// Workspace for geqrf and then orgqr of an m x n matrix (n <= m), one size for both.
template <typename T>
lapack_int qr_lwork(lapack_int m, lapack_int n) {
  T q1 = 0, q2 = 0, dummy = 0;
  check_info(geqrf(m, n, &dummy, std::max(1, m), &dummy, &q1, -1), "geqrf (workspace query)");
  check_info(orgqr(m, n, n, &dummy, std::max(1, m), &dummy, &q2, -1), "orgqr (workspace query)");
  return static_cast<lapack_int>(std::max(q1, q2)) + 1;
}

// LU with partial pivoting and the inverse from it (the batched polar iteration's inverse).
inline lapack_int getrf(lapack_int n, float* A, lapack_int lda, lapack_int* ipiv) {
  return DCALIGN_LAPACK_CALL(LAPACK_sgetrf, &n, &n, A, &lda, ipiv);
}
inline lapack_int getrf(lapack_int n, double* A, lapack_int lda, lapack_int* ipiv) {
  return DCALIGN_LAPACK_CALL(LAPACK_dgetrf, &n, &n, A, &lda, ipiv);
}
inline lapack_int getri(lapack_int n, float* A, lapack_int lda, const lapack_int* ipiv, float* work,
                        lapack_int lwork) {
  return DCALIGN_LAPACK_CALL(LAPACK_sgetri, &n, A, &lda, ipiv, work, &lwork);
}
inline lapack_int getri(lapack_int n, double* A, lapack_int lda, const lapack_int* ipiv,
                        double* work, lapack_int lwork) {
  return DCALIGN_LAPACK_CALL(LAPACK_dgetri, &n, A, &lda, ipiv, work, &lwork);
}

// The safe minimum of the precision (LAPACK's lamch('S')).
inline float safe_minimum(float) { return LAPACK_slamch("S"); }
inline double safe_minimum(double) { return LAPACK_dlamch("S"); }

// sygvx: itype 1 (A x = lambda B x), eigenvectors, eigenvalues il..iu (1-based), lower triangle.
inline lapack_int sygvx(lapack_int n, float* A, lapack_int lda, float* B, lapack_int ldb,
                        lapack_int il, lapack_int iu, lapack_int* m, float* w, float* Z,
                        lapack_int ldz, float* work, lapack_int lwork, lapack_int* iwork,
                        lapack_int* ifail) {
  const lapack_int itype = 1;
  const float zero = 0.0f, abstol = 2 * safe_minimum(0.0f);
  return DCALIGN_LAPACK_CALL(LAPACK_ssygvx, &itype, "V", "I", "L", &n, A, &lda, B, &ldb, &zero,
                             &zero, &il, &iu, &abstol, m, w, Z, &ldz, work, &lwork, iwork, ifail);
}
inline lapack_int sygvx(lapack_int n, double* A, lapack_int lda, double* B, lapack_int ldb,
                        lapack_int il, lapack_int iu, lapack_int* m, double* w, double* Z,
                        lapack_int ldz, double* work, lapack_int lwork, lapack_int* iwork,
                        lapack_int* ifail) {
  const lapack_int itype = 1;
  const double zero = 0.0, abstol = 2 * safe_minimum(0.0);
  return DCALIGN_LAPACK_CALL(LAPACK_dsygvx, &itype, "V", "I", "L", &n, A, &lda, B, &ldb, &zero,
                             &zero, &il, &iu, &abstol, m, w, Z, &ldz, work, &lwork, iwork, ifail);
}

// syevr: eigenvectors of the eigenvalues il..iu (1-based, ascending) of a symmetric matrix,
// lower triangle, MRRR. abstol = safe minimum, LAPACK's advice for the most accurate values.
inline lapack_int syevr(lapack_int n, float* A, lapack_int lda, lapack_int il, lapack_int iu,
                        lapack_int* m, float* w, float* Z, lapack_int ldz, lapack_int* isuppz,
                        float* work, lapack_int lwork, lapack_int* iwork, lapack_int liwork) {
  const float zero = 0.0f, abstol = safe_minimum(0.0f);
  return DCALIGN_LAPACK_CALL(LAPACK_ssyevr, "V", "I", "L", &n, A, &lda, &zero, &zero, &il, &iu,
                             &abstol, m, w, Z, &ldz, isuppz, work, &lwork, iwork, &liwork);
}
inline lapack_int syevr(lapack_int n, double* A, lapack_int lda, lapack_int il, lapack_int iu,
                        lapack_int* m, double* w, double* Z, lapack_int ldz, lapack_int* isuppz,
                        double* work, lapack_int lwork, lapack_int* iwork, lapack_int liwork) {
  const double zero = 0.0, abstol = safe_minimum(0.0);
  return DCALIGN_LAPACK_CALL(LAPACK_dsyevr, "V", "I", "L", &n, A, &lda, &zero, &zero, &il, &iu,
                             &abstol, m, w, Z, &ldz, isuppz, work, &lwork, iwork, &liwork);
}

// Cholesky B = L L^T (lower) and the reduction A <- L^{-1} A L^{-T} (sygst itype 1, lower).
inline lapack_int potrf_lower(lapack_int n, float* A, lapack_int lda) {
  return DCALIGN_LAPACK_CALL(LAPACK_spotrf, "L", &n, A, &lda);
}
inline lapack_int potrf_lower(lapack_int n, double* A, lapack_int lda) {
  return DCALIGN_LAPACK_CALL(LAPACK_dpotrf, "L", &n, A, &lda);
}
inline lapack_int sygst_lower(lapack_int n, float* A, lapack_int lda, const float* B,
                              lapack_int ldb) {
  const lapack_int itype = 1;
  return DCALIGN_LAPACK_CALL(LAPACK_ssygst, &itype, "L", &n, A, &lda, B, &ldb);
}
inline lapack_int sygst_lower(lapack_int n, double* A, lapack_int lda, const double* B,
                              lapack_int ldb) {
  const lapack_int itype = 1;
  return DCALIGN_LAPACK_CALL(LAPACK_dsygst, &itype, "L", &n, A, &lda, B, &ldb);
}

// What LAPACKE's high-level calls did for the routines below: a workspace query, then the call;
// and LAPACKE's refusal of NaN in the inputs (LAPACK's behaviour on NaN is unspecified), with the
// same negative info (minus the position of the NaN argument in LAPACKE's list).
template <typename T>
bool any_nan(const T* A, lapack_int rows, lapack_int cols, lapack_int ld) {
  for (lapack_int j = 0; j < cols; ++j)
    for (lapack_int i = 0; i < rows; ++i)
      if (A[i + static_cast<std::size_t>(j) * ld] != A[i + static_cast<std::size_t>(j) * ld])
        return true;
  return false;
}

// call(work, lwork) once with lwork = -1 (LAPACK's workspace query, the size in work[0]), then
// with a workspace of that size; the query's info when it fails.
template <typename T, typename Call>
lapack_int with_workspace(Call call) {
  T size = 0;
  if (const lapack_int info = call(&size, lapack_int(-1)); info != 0) return info;
  std::vector<T> work(static_cast<std::size_t>(std::max(size, T(1))));
  return call(work.data(), static_cast<lapack_int>(work.size()));
}

// gesvd with jobu = 'N', jobvt = 'S': the singular values and the thin V^T of the m x n A
// (overwritten); VT is min(m, n) x n.
template <typename T>
lapack_int gesvd_right(lapack_int m, lapack_int n, T* A, lapack_int lda, T* s, T* VT,
                       lapack_int ldvt) {
  if (any_nan(A, m, n, lda)) return -6;
  T unused = 0;
  const lapack_int ldu = 1;
  return with_workspace<T>([&](T* work, lapack_int lwork) {
    if constexpr (std::is_same_v<T, float>)
      return DCALIGN_LAPACK_CALL(LAPACK_sgesvd, "N", "S", &m, &n, A, &lda, s, &unused, &ldu, VT,
                                 &ldvt, work, &lwork);
    else
      return DCALIGN_LAPACK_CALL(LAPACK_dgesvd, "N", "S", &m, &n, A, &lda, s, &unused, &ldu, VT,
                                 &ldvt, work, &lwork);
  });
}

// Minimum-norm least squares of A X = B (A m x n, B m x nrhs in place, ldb >= max(m, n)):
// complete orthogonal factorisation with column pivoting (gelsy; jpvt in/out) or the SVD
// (gelsd); singular values below rcond sigma_1 count as zero; the effective rank in *rank.
inline lapack_int gelsy(lapack_int m, lapack_int n, lapack_int nrhs, double* A, lapack_int lda,
                        double* B, lapack_int ldb, lapack_int* jpvt, double rcond,
                        lapack_int* rank) {
  if (any_nan(A, m, n, lda)) return -6;
  if (any_nan(B, std::max(m, n), nrhs, ldb)) return -8;
  if (rcond != rcond) return -10;
  return with_workspace<double>([&](double* work, lapack_int lwork) {
    return DCALIGN_LAPACK_CALL(LAPACK_dgelsy, &m, &n, &nrhs, A, &lda, B, &ldb, jpvt, &rcond, rank,
                               work, &lwork);
  });
}
inline lapack_int gelsd(lapack_int m, lapack_int n, lapack_int nrhs, double* A, lapack_int lda,
                        double* B, lapack_int ldb, double* s, double rcond, lapack_int* rank) {
  if (any_nan(A, m, n, lda)) return -6;
  if (any_nan(B, std::max(m, n), nrhs, ldb)) return -8;
  if (rcond != rcond) return -10;
  // The query also sizes iwork (its minimum in iwork[0]).
  std::vector<lapack_int> iwork(1, 0);
  return with_workspace<double>([&](double* work, lapack_int lwork) {
    if (lwork != -1) iwork.resize(static_cast<std::size_t>(std::max<lapack_int>(iwork[0], 1)));
    return DCALIGN_LAPACK_CALL(LAPACK_dgelsd, &m, &n, &nrhs, A, &lda, B, &ldb, s, &rcond, rank,
                               work, &lwork, iwork.data());
  });
}

/// Sets OpenBLAS to `n` threads for the lifetime of the guard. Used around loops that run many
/// small LAPACK calls in parallel over users, where BLAS-level threads would oversubscribe.
/// Writes OpenBLAS's setting only when it differs, so that guards nested inside a parallel
/// region (where the outer guard already set 1) touch no shared state.
class BlasThreads {
 public:
  explicit BlasThreads(int n) : n_(n), saved_(openblas_get_num_threads()) {
    if (saved_ != n_) openblas_set_num_threads(n_);
  }
  ~BlasThreads() {
    if (saved_ != n_) openblas_set_num_threads(saved_);
  }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int n_, saved_;
};

}  // namespace dcalign::base
