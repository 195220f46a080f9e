#pragma once
// Overloads that map float/double onto the s/d BLAS and LAPACK routines, so the CPU backend is
// written once as a template. Column-major throughout. LAPACK errors become exceptions here.
#include <cblas.h>
#include <lapacke.h>

#include <string>

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

// gesdd with jobz = 'S' (thin U and V^T). `work`/`iwork` are caller-provided; a query with
// lwork = -1 returns the optimal size in work[0].
inline lapack_int gesdd(lapack_int m, lapack_int n, float* A, lapack_int lda, float* s, float* U,
                        lapack_int ldu, float* VT, lapack_int ldvt, float* work, lapack_int lwork,
                        lapack_int* iwork) {
  return LAPACKE_sgesdd_work(LAPACK_COL_MAJOR, 'S', m, n, A, lda, s, U, ldu, VT, ldvt, work, lwork,
                             iwork);
}
inline lapack_int gesdd(lapack_int m, lapack_int n, double* A, lapack_int lda, double* s, double* U,
                        lapack_int ldu, double* VT, lapack_int ldvt, double* work, lapack_int lwork,
                        lapack_int* iwork) {
  return LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', m, n, A, lda, s, U, ldu, VT, ldvt, work, lwork,
                             iwork);
}

inline lapack_int geqrf(lapack_int m, lapack_int n, float* A, lapack_int lda, float* tau,
                        float* work, lapack_int lwork) {
  return LAPACKE_sgeqrf_work(LAPACK_COL_MAJOR, m, n, A, lda, tau, work, lwork);
}
inline lapack_int geqrf(lapack_int m, lapack_int n, double* A, lapack_int lda, double* tau,
                        double* work, lapack_int lwork) {
  return LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, m, n, A, lda, tau, work, lwork);
}
inline lapack_int orgqr(lapack_int m, lapack_int n, lapack_int k, float* A, lapack_int lda,
                        const float* tau, float* work, lapack_int lwork) {
  return LAPACKE_sorgqr_work(LAPACK_COL_MAJOR, m, n, k, A, lda, tau, work, lwork);
}
inline lapack_int orgqr(lapack_int m, lapack_int n, lapack_int k, double* A, lapack_int lda,
                        const double* tau, double* work, lapack_int lwork) {
  return LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, m, n, k, A, lda, tau, work, lwork);
}

// LU with partial pivoting and the inverse from it (the batched polar iteration's inverse).
inline lapack_int getrf(lapack_int n, float* A, lapack_int lda, lapack_int* ipiv) {
  return LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, n, n, A, lda, ipiv);
}
inline lapack_int getrf(lapack_int n, double* A, lapack_int lda, lapack_int* ipiv) {
  return LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, n, n, A, lda, ipiv);
}
inline lapack_int getri(lapack_int n, float* A, lapack_int lda, const lapack_int* ipiv, float* work,
                        lapack_int lwork) {
  return LAPACKE_sgetri_work(LAPACK_COL_MAJOR, n, A, lda, ipiv, work, lwork);
}
inline lapack_int getri(lapack_int n, double* A, lapack_int lda, const lapack_int* ipiv,
                        double* work, lapack_int lwork) {
  return LAPACKE_dgetri_work(LAPACK_COL_MAJOR, n, A, lda, ipiv, work, lwork);
}

// sygvx: itype 1 (A x = lambda B x), eigenvectors, eigenvalues il..iu (1-based), lower triangle.
inline lapack_int sygvx(lapack_int n, float* A, lapack_int lda, float* B, lapack_int ldb,
                        lapack_int il, lapack_int iu, lapack_int* m, float* w, float* Z,
                        lapack_int ldz, float* work, lapack_int lwork, lapack_int* iwork,
                        lapack_int* ifail) {
  return LAPACKE_ssygvx_work(LAPACK_COL_MAJOR, 1, 'V', 'I', 'L', n, A, lda, B, ldb, 0.0f, 0.0f, il,
                             iu, 2 * LAPACKE_slamch('S'), m, w, Z, ldz, work, lwork, iwork, ifail);
}
inline lapack_int sygvx(lapack_int n, double* A, lapack_int lda, double* B, lapack_int ldb,
                        lapack_int il, lapack_int iu, lapack_int* m, double* w, double* Z,
                        lapack_int ldz, double* work, lapack_int lwork, lapack_int* iwork,
                        lapack_int* ifail) {
  return LAPACKE_dsygvx_work(LAPACK_COL_MAJOR, 1, 'V', 'I', 'L', n, A, lda, B, ldb, 0.0, 0.0, il,
                             iu, 2 * LAPACKE_dlamch('S'), m, w, Z, ldz, work, lwork, iwork, ifail);
}

// syevr: eigenvectors of the eigenvalues il..iu (1-based, ascending) of a symmetric matrix,
// lower triangle, MRRR. abstol = safe minimum, LAPACK's advice for the most accurate values.
inline lapack_int syevr(lapack_int n, float* A, lapack_int lda, lapack_int il, lapack_int iu,
                        lapack_int* m, float* w, float* Z, lapack_int ldz, lapack_int* isuppz,
                        float* work, lapack_int lwork, lapack_int* iwork, lapack_int liwork) {
  return LAPACKE_ssyevr_work(LAPACK_COL_MAJOR, 'V', 'I', 'L', n, A, lda, 0.0f, 0.0f, il, iu,
                             LAPACKE_slamch('S'), m, w, Z, ldz, isuppz, work, lwork, iwork, liwork);
}
inline lapack_int syevr(lapack_int n, double* A, lapack_int lda, lapack_int il, lapack_int iu,
                        lapack_int* m, double* w, double* Z, lapack_int ldz, lapack_int* isuppz,
                        double* work, lapack_int lwork, lapack_int* iwork, lapack_int liwork) {
  return LAPACKE_dsyevr_work(LAPACK_COL_MAJOR, 'V', 'I', 'L', n, A, lda, 0.0, 0.0, il, iu,
                             LAPACKE_dlamch('S'), m, w, Z, ldz, isuppz, work, lwork, iwork, liwork);
}

// Cholesky B = L L^T (lower) and the reduction A <- L^{-1} A L^{-T} (sygst itype 1, lower).
inline lapack_int potrf_lower(lapack_int n, float* A, lapack_int lda) {
  return LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'L', n, A, lda);
}
inline lapack_int potrf_lower(lapack_int n, double* A, lapack_int lda) {
  return LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', n, A, lda);
}
inline lapack_int sygst_lower(lapack_int n, float* A, lapack_int lda, const float* B,
                              lapack_int ldb) {
  return LAPACKE_ssygst_work(LAPACK_COL_MAJOR, 1, 'L', n, A, lda, B, ldb);
}
inline lapack_int sygst_lower(lapack_int n, double* A, lapack_int lda, const double* B,
                              lapack_int ldb) {
  return LAPACKE_dsygst_work(LAPACK_COL_MAJOR, 1, 'L', n, A, lda, B, ldb);
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
