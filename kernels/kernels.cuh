#pragma once
// Host-callable launchers of dcalign's own CUDA kernels (src/cuda calls these; the kernels are
// in kernels/*.cu). Every launcher queues its kernel on `stream`, checks the launch and
// returns without synchronising. T is float or double.
//
// Matrices are column-major. A batch of matrices is given as (data, ld, stride): element (i, j)
// of matrix k at data[k * stride + i + j * ld]. Counts and offsets are 64-bit; a single matrix
// has fewer than 2^31 elements (checked by the callers through to_int).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dcalign::cuda::kernels {

using index_t = std::int64_t;

/// Whether this build holds kernel code that `device` can run (cudaSuccess), else the error
/// (e.g. cudaErrorNoKernelImageForDevice on a GPU older than the compiled architectures).
/// Leaves the current device unchanged.
cudaError_t probe_kernel_image(int device);

// ---- elementwise (kernels/elementwise.cu)
/// out[k] = base + k * stride_bytes.
void pointer_array(cudaStream_t stream, void** out, const void* base, index_t stride_bytes,
                   index_t count);
/// dst_k = src_k for rows x cols matrices in two strided layouts.
template <typename T>
void copy_matrices(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* src,
                   index_t src_ld, index_t src_stride, T* dst, index_t dst_ld, index_t dst_stride);
/// dst_k(i, j) = src[k * sc + i * si + j * sj] for rows x cols matrices (any element strides).
template <typename T>
void gather_matrices(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* src,
                     index_t sc, index_t si, index_t sj, T* dst, index_t dst_ld,
                     index_t dst_stride);
/// dst = src rounded or widened to D (float <-> double), rows x cols, column-major.
template <typename S, typename D>
void convert_matrix(cudaStream_t stream, index_t rows, index_t cols, const S* src, index_t src_ld,
                    D* dst, index_t dst_ld);
/// dst_k = src_k^T, src_k rows x cols, dst_k cols x rows.
template <typename T>
void transpose_matrices(cudaStream_t stream, index_t count, index_t rows, index_t cols,
                        const T* src, index_t src_ld, index_t src_stride, T* dst, index_t dst_ld,
                        index_t dst_stride);
template <typename T>
void fill(cudaStream_t stream, T* dst, index_t n, T value);
/// C_k(i, i) += alpha for the n x n matrices C_k.
template <typename T>
void add_identity(cudaStream_t stream, index_t count, index_t n, T* C, index_t ld, index_t stride,
                  T alpha);
/// R_k = upper triangle of the leading n x n block of A_k (zeros below the diagonal).
template <typename T>
void upper_triangle(cudaStream_t stream, index_t count, index_t n, const T* A, index_t lda,
                    index_t stride_a, T* R, index_t ldr, index_t stride_r);
/// Row i of X_k (rows x cols) times 1/s_k[i], or zeroed where s_k[i] = 0 (s_k = s + k*rows).
template <typename T>
void scale_rows_by_inverse(cudaStream_t stream, index_t count, index_t rows, index_t cols, T* X,
                           index_t ld, index_t stride, const T* s);

// ---- reductions (kernels/reductions.cu); sums accumulate in double
/// *flag = 1 if some x[i] is NaN or Inf (*flag must be 0 before).
template <typename T>
void flag_nonfinite(cudaStream_t stream, const T* x, index_t n, int* flag);
/// first[k] = min linear index i + j*rows of a non-finite entry of matrix k; first[] must be
/// all ones (0xFF bytes) before; entries without one stay so.
template <typename T>
void first_nonfinite(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* x,
                     index_t ld, index_t stride, unsigned long long* first);
/// Deterministic sum of x[i]^2: `partials` holds kSumPartials doubles, the result goes to *out.
constexpr int kSumPartials = 1024;
template <typename T>
void sum_squares(cudaStream_t stream, const T* x, index_t n, double* partials, double* out);
/// out[k] = ||M_k - I||_F for contiguous n x n matrices M_k.
template <typename T>
void identity_distance(cudaStream_t stream, index_t count, index_t n, const T* M, T* out);
/// out[k] = sum_ij (Y_k(i, j) - Z(i, j))^2, Y_k contiguous rows x cols, Z with leading dim ldz.
template <typename T>
void residual_sums(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* Y,
                   const T* Z, index_t ldz, T* out);
/// out[(k0 + k) + j * total] = ||Y_k(:, j)||^2 for contiguous rows x cols matrices Y_k.
template <typename T>
void column_sums(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* Y,
                 index_t k0, index_t total, T* out);
/// out[k] = sum_ij X_k(i, j) Y_k(i, j) in double, for strided rows x cols X_k, Y_k.
template <typename T>
void inner_products(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* X,
                    index_t ldx, index_t stride_x, const T* Y, index_t ldy, index_t stride_y,
                    double* out);
/// out[k] = min_j |R_k(j, j)| / max_j |R_k(j, j)| (0 when the maximum is 0).
template <typename T>
void diagonal_ratio(cudaStream_t stream, index_t count, index_t n, const T* R, index_t ld,
                    index_t stride, T* out);

// ---- the batched polar iteration (kernels/polar_kernels.cu); state as in base/polar_scalar.hpp
/// X_k = M_k / ||M_k||_F (M_k^T / ||M_k||_F when transposed), state_k = polar::start(...,
/// stop_below).
template <typename T>
void polar_start(cudaStream_t stream, index_t count, index_t n, const T* M, index_t ld,
                 index_t stride, bool transposed, T* X, T* state, double stop_below);
/// polar::mark_singular(state_k) where info[k] > 0 and polar::active(state_k).
template <typename T>
void polar_mark_singular(cudaStream_t stream, index_t count, const int* info, T* state);
/// One scaled Newton step on every active matrix (contiguous n x n X_k, Y_k = X_k^{-1});
/// atomically adds the number of matrices still active afterwards to *active (zeroed before).
template <typename T>
void polar_newton_step(cudaStream_t stream, index_t count, index_t n, T* X, const T* Y, T* state,
                       int iteration, double tolerance, int* active);

// ---- the fused Newton phase (kernels/polar_fused.cu)
/// Dynamic shared memory that polar_newton_fused needs for n x n matrices.
template <typename T>
std::size_t polar_fused_shared_bytes(index_t n);
/// polar::newton_phase (base/polar_block.hpp) on every matrix, one block each with X_k and its
/// inverse in shared memory: up to max_steps Newton steps per matrix with no host exchange;
/// atomically adds the number of matrices still active afterwards to *active (zeroed before;
/// active may be null: no count).
/// With G (contiguous n x n matrices), each block then runs its polish (polar::schulz_phase,
/// polar::polish_steps of its state) into G_k and leaves X_k as it was; without, X_k receives
/// the Newton phase's iterate. Returns the error of raising the kernel's shared-memory limit
/// (nothing queued then), else cudaSuccess.
template <typename T>
cudaError_t polar_newton_fused(cudaStream_t stream, index_t count, index_t n, T* X, T* state,
                               int max_steps, double tolerance, int* active, T* G = nullptr);

}  // namespace dcalign::cuda::kernels
