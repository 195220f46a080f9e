#pragma once
// The CUDA implementations of the Primitives<T> operations, as free functions on a Context
// (cuda_backend.cu forwards the virtual calls here). Grouped by file:
//   blas_ops.cu    memory, BLAS-level operations, reductions
//   solver_ops.cu  factorisations (SVD, QR, least squares, generalized eigenproblem)
//   polar_ops.cu   the batched polar iteration's primitives
// The semantics are those of include/dcalign/backend.hpp; the CPU backend is the reference.
#include <vector>

#include "cuda/context.hpp"
#include "dcalign/backend.hpp"

namespace dcalign::cuda::ops {

// ---- memory and BLAS level (blas_ops.cu)
template <typename T>
Buffer<T> allocate(Context& ctx, index_t n);
template <typename T>
void to_device(Context& ctx, const T* host, T* dst, index_t n);
template <typename T>
void to_host(Context& ctx, const T* src, T* host, index_t n);
template <typename T>
void copy(Context& ctx, const T* src, T* dst, index_t n);
template <typename T>
void fill(Context& ctx, T* dst, index_t n, T value);
/// dst = src converted to D (float <-> double, or a copy), equal shapes, any leading dimensions.
template <typename S, typename D>
void convert(Context& ctx, MatrixView<const S> src, MatrixView<D> dst);
template <typename T>
void gemm(Context& ctx, Op ta, Op tb, T alpha, MatrixView<const T> A, MatrixView<const T> B, T beta,
          MatrixView<T> C);
template <typename T>
void gemm_batched(Context& ctx, Op ta, Op tb, T alpha, StackView<const T> A, StackView<const T> B,
                  T beta, StackView<T> C);
template <typename T>
void trsm_upper_batched(Context& ctx, StackView<const T> R, StackView<T> B);
template <typename T>
void vstack(Context& ctx, StackView<const T> in, MatrixView<T> out);
template <typename T>
void unvstack(Context& ctx, MatrixView<const T> in, StackView<T> out);
template <typename T>
void gather(Context& ctx, const T* src, index_t sc, index_t si, index_t sj, StackView<T> dst);
template <typename T>
void syrk(Context& ctx, Op trans, T alpha, MatrixView<const T> A, T beta, MatrixView<T> C);
template <typename T>
void geam(Context& ctx, T alpha, MatrixView<const T> A, T beta, MatrixView<const T> B,
          MatrixView<T> C);

// ---- reductions (blas_ops.cu)
template <typename T>
bool all_finite(Context& ctx, const T* x, index_t n);
template <typename T>
std::vector<index_t> first_nonfinite_batched(Context& ctx, StackView<const T> x);
template <typename T>
std::vector<T> orthogonality_errors(Context& ctx, StackView<const T> G);
template <typename T>
std::vector<T> residuals(Context& ctx, StackView<const T> A, StackView<const T> G,
                         MatrixView<const T> Z);
template <typename T>
std::vector<T> product_column_norms(Context& ctx, StackView<const T> A, StackView<const T> G);
template <typename T>
double sum_squares(Context& ctx, const T* x, index_t n);
template <typename T>
std::vector<double> inner_products(Context& ctx, StackView<const T> X, StackView<const T> Y);

// ---- factorisations (solver_ops.cu)
template <typename T>
PolarInfo<T> polar_batched(Context& ctx, StackView<const T> M, bool transposed, StackView<T> G);
template <typename T>
std::vector<T> qr_batched(Context& ctx, StackView<T> A, StackView<T> R);
template <typename T>
void svd_topk(Context& ctx, MatrixView<const T> W, index_t k, T* s, MatrixView<T> U,
              MatrixView<T> V);
template <typename T>
std::vector<T> lstsq_batched(Context& ctx, StackView<const T> A, MatrixView<const T> Z,
                             StackView<T> G);
template <typename T>
void syev_largest(Context& ctx, MatrixView<T> S, index_t k, T* evals, MatrixView<T> V);
template <typename T>
void sygv_smallest(Context& ctx, MatrixView<T> S, MatrixView<T> B, index_t k, T* evals,
                   MatrixView<T> V);

// ---- the batched polar iteration (polar_ops.cu)
template <typename T>
void polar_start(Context& ctx, StackView<const T> M, bool transposed, StackView<T> X, T* state,
                 double stop_below);
template <typename T>
void inverse_batched(Context& ctx, StackView<const T> X, StackView<T> Y, T* state);
template <typename T>
index_t polar_newton_step(Context& ctx, StackView<T> X, StackView<const T> Y, T* state,
                          int iteration, double tolerance);
/// The whole Newton phase in one kernel (kernels/polar_fused.cu) while n <= fused_polar_limit
/// and the device has the shared memory: the number of matrices still active, or -1 when the
/// kernel does not apply (the caller then composes inverse_batched and polar_newton_step).
template <typename T>
index_t polar_newton_steps(Context& ctx, StackView<T> X, StackView<T> Y, T* state, int max_steps,
                           double tolerance);
/// The fused kernel with the polish (Primitives::polar_newton_polish): the Newton phase and
/// each matrix's Newton-Schulz steps into G, one launch and no host read; false (nothing
/// queued) where the kernel does not apply.
template <typename T>
bool polar_newton_polish(Context& ctx, StackView<T> X, StackView<T> G, T* state, int max_steps,
                         double tolerance);
/// The largest order the fused kernel takes: X and its inverse in shared memory, 2 n^2 values
/// (128 KiB at n = 128 in float, 144 KiB at 96 in double; an H100's block may have 227 KiB).
template <typename T>
constexpr index_t fused_polar_limit() {
  return sizeof(T) == 4 ? 128 : 96;
}
template <typename T>
void add_identity_batched(Context& ctx, T alpha, StackView<T> C);

// ---- small helpers shared by the files above (blas_ops.cu)
/// Device-to-host copy of n values followed by a stream synchronisation.
template <typename U>
void download(Context& ctx, const U* src, U* host, index_t n);
/// Largest number of users whose per-user scratch of `per_user` values fits the chunk budget
/// (at least 1): bounds the scratch of the batched products of residuals and friends.
index_t users_per_chunk(index_t per_user, index_t count);

}  // namespace dcalign::cuda::ops
