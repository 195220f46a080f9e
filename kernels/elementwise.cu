// Elementwise and copy kernels of the CUDA backend.
#include "cuda/check.hpp"
#include "kernels/device_util.cuh"
#include "kernels/kernels.cuh"

namespace dcalign::cuda::kernels {
namespace {

// The pointer arrays of cuBLAS's *Batched calls (getrf/getri/matinv/trsm); cuBLAS has no
// routine that builds them, and a host loop + copy would need a synchronisation.
__global__ void pointer_array_kernel(void** out, const char* base, index_t stride_bytes,
                                     index_t count) {
  for (index_t k = blockIdx.x * index_t(blockDim.x) + threadIdx.x; k < count;
       k += index_t(gridDim.x) * blockDim.x)
    out[k] = const_cast<char*>(base) + k * stride_bytes;
}

// Batched strided copy (vstack/unvstack, strided to contiguous): one launch where
// cudaMemcpy2DAsync would need one call per matrix. With S != D it converts the precision too.
template <typename S, typename D>
__global__ void copy_matrices_kernel(index_t count, int rows, int cols, const S* src,
                                     index_t src_ld, index_t src_stride, D* dst, index_t dst_ld,
                                     index_t dst_stride) {
  const int per = rows * cols;
  for (index_t k = blockIdx.y; k < count; k += gridDim.y)
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < per; e += gridDim.x * blockDim.x) {
      const int i = e % rows, j = e / rows;
      dst[k * dst_stride + i + j * dst_ld] = static_cast<D>(src[k * src_stride + i + j * src_ld]);
    }
}

// A stack in any element-strided layout (a DLPack tensor's, C order) into dcalign's
// column-major one; copy_matrices reads column-major sources only. Writes are coalesced, reads
// follow the source's strides.
template <typename T>
__global__ void gather_matrices_kernel(index_t count, index_t rows, index_t cols, const T* src,
                                       index_t sc, index_t si, index_t sj, T* dst, index_t dst_ld,
                                       index_t dst_stride) {
  const index_t per = rows * cols, total = count * per;
  for (index_t t = blockIdx.x * index_t(blockDim.x) + threadIdx.x; t < total;
       t += index_t(gridDim.x) * blockDim.x) {
    const index_t k = t / per, e = t % per, i = e % rows, j = e / rows;
    dst[k * dst_stride + i + j * dst_ld] = src[k * sc + i * si + j * sj];
  }
}

// Batched out-of-place transpose through shared-memory tiles; cublas<t>geam transposes one
// matrix per call.
template <typename T>
__global__ void transpose_kernel(index_t count, int rows, int cols, const T* src, index_t src_ld,
                                 index_t src_stride, T* dst, index_t dst_ld, index_t dst_stride) {
  __shared__ T tile[kTile][kTile + 1];
  const int tiles_r = (rows + kTile - 1) / kTile;
  const int r0 = (blockIdx.x % tiles_r) * kTile, c0 = (blockIdx.x / tiles_r) * kTile;
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  for (index_t k = blockIdx.y; k < count; k += gridDim.y) {
    const T* s = src + k * src_stride;
    T* d = dst + k * dst_stride;
    for (int a = ty; a < kTile; a += kTileRows) {  // tile[a][b] = src(r0 + b, c0 + a)
      const int r = r0 + tx, c = c0 + a;
      if (r < rows && c < cols) tile[a][tx] = s[r + c * src_ld];
    }
    __syncthreads();
    for (int b = ty; b < kTile; b += kTileRows) {  // dst(c0 + tx, r0 + b) = src(r0 + b, c0 + tx)
      const int i = c0 + tx, j = r0 + b;
      if (i < cols && j < rows) d[i + j * dst_ld] = tile[tx][b];
    }
    __syncthreads();
  }
}

// Fill with an arbitrary value (cudaMemsetAsync only sets bytes).
template <typename T>
__global__ void fill_kernel(T* dst, index_t n, T value) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n;
       i += index_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

// Diagonal update of every matrix of a batch; no BLAS routine touches only the diagonal.
template <typename T>
__global__ void add_identity_kernel(index_t count, index_t n, T* C, index_t ld, index_t stride,
                                    T alpha) {
  const index_t total = count * n;
  for (index_t t = blockIdx.x * index_t(blockDim.x) + threadIdx.x; t < total;
       t += index_t(gridDim.x) * blockDim.x) {
    const index_t k = t / n, i = t % n;
    C[k * stride + i + i * ld] += alpha;
  }
}

// R from geqrf's output (cuSOLVER leaves the Householder vectors below the diagonal).
template <typename T>
__global__ void upper_triangle_kernel(index_t count, int n, const T* A, index_t lda,
                                      index_t stride_a, T* R, index_t ldr, index_t stride_r) {
  const int per = n * n;
  for (index_t k = blockIdx.y; k < count; k += gridDim.y)
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < per; e += gridDim.x * blockDim.x) {
      const int i = e % n, j = e / n;
      R[k * stride_r + i + j * ldr] = i <= j ? A[k * stride_a + i + j * lda] : T(0);
    }
}

// S^{-1} applied to the rows of U^T Z in the SVD least-squares solve (a diagonal scaling,
// with the minimum-norm convention s = 0 -> 0 of the CPU backend).
template <typename T>
__global__ void scale_rows_by_inverse_kernel(index_t count, int rows, int cols, T* X, index_t ld,
                                             index_t stride, const T* s) {
  const int per = rows * cols;
  for (index_t k = blockIdx.y; k < count; k += gridDim.y)
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < per; e += gridDim.x * blockDim.x) {
      const int i = e % rows, j = e / rows;
      const T si = s[k * rows + i];
      const T inv = si > T(0) ? T(1) / si : T(0);
      X[k * stride + i + j * ld] *= inv;
    }
}

}  // namespace

cudaError_t probe_kernel_image(int device) {
  int previous = 0;
  cudaError_t status = cudaGetDevice(&previous);
  if (status == cudaSuccess) status = cudaSetDevice(device);
  if (status == cudaSuccess) {
    cudaFuncAttributes attributes{};
    status = cudaFuncGetAttributes(&attributes, pointer_array_kernel);
    const cudaError_t restored = cudaSetDevice(previous);
    if (status == cudaSuccess) status = restored;
  }
  if (status != cudaSuccess) (void)cudaGetLastError();
  return status;
}

void pointer_array(cudaStream_t stream, void** out, const void* base, index_t stride_bytes,
                   index_t count) {
  if (count <= 0) return;
  pointer_array_kernel<<<grid_for(count), kThreads, 0, stream>>>(
      out, static_cast<const char*>(base), stride_bytes, count);
  check_launch("pointer_array_kernel");
}

template <typename T>
void copy_matrices(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* src,
                   index_t src_ld, index_t src_stride, T* dst, index_t dst_ld, index_t dst_stride) {
  if (count <= 0 || rows <= 0 || cols <= 0) return;
  const index_t per = rows * cols;
  copy_matrices_kernel<T, T><<<dim3(grid_for(per, 4096), grid_y(count)), kThreads, 0, stream>>>(
      count, static_cast<int>(rows), static_cast<int>(cols), src, src_ld, src_stride, dst, dst_ld,
      dst_stride);
  check_launch("copy_matrices_kernel");
}

template <typename T>
void gather_matrices(cudaStream_t stream, index_t count, index_t rows, index_t cols, const T* src,
                     index_t sc, index_t si, index_t sj, T* dst, index_t dst_ld,
                     index_t dst_stride) {
  if (count <= 0 || rows <= 0 || cols <= 0) return;
  gather_matrices_kernel<T><<<grid_for(count * rows * cols, 4096), kThreads, 0, stream>>>(
      count, rows, cols, src, sc, si, sj, dst, dst_ld, dst_stride);
  check_launch("gather_matrices_kernel");
}

template <typename S, typename D>
void convert_matrix(cudaStream_t stream, index_t rows, index_t cols, const S* src, index_t src_ld,
                    D* dst, index_t dst_ld) {
  if (rows <= 0 || cols <= 0) return;
  copy_matrices_kernel<S, D><<<dim3(grid_for(rows * cols, 4096), 1), kThreads, 0, stream>>>(
      1, static_cast<int>(rows), static_cast<int>(cols), src, src_ld, 0, dst, dst_ld, 0);
  check_launch("copy_matrices_kernel (conversion)");
}
template void convert_matrix<float, double>(cudaStream_t, index_t, index_t, const float*, index_t,
                                            double*, index_t);
template void convert_matrix<double, float>(cudaStream_t, index_t, index_t, const double*, index_t,
                                            float*, index_t);

template <typename T>
void transpose_matrices(cudaStream_t stream, index_t count, index_t rows, index_t cols,
                        const T* src, index_t src_ld, index_t src_stride, T* dst, index_t dst_ld,
                        index_t dst_stride) {
  if (count <= 0 || rows <= 0 || cols <= 0) return;
  const index_t tiles = ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  transpose_kernel<T><<<dim3(static_cast<unsigned>(tiles), grid_y(count)), kThreads, 0, stream>>>(
      count, static_cast<int>(rows), static_cast<int>(cols), src, src_ld, src_stride, dst, dst_ld,
      dst_stride);
  check_launch("transpose_kernel");
}

template <typename T>
void fill(cudaStream_t stream, T* dst, index_t n, T value) {
  if (n <= 0) return;
  fill_kernel<T><<<grid_for(n, 8192), kThreads, 0, stream>>>(dst, n, value);
  check_launch("fill_kernel");
}

template <typename T>
void add_identity(cudaStream_t stream, index_t count, index_t n, T* C, index_t ld, index_t stride,
                  T alpha) {
  if (count <= 0 || n <= 0) return;
  add_identity_kernel<T>
      <<<grid_for(count * n, 8192), kThreads, 0, stream>>>(count, n, C, ld, stride, alpha);
  check_launch("add_identity_kernel");
}

template <typename T>
void upper_triangle(cudaStream_t stream, index_t count, index_t n, const T* A, index_t lda,
                    index_t stride_a, T* R, index_t ldr, index_t stride_r) {
  if (count <= 0 || n <= 0) return;
  upper_triangle_kernel<T><<<dim3(grid_for(n * n, 4096), grid_y(count)), kThreads, 0, stream>>>(
      count, static_cast<int>(n), A, lda, stride_a, R, ldr, stride_r);
  check_launch("upper_triangle_kernel");
}

template <typename T>
void scale_rows_by_inverse(cudaStream_t stream, index_t count, index_t rows, index_t cols, T* X,
                           index_t ld, index_t stride, const T* s) {
  if (count <= 0 || rows <= 0 || cols <= 0) return;
  scale_rows_by_inverse_kernel<T>
      <<<dim3(grid_for(rows * cols, 4096), grid_y(count)), kThreads, 0, stream>>>(
          count, static_cast<int>(rows), static_cast<int>(cols), X, ld, stride, s);
  check_launch("scale_rows_by_inverse_kernel");
}

#define DCALIGN_INSTANTIATE_ELEMENTWISE(T)                                                        \
  template void copy_matrices<T>(cudaStream_t, index_t, index_t, index_t, const T*, index_t,      \
                                 index_t, T*, index_t, index_t);                                  \
  template void transpose_matrices<T>(cudaStream_t, index_t, index_t, index_t, const T*, index_t, \
                                      index_t, T*, index_t, index_t);                             \
  template void gather_matrices<T>(cudaStream_t, index_t, index_t, index_t, const T*, index_t,    \
                                   index_t, index_t, T*, index_t, index_t);                       \
  template void fill<T>(cudaStream_t, T*, index_t, T);                                            \
  template void add_identity<T>(cudaStream_t, index_t, index_t, T*, index_t, index_t, T);         \
  template void upper_triangle<T>(cudaStream_t, index_t, index_t, const T*, index_t, index_t, T*, \
                                  index_t, index_t);                                              \
  template void scale_rows_by_inverse<T>(cudaStream_t, index_t, index_t, index_t, T*, index_t,    \
                                         index_t, const T*);
DCALIGN_INSTANTIATE_ELEMENTWISE(float)
DCALIGN_INSTANTIATE_ELEMENTWISE(double)

}  // namespace dcalign::cuda::kernels
