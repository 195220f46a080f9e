// Reductions whose results go to the host (checks, norms, residuals). Sums accumulate in double
// in a fixed order (per-thread strided sums, then block_sum), so repeated runs agree bitwise.
#include <cmath>

#include "cuda/check.hpp"
#include "kernels/device_util.cuh"
#include "kernels/kernels.cuh"

namespace dcalign::cuda::kernels {
namespace {

// NaN/Inf scan with early-out flag (Thrust's any_of would do, with an extra temporary
// allocation and a synchronisation of its own).
template <typename T>
__global__ void flag_nonfinite_kernel(const T* x, index_t n, int* flag) {
  bool bad = false;
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n;
       i += index_t(gridDim.x) * blockDim.x)
    bad = bad || !isfinite(x[i]);
  if (bad) *flag = 1;  // benign race: every writer stores 1
}

// First non-finite entry per matrix; no library reduction returns a per-matrix argmin of a
// predicate.
template <typename T>
__global__ void first_nonfinite_kernel(index_t count, int rows, int cols, const T* x, index_t ld,
                                       index_t stride, unsigned long long* first) {
  const int per = rows * cols;
  for (index_t k = blockIdx.y; k < count; k += gridDim.y)
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < per; e += gridDim.x * blockDim.x) {
      const int i = e % rows, j = e / rows;
      if (!isfinite(x[k * stride + i + j * ld]))
        atomicMin(first + k, static_cast<unsigned long long>(e));
    }
}

// Sum of squares in double, pass 1: one partial per block (deterministic, unlike a single
// atomicAdd of doubles).
template <typename T>
__global__ void sum_squares_partial_kernel(const T* x, index_t n, double* partials) {
  __shared__ double shared[kWarps];
  double s = 0.0;
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n;
       i += index_t(gridDim.x) * blockDim.x) {
    const double v = static_cast<double>(x[i]);
    s += v * v;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// Pass 2: one block adds the partials in a fixed order.
__global__ void sum_partials_kernel(const double* partials, int n, double* out) {
  __shared__ double shared[kWarps];
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += partials[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) *out = s;
}

// ||M_k - I||_F per matrix (the Gram matrices G_k^T G_k come from cuBLAS).
template <typename T>
__global__ void identity_distance_kernel(int n, const T* M, T* out) {
  __shared__ double shared[kWarps];
  const index_t k = blockIdx.x;
  const T* m = M + k * n * n;
  const int per = n * n;
  double s = 0.0;
  for (int e = threadIdx.x; e < per; e += blockDim.x) {
    const int i = e % n, j = e / n;
    const double d = static_cast<double>(m[e]) - (i == j ? 1.0 : 0.0);
    s += d * d;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) out[k] = static_cast<T>(sqrt(s));
}

// ||Y_k - Z||_F^2 per matrix (Y_k = A_k G_k from cuBLAS).
template <typename T>
__global__ void residual_sums_kernel(int rows, int cols, const T* Y, const T* Z, index_t ldz,
                                     T* out) {
  __shared__ double shared[kWarps];
  const index_t k = blockIdx.x;
  const int per = rows * cols;
  const T* y = Y + k * per;
  double s = 0.0;
  for (int e = threadIdx.x; e < per; e += blockDim.x) {
    const int i = e % rows, j = e / rows;
    const double d = static_cast<double>(y[e]) - static_cast<double>(Z[i + j * ldz]);
    s += d * d;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) out[k] = static_cast<T>(s);
}

// Squared column norms of each Y_k, one warp per column.
template <typename T>
__global__ void column_sums_kernel(int rows, int cols, const T* Y, index_t k0, index_t total,
                                   T* out) {
  const index_t k = blockIdx.x;
  const T* y = Y + k * rows * cols;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int j = warp; j < cols; j += kWarps) {
    double s = 0.0;
    for (int i = lane; i < rows; i += 32) {
      const double v = static_cast<double>(y[i + static_cast<index_t>(j) * rows]);
      s += v * v;
    }
    s = warp_sum(s);
    if (lane == 0) out[(k0 + k) + j * total] = static_cast<T>(s);
  }
}

// Frobenius inner products per matrix of two strided stacks (cuBLAS's dot works on one vector
// per call, and a strided matrix is not one vector).
template <typename T>
__global__ void inner_products_kernel(int rows, int cols, const T* X, index_t ldx, index_t stride_x,
                                      const T* Y, index_t ldy, index_t stride_y, double* out) {
  __shared__ double shared[kWarps];
  const index_t k = blockIdx.x;
  const T* x = X + k * stride_x;
  const T* y = Y + k * stride_y;
  const int per = rows * cols;
  double s = 0.0;
  for (int e = threadIdx.x; e < per; e += blockDim.x) {
    const int i = e % rows, j = e / rows;
    s += static_cast<double>(x[i + j * ldx]) * static_cast<double>(y[i + j * ldy]);
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) out[k] = s;
}

// min |R_jj| / max |R_jj| per matrix; one thread per matrix (n <= a few thousand).
template <typename T>
__global__ void diagonal_ratio_kernel(index_t count, int n, const T* R, index_t ld, index_t stride,
                                      T* out) {
  for (index_t k = blockIdx.x * index_t(blockDim.x) + threadIdx.x; k < count;
       k += index_t(gridDim.x) * blockDim.x) {
    const T* r = R + k * stride;
    T dmin = T(INFINITY), dmax = T(0);
    for (int j = 0; j < n; ++j) {
      const T d = fabs(r[j + j * ld]);
      dmin = fmin(dmin, d);
      dmax = fmax(dmax, d);
    }
    out[k] = dmax > T(0) ? dmin / dmax : T(0);
  }
}

}  // namespace

template <typename T>
void flag_nonfinite(cudaStream_t stream, const T* x, index_t n, int* flag) {
  if (n <= 0) return;
  flag_nonfinite_kernel<T><<<grid_for(n, 4096), kThreads, 0, stream>>>(x, n, flag);
  check_launch("flag_nonfinite_kernel");
}

template <typename T>
void first_nonfinite(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* x,
                     index_t ld, index_t stride, unsigned long long* first) {
  if (count <= 0 || rows <= 0 || cols <= 0) return;
  first_nonfinite_kernel<T>
      <<<dim3(grid_for(rows * cols, 4096), grid_y(count)), kThreads, 0, stream>>>(
          count, static_cast<int>(rows), static_cast<int>(cols), x, ld, stride, first);
  check_launch("first_nonfinite_kernel");
}

template <typename T>
void sum_squares(cudaStream_t stream, const T* x, index_t n, double* partials, double* out) {
  // The grid size depends on n only, so the summation order (and result) is reproducible.
  const unsigned blocks = grid_for(n, kSumPartials);
  sum_squares_partial_kernel<T><<<blocks, kThreads, 0, stream>>>(x, n > 0 ? n : 0, partials);
  check_launch("sum_squares_partial_kernel");
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(partials, static_cast<int>(blocks), out);
  check_launch("sum_partials_kernel");
}

template <typename T>
void identity_distance(cudaStream_t stream, index_t count, index_t n, const T* M, T* out) {
  if (count <= 0) return;
  identity_distance_kernel<T>
      <<<static_cast<unsigned>(count), kThreads, 0, stream>>>(static_cast<int>(n), M, out);
  check_launch("identity_distance_kernel");
}

template <typename T>
void residual_sums(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* Y,
                   const T* Z, index_t ldz, T* out) {
  if (count <= 0) return;
  residual_sums_kernel<T><<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
      static_cast<int>(rows), static_cast<int>(cols), Y, Z, ldz, out);
  check_launch("residual_sums_kernel");
}

template <typename T>
void column_sums(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* Y,
                 index_t k0, index_t total, T* out) {
  if (count <= 0) return;
  column_sums_kernel<T><<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
      static_cast<int>(rows), static_cast<int>(cols), Y, k0, total, out);
  check_launch("column_sums_kernel");
}

template <typename T>
void inner_products(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* X,
                    index_t ldx, index_t stride_x, const T* Y, index_t ldy, index_t stride_y,
                    double* out) {
  if (count <= 0) return;
  inner_products_kernel<T><<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
      static_cast<int>(rows), static_cast<int>(cols), X, ldx, stride_x, Y, ldy, stride_y, out);
  check_launch("inner_products_kernel");
}

template <typename T>
void diagonal_ratio(cudaStream_t stream, index_t count, index_t n, const T* R, index_t ld,
                    index_t stride, T* out) {
  if (count <= 0) return;
  diagonal_ratio_kernel<T>
      <<<grid_for(count), kThreads, 0, stream>>>(count, static_cast<int>(n), R, ld, stride, out);
  check_launch("diagonal_ratio_kernel");
}

#define DCALIGN_INSTANTIATE_REDUCTIONS(T)                                                      \
  template void flag_nonfinite<T>(cudaStream_t, const T*, index_t, int*);                      \
  template void first_nonfinite<T>(cudaStream_t, index_t, index_t, index_t, const T*, index_t, \
                                   index_t, unsigned long long*);                              \
  template void sum_squares<T>(cudaStream_t, const T*, index_t, double*, double*);             \
  template void identity_distance<T>(cudaStream_t, index_t, index_t, const T*, T*);            \
  template void residual_sums<T>(cudaStream_t, index_t, index_t, index_t, const T*, const T*,  \
                                 index_t, T*);                                                 \
  template void column_sums<T>(cudaStream_t, index_t, index_t, index_t, const T*, index_t,     \
                               index_t, T*);                                                   \
  template void inner_products<T>(cudaStream_t, index_t, index_t, index_t, const T*, index_t,  \
                                  index_t, const T*, index_t, index_t, double*);               \
  template void diagonal_ratio<T>(cudaStream_t, index_t, index_t, const T*, index_t, index_t, T*);
DCALIGN_INSTANTIATE_REDUCTIONS(float)
DCALIGN_INSTANTIATE_REDUCTIONS(double)

}  // namespace dcalign::cuda::kernels
