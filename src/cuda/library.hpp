#pragma once
// Precision dispatch for the cuBLAS and cuSOLVER routines the backend uses: one overload per
// precision, same argument list as the library's, returning its status (the callers wrap each
// call in DCALIGN_CUDA so that the error names the call).
#include <cublas_v2.h>
#include <cusolverDn.h>

namespace dcalign::cuda::lib {

inline cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// ---- cuBLAS
inline cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float* alpha, const float* A, int lda,
                           const float* B, int ldb, const float* beta, float* C, int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const double* alpha, const double* A, int lda,
                           const double* B, int ldb, const double* beta, double* C, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

inline cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta,
                                           cublasOperation_t tb, int m, int n, int k,
                                           const float* alpha, const float* A, int lda,
                                           long long sa, const float* B, int ldb, long long sb,
                                           const float* beta, float* C, int ldc, long long sc,
                                           int count) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc,
                                   sc, count);
}
inline cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta,
                                           cublasOperation_t tb, int m, int n, int k,
                                           const double* alpha, const double* A, int lda,
                                           long long sa, const double* B, int ldb, long long sb,
                                           const double* beta, double* C, int ldc, long long sc,
                                           int count) {
  return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc,
                                   sc, count);
}

inline cublasStatus_t geam(cublasHandle_t h, int m, int n, const float* alpha, const float* A,
                           int lda, const float* beta, const float* B, int ldb, float* C, int ldc) {
  return cublasSgeam(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, alpha, A, lda, beta, B, ldb, C, ldc);
}
inline cublasStatus_t geam(cublasHandle_t h, int m, int n, const double* alpha, const double* A,
                           int lda, const double* beta, const double* B, int ldb, double* C,
                           int ldc) {
  return cublasDgeam(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, alpha, A, lda, beta, B, ldb, C, ldc);
}

/// Left, upper, no transpose, non-unit: solves R X = B in place.
inline cublasStatus_t trsm_upper_batched(cublasHandle_t h, int m, int n, const float* alpha,
                                         const float* const R[], int ldr, float* const B[], int ldb,
                                         int count) {
  return cublasStrsmBatched(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                            CUBLAS_DIAG_NON_UNIT, m, n, alpha, R, ldr, B, ldb, count);
}
inline cublasStatus_t trsm_upper_batched(cublasHandle_t h, int m, int n, const double* alpha,
                                         const double* const R[], int ldr, double* const B[],
                                         int ldb, int count) {
  return cublasDtrsmBatched(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                            CUBLAS_DIAG_NON_UNIT, m, n, alpha, R, ldr, B, ldb, count);
}

/// Right, upper, no transpose, non-unit: B <- B R^{-1} in place (B m x n, R n x n).
inline cublasStatus_t trsm_right_upper_batched(cublasHandle_t h, int m, int n, const float* alpha,
                                               const float* const R[], int ldr, float* const B[],
                                               int ldb, int count) {
  return cublasStrsmBatched(h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                            CUBLAS_DIAG_NON_UNIT, m, n, alpha, R, ldr, B, ldb, count);
}
inline cublasStatus_t trsm_right_upper_batched(cublasHandle_t h, int m, int n, const double* alpha,
                                               const double* const R[], int ldr, double* const B[],
                                               int ldb, int count) {
  return cublasDtrsmBatched(h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                            CUBLAS_DIAG_NON_UNIT, m, n, alpha, R, ldr, B, ldb, count);
}

inline cublasStatus_t getrf_batched(cublasHandle_t h, int n, float* const A[], int lda, int* piv,
                                    int* info, int count) {
  return cublasSgetrfBatched(h, n, A, lda, piv, info, count);
}
inline cublasStatus_t getrf_batched(cublasHandle_t h, int n, double* const A[], int lda, int* piv,
                                    int* info, int count) {
  return cublasDgetrfBatched(h, n, A, lda, piv, info, count);
}
inline cublasStatus_t getri_batched(cublasHandle_t h, int n, const float* const A[], int lda,
                                    const int* piv, float* const C[], int ldc, int* info,
                                    int count) {
  return cublasSgetriBatched(h, n, A, lda, piv, C, ldc, info, count);
}
inline cublasStatus_t getri_batched(cublasHandle_t h, int n, const double* const A[], int lda,
                                    const int* piv, double* const C[], int ldc, int* info,
                                    int count) {
  return cublasDgetriBatched(h, n, A, lda, piv, C, ldc, info, count);
}
inline cublasStatus_t matinv_batched(cublasHandle_t h, int n, const float* const A[], int lda,
                                     float* const Ainv[], int lda_inv, int* info, int count) {
  return cublasSmatinvBatched(h, n, A, lda, Ainv, lda_inv, info, count);
}
inline cublasStatus_t matinv_batched(cublasHandle_t h, int n, const double* const A[], int lda,
                                     double* const Ainv[], int lda_inv, int* info, int count) {
  return cublasDmatinvBatched(h, n, A, lda, Ainv, lda_inv, info, count);
}

// ---- cuSOLVER
inline cusolverStatus_t gesvd_buffer_size(cusolverDnHandle_t h, int m, int n, const float*,
                                          int* lwork) {
  return cusolverDnSgesvd_bufferSize(h, m, n, lwork);
}
inline cusolverStatus_t gesvd_buffer_size(cusolverDnHandle_t h, int m, int n, const double*,
                                          int* lwork) {
  return cusolverDnDgesvd_bufferSize(h, m, n, lwork);
}
inline cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char jobu, signed char jobvt, int m,
                              int n, float* A, int lda, float* S, float* U, int ldu, float* VT,
                              int ldvt, float* work, int lwork, float* rwork, int* info) {
  return cusolverDnSgesvd(h, jobu, jobvt, m, n, A, lda, S, U, ldu, VT, ldvt, work, lwork, rwork,
                          info);
}
inline cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char jobu, signed char jobvt, int m,
                              int n, double* A, int lda, double* S, double* U, int ldu, double* VT,
                              int ldvt, double* work, int lwork, double* rwork, int* info) {
  return cusolverDnDgesvd(h, jobu, jobvt, m, n, A, lda, S, U, ldu, VT, ldvt, work, lwork, rwork,
                          info);
}

inline cusolverStatus_t gesvdj_batched_buffer_size(cusolverDnHandle_t h, int m, int n,
                                                   const float* A, int lda, const float* S,
                                                   const float* U, int ldu, const float* V, int ldv,
                                                   int* lwork, gesvdjInfo_t params, int count) {
  return cusolverDnSgesvdjBatched_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, m, n, A, lda, S, U, ldu,
                                             V, ldv, lwork, params, count);
}
inline cusolverStatus_t gesvdj_batched_buffer_size(cusolverDnHandle_t h, int m, int n,
                                                   const double* A, int lda, const double* S,
                                                   const double* U, int ldu, const double* V,
                                                   int ldv, int* lwork, gesvdjInfo_t params,
                                                   int count) {
  return cusolverDnDgesvdjBatched_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, m, n, A, lda, S, U, ldu,
                                             V, ldv, lwork, params, count);
}
inline cusolverStatus_t gesvdj_batched(cusolverDnHandle_t h, int m, int n, float* A, int lda,
                                       float* S, float* U, int ldu, float* V, int ldv, float* work,
                                       int lwork, int* info, gesvdjInfo_t params, int count) {
  return cusolverDnSgesvdjBatched(h, CUSOLVER_EIG_MODE_VECTOR, m, n, A, lda, S, U, ldu, V, ldv,
                                  work, lwork, info, params, count);
}
inline cusolverStatus_t gesvdj_batched(cusolverDnHandle_t h, int m, int n, double* A, int lda,
                                       double* S, double* U, int ldu, double* V, int ldv,
                                       double* work, int lwork, int* info, gesvdjInfo_t params,
                                       int count) {
  return cusolverDnDgesvdjBatched(h, CUSOLVER_EIG_MODE_VECTOR, m, n, A, lda, S, U, ldu, V, ldv,
                                  work, lwork, info, params, count);
}

/// Blocked LU with partial pivoting of one n x n matrix in place (cuSOLVER, legacy 32-bit API),
/// and the solve A X = B with its factors (B overwritten by X).
inline cusolverStatus_t getrf_buffer_size(cusolverDnHandle_t h, int n, float* A, int lda,
                                          int* lwork) {
  return cusolverDnSgetrf_bufferSize(h, n, n, A, lda, lwork);
}
inline cusolverStatus_t getrf_buffer_size(cusolverDnHandle_t h, int n, double* A, int lda,
                                          int* lwork) {
  return cusolverDnDgetrf_bufferSize(h, n, n, A, lda, lwork);
}
inline cusolverStatus_t getrf(cusolverDnHandle_t h, int n, float* A, int lda, float* work, int* piv,
                              int* info) {
  return cusolverDnSgetrf(h, n, n, A, lda, work, piv, info);
}
inline cusolverStatus_t getrf(cusolverDnHandle_t h, int n, double* A, int lda, double* work,
                              int* piv, int* info) {
  return cusolverDnDgetrf(h, n, n, A, lda, work, piv, info);
}
inline cusolverStatus_t getrs(cusolverDnHandle_t h, int n, int nrhs, const float* A, int lda,
                              const int* piv, float* B, int ldb, int* info) {
  return cusolverDnSgetrs(h, CUBLAS_OP_N, n, nrhs, A, lda, piv, B, ldb, info);
}
inline cusolverStatus_t getrs(cusolverDnHandle_t h, int n, int nrhs, const double* A, int lda,
                              const int* piv, double* B, int ldb, int* info) {
  return cusolverDnDgetrs(h, CUBLAS_OP_N, n, nrhs, A, lda, piv, B, ldb, info);
}

/// Upper Cholesky factor of every n x n matrix in place (A = R^T R), info per matrix.
inline cusolverStatus_t potrf_batched(cusolverDnHandle_t h, int n, float* A[], int lda, int* info,
                                      int count) {
  return cusolverDnSpotrfBatched(h, CUBLAS_FILL_MODE_UPPER, n, A, lda, info, count);
}
inline cusolverStatus_t potrf_batched(cusolverDnHandle_t h, int n, double* A[], int lda, int* info,
                                      int count) {
  return cusolverDnDpotrfBatched(h, CUBLAS_FILL_MODE_UPPER, n, A, lda, info, count);
}

inline cusolverStatus_t geqrf_buffer_size(cusolverDnHandle_t h, int m, int n, float* A, int lda,
                                          int* lwork) {
  return cusolverDnSgeqrf_bufferSize(h, m, n, A, lda, lwork);
}
inline cusolverStatus_t geqrf_buffer_size(cusolverDnHandle_t h, int m, int n, double* A, int lda,
                                          int* lwork) {
  return cusolverDnDgeqrf_bufferSize(h, m, n, A, lda, lwork);
}
inline cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, float* A, int lda, float* tau,
                              float* work, int lwork, int* info) {
  return cusolverDnSgeqrf(h, m, n, A, lda, tau, work, lwork, info);
}
inline cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, double* A, int lda, double* tau,
                              double* work, int lwork, int* info) {
  return cusolverDnDgeqrf(h, m, n, A, lda, tau, work, lwork, info);
}
inline cusolverStatus_t orgqr_buffer_size(cusolverDnHandle_t h, int m, int n, int k, const float* A,
                                          int lda, const float* tau, int* lwork) {
  return cusolverDnSorgqr_bufferSize(h, m, n, k, A, lda, tau, lwork);
}
inline cusolverStatus_t orgqr_buffer_size(cusolverDnHandle_t h, int m, int n, int k,
                                          const double* A, int lda, const double* tau, int* lwork) {
  return cusolverDnDorgqr_bufferSize(h, m, n, k, A, lda, tau, lwork);
}
inline cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, float* A, int lda,
                              const float* tau, float* work, int lwork, int* info) {
  return cusolverDnSorgqr(h, m, n, k, A, lda, tau, work, lwork, info);
}
inline cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, double* A, int lda,
                              const double* tau, double* work, int lwork, int* info) {
  return cusolverDnDorgqr(h, m, n, k, A, lda, tau, work, lwork, info);
}

/// S v = lambda B v (itype 1), eigenvectors, eigenvalues il..iu (1-based), lower triangles.
inline cusolverStatus_t sygvdx_buffer_size(cusolverDnHandle_t h, int n, const float* A, int lda,
                                           const float* B, int ldb, int il, int iu, int* meig,
                                           const float* W, int* lwork) {
  return cusolverDnSsygvdx_bufferSize(h, CUSOLVER_EIG_TYPE_1, CUSOLVER_EIG_MODE_VECTOR,
                                      CUSOLVER_EIG_RANGE_I, CUBLAS_FILL_MODE_LOWER, n, A, lda, B,
                                      ldb, 0.0f, 0.0f, il, iu, meig, W, lwork);
}
inline cusolverStatus_t sygvdx_buffer_size(cusolverDnHandle_t h, int n, const double* A, int lda,
                                           const double* B, int ldb, int il, int iu, int* meig,
                                           const double* W, int* lwork) {
  return cusolverDnDsygvdx_bufferSize(h, CUSOLVER_EIG_TYPE_1, CUSOLVER_EIG_MODE_VECTOR,
                                      CUSOLVER_EIG_RANGE_I, CUBLAS_FILL_MODE_LOWER, n, A, lda, B,
                                      ldb, 0.0, 0.0, il, iu, meig, W, lwork);
}
inline cusolverStatus_t sygvdx(cusolverDnHandle_t h, int n, float* A, int lda, float* B, int ldb,
                               int il, int iu, int* meig, float* W, float* work, int lwork,
                               int* info) {
  return cusolverDnSsygvdx(h, CUSOLVER_EIG_TYPE_1, CUSOLVER_EIG_MODE_VECTOR, CUSOLVER_EIG_RANGE_I,
                           CUBLAS_FILL_MODE_LOWER, n, A, lda, B, ldb, 0.0f, 0.0f, il, iu, meig, W,
                           work, lwork, info);
}
inline cusolverStatus_t sygvdx(cusolverDnHandle_t h, int n, double* A, int lda, double* B, int ldb,
                               int il, int iu, int* meig, double* W, double* work, int lwork,
                               int* info) {
  return cusolverDnDsygvdx(h, CUSOLVER_EIG_TYPE_1, CUSOLVER_EIG_MODE_VECTOR, CUSOLVER_EIG_RANGE_I,
                           CUBLAS_FILL_MODE_LOWER, n, A, lda, B, ldb, 0.0, 0.0, il, iu, meig, W,
                           work, lwork, info);
}

inline cusolverStatus_t syevdx_buffer_size(cusolverDnHandle_t h, int n, const float* A, int lda,
                                           int il, int iu, int* meig, const float* W, int* lwork) {
  return cusolverDnSsyevdx_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUSOLVER_EIG_RANGE_I,
                                      CUBLAS_FILL_MODE_LOWER, n, A, lda, 0.0f, 0.0f, il, iu, meig,
                                      W, lwork);
}
inline cusolverStatus_t syevdx(cusolverDnHandle_t h, int n, float* A, int lda, int il, int iu,
                               int* meig, float* W, float* work, int lwork, int* info) {
  return cusolverDnSsyevdx(h, CUSOLVER_EIG_MODE_VECTOR, CUSOLVER_EIG_RANGE_I,
                           CUBLAS_FILL_MODE_LOWER, n, A, lda, 0.0f, 0.0f, il, iu, meig, W, work,
                           lwork, info);
}
inline cusolverStatus_t syevdx_buffer_size(cusolverDnHandle_t h, int n, const double* A, int lda,
                                           int il, int iu, int* meig, const double* W, int* lwork) {
  return cusolverDnDsyevdx_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUSOLVER_EIG_RANGE_I,
                                      CUBLAS_FILL_MODE_LOWER, n, A, lda, 0.0, 0.0, il, iu, meig, W,
                                      lwork);
}
inline cusolverStatus_t syevdx(cusolverDnHandle_t h, int n, double* A, int lda, int il, int iu,
                               int* meig, double* W, double* work, int lwork, int* info) {
  return cusolverDnDsyevdx(h, CUSOLVER_EIG_MODE_VECTOR, CUSOLVER_EIG_RANGE_I,
                           CUBLAS_FILL_MODE_LOWER, n, A, lda, 0.0, 0.0, il, iu, meig, W, work,
                           lwork, info);
}

}  // namespace dcalign::cuda::lib
