// The whole polar iteration in one kernel: one thread block per matrix runs base/polar_block.hpp's
// newton_phase with X and its inverse in shared memory and, when asked for, the Newton-Schulz
// polish (schulz_phase) into G, so a batch takes one launch instead of one batched LU, one
// inverse, one step kernel and one host synchronisation per Newton step plus two batched
// products per polish step. (Why own code: no cuBLAS/cuSOLVER routine runs a per-matrix
// iteration with per-matrix stopping.) The decisions are polar_scalar.hpp's, as in every
// backend; the CPU tests run newton_phase and schulz_phase through polar::SerialBlock.
#include "base/polar_block.hpp"
#include "cuda/check.hpp"
#include "kernels/device_util.cuh"
#include "kernels/kernels.cuh"

namespace dcalign::cuda::kernels {
namespace {

/// The thread block as polar_block.hpp's Block: kThreads threads, reductions through `red`
/// (shared, kThreads doubles and kThreads ints) in an order fixed by the block size, so that
/// every run gives the same values.
struct CudaBlock {
  double* red;
  int* redi;

  template <typename F>
  __device__ void for_each(int n, F f) {
    for (int i = threadIdx.x; i < n; i += kThreads) f(i);
  }
  /// One row per thread: thread t takes row t % rows and the columns t / rows + m * groups of
  /// it (groups = kThreads / rows whole row sets; the few threads past them idle), so the
  /// innermost loops of the inverse and the polish carry no integer division, and a warp's
  /// lanes touch consecutive entries of a column (no bank conflicts). Rows beyond the block
  /// size fall back to the flat loop.
  template <typename F>
  __device__ void for_each_2d(int rows, int cols, F f) {
    if (rows > kThreads) {
      for (int e = threadIdx.x; e < rows * cols; e += kThreads) f(e % rows, e / rows);
      return;
    }
    const int groups = kThreads / rows, i = threadIdx.x % rows;
    for (int j = threadIdx.x / rows; j < cols && threadIdx.x < groups * rows; j += groups) f(i, j);
  }
  __device__ void sync() { __syncthreads(); }
  template <typename F>
  __device__ double sum(int n, F f) {
    double s = 0;
    for (int i = threadIdx.x; i < n; i += kThreads) s += f(i);
    return all_sum(s, 0);
  }
  template <typename F>
  __device__ void sum2(int n, F f, double& a, double& b) {
    double s1 = 0, s2 = 0;
    for (int i = threadIdx.x; i < n; i += kThreads) f(i, s1, s2);
    a = all_sum(s1, 0);
    b = all_sum(s2, 1);
  }
  /// The first index of the largest value: the pair (value, index) reduced by "larger value,
  /// then smaller index", an associative and commutative rule, so the result does not depend
  /// on the order: within each warp by shuffles, then over the kWarps warp results by every
  /// thread in the same order. Three barriers (the tree over shared memory it replaces took
  /// eleven, in each of the n pivot steps of every inverse).
  template <typename F>
  __device__ int argmax(int n, F f) {
    double top = -1;
    int best = 0x7fffffff;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const double v = f(i);
      if (v > top) {  // strided ascending i: the first of equal values; a NaN never enters
        top = v;
        best = i;
      }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const double v = __shfl_down_sync(0xffffffffu, top, offset);
      const int j = __shfl_down_sync(0xffffffffu, best, offset);
      if (v > top || (v == top && j < best)) {
        top = v;
        best = j;
      }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // red may still be read by the previous reduction
    if (lane == 0) {
      red[warp] = top;
      redi[warp] = best;
    }
    __syncthreads();
    double t = red[0];
    int w = redi[0];
    for (int k = 1; k < kWarps; ++k)
      if (red[k] > t || (red[k] == t && redi[k] < w)) {
        t = red[k];
        w = redi[k];
      }
    __syncthreads();  // every reduction ends with the block synchronised (polar_block.hpp)
    return w == 0x7fffffff ? 0 : w;  // all NaN: row k, as SerialBlock
  }
  __device__ bool leader() const { return threadIdx.x == 0; }

  /// The block's sum of v, on every thread; `slot` (0 or 1) keeps two sums of one call apart.
  __device__ double all_sum(double v, int slot) {
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    double* part = red + slot * kWarps;
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    double total = 0;
    for (int w = 0; w < kWarps; ++w) total += part[w];  // every thread, the same order
    __syncthreads();
    return total;
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    polar_newton_fused_kernel(int n, T* X, T* state, int max_steps, double tolerance, int* active,
                              T* G) {
  extern __shared__ double shared_raw[];  // double: aligned for T and for the reductions
  double* red = shared_raw;
  int* redi = reinterpret_cast<int*>(red + kThreads);
  T* x = reinterpret_cast<T*>(redi + kThreads);
  T* y = x + n * n;
  T* column = y + n * n;
  int* swaps = reinterpret_cast<int*>(column + n);
  const std::int64_t k = blockIdx.x;
  const std::int64_t per = static_cast<std::int64_t>(n) * n;
  T* xg = X + k * per;
  T* st = state + k * polar::kStateSize;
  for (int e = threadIdx.x; e < per; e += kThreads) x[e] = xg[e];
  CudaBlock b{red, redi};
  const bool still = polar::newton_phase(b, x, y, st, n, max_steps, tolerance, column, swaps);
  if (G) {
    // The polish in the same block, from X still in shared memory, its own count of steps
    // (newton_phase left the state written and the block synchronised); the factor goes to G,
    // X is not written back.
    polar::schulz_phase(b, x, y, G + k * per, n, polar::polish_steps(st));
  } else {
    for (int e = threadIdx.x; e < per; e += kThreads) xg[e] = x[e];
  }
  if (threadIdx.x == 0 && still && active) atomicAdd(active, 1);
}

}  // namespace

template <typename T>
std::size_t polar_fused_shared_bytes(index_t n) {
  // reductions, X, Y, the column of multipliers, the row swaps (rounded up to 8 bytes)
  const std::size_t swaps = (sizeof(int) * static_cast<std::size_t>(n) + 7) / 8 * 8;
  return sizeof(double) * kThreads + sizeof(int) * kThreads +
         sizeof(T) * static_cast<std::size_t>(2 * n * n + n) + swaps;
}

template <typename T>
cudaError_t polar_newton_fused(cudaStream_t stream, index_t count, index_t n, T* X, T* state,
                               int max_steps, double tolerance, int* active, T* G) {
  if (count <= 0 || n <= 0) return cudaSuccess;
  const std::size_t bytes = polar_fused_shared_bytes<T>(n);
  const cudaError_t set =
      cudaFuncSetAttribute(polar_newton_fused_kernel<T>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (set != cudaSuccess) {
    cudaGetLastError();  // the caller falls back; clear the sticky-free error
    return set;
  }
  polar_newton_fused_kernel<T><<<static_cast<unsigned>(count), kThreads, bytes, stream>>>(
      static_cast<int>(n), X, state, max_steps, tolerance, active, G);
  check_launch("polar_newton_fused_kernel");
  return cudaSuccess;
}

#define DCALIGN_INSTANTIATE_POLAR_FUSED(T)                                                        \
  template std::size_t polar_fused_shared_bytes<T>(index_t);                                      \
  template cudaError_t polar_newton_fused<T>(cudaStream_t, index_t, index_t, T*, T*, int, double, \
                                             int*, T*);
DCALIGN_INSTANTIATE_POLAR_FUSED(float)
DCALIGN_INSTANTIATE_POLAR_FUSED(double)

}  // namespace dcalign::cuda::kernels
