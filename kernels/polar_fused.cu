// The whole polar iteration in one kernel: one thread block per matrix runs base/polar_block.hpp's
// newton_phase with X and its inverse in shared memory and, when asked for, the Newton-Schulz
// polish (schulz_phase) into G, so a batch takes one launch instead of one batched LU, one
// inverse, one step kernel and one host synchronisation per Newton step plus two batched
// products per polish step. (Why own code: no cuBLAS/cuSOLVER routine runs a per-matrix
// iteration with per-matrix stopping.) The decisions are polar_scalar.hpp's, as in every
// backend; the CPU tests run newton_phase and schulz_phase through polar::SerialBlock, and on
// std::threads under ThreadSanitizer (tests/base/test_polar_block_threads.cpp).
#include "base/polar_block.hpp"
#include "cuda/check.hpp"
#include "kernels/device_util.cuh"
#include "kernels/kernels.cuh"

namespace dcalign::cuda::kernels {
namespace {

/// Doubles of the reductions' shared workspace: two rounds (alternating) of two sums per warp.
constexpr int kReduceSlots = 4 * kWarps;

/// The thread block as polar_block.hpp's Block: kThreads threads. Reductions go through `red`
/// (shared, kReduceSlots doubles) in an order fixed by the block size, so that every run gives
/// the same values; argmax is each warp's own.
struct CudaBlock {
  double* red;
  int round = 0;  // the same on every thread: all of them run the same reductions

  template <typename F>
  __device__ void for_each(int n, F f) {
    for (int i = threadIdx.x; i < n; i += kThreads) f(i);
  }
  /// One row per thread (polar::split_2d): no integer division in the innermost loops of the
  /// inverse and the polish, and a warp's lanes touch consecutive entries of a column (no bank
  /// conflicts).
  template <typename F>
  __device__ void for_each_2d(int rows, int cols, F f) {
    polar::split_2d(static_cast<int>(threadIdx.x), kThreads, rows, cols, f);
  }
  __device__ void sync() { __syncthreads(); }
  template <typename F>
  __device__ double sum(int n, F f) {
    double a = 0, b = 0;
    sum2(
        n, [&](int i, double& s1, double&) { s1 += f(i); }, a, b);
    return a;
  }
  /// Both sums in one barrier: each warp's partial sums go to this round's half of `red`, and
  /// every thread adds the kWarps partials in the same order after the barrier. Rounds
  /// alternate halves: a thread can only write a half again two reductions later, past the
  /// next reduction's barrier, which every reader of this round's partials has passed.
  template <typename F>
  __device__ void sum2(int n, F f, double& a, double& b) {
    double s1 = 0, s2 = 0;
    for (int i = threadIdx.x; i < n; i += kThreads) f(i, s1, s2);
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    double* part = red + (round & 1) * 2 * kWarps;
    ++round;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
      part[warp] = s1;
      part[kWarps + warp] = s2;
    }
    __syncthreads();
    a = 0;
    b = 0;
    for (int w = 0; w < kWarps; ++w) {  // every thread, the same order
      a += part[w];
      b += part[kWarps + w];
    }
  }
  /// The first index of the largest value, found by every warp on its own: the lanes scan the
  /// n values strided, then the pairs (value, index) meet in a butterfly of shuffles under the
  /// rule "larger value, then smaller index", which is associative and commutative, so every
  /// lane of every warp ends with the same pair whatever the order. No barrier and no shared
  /// workspace (the shared-memory version took three barriers in each of the n pivot steps of
  /// every inverse).
  template <typename F>
  __device__ int argmax(int n, F f) {
    double top = -1;
    int best = 0x7fffffff;
    for (int i = threadIdx.x & 31; i < n; i += 32) {
      const double v = f(i);
      if (v > top) {  // strided ascending i: the first of equal values; a NaN never enters
        top = v;
        best = i;
      }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const double v = __shfl_xor_sync(0xffffffffu, top, offset);
      const int j = __shfl_xor_sync(0xffffffffu, best, offset);
      if (v > top || (v == top && j < best)) {
        top = v;
        best = j;
      }
    }
    return best == 0x7fffffff ? 0 : best;  // all NaN: row k, as SerialBlock
  }
  __device__ bool leader() const { return threadIdx.x == 0; }
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    polar_newton_fused_kernel(int n, T* X, T* state, int max_steps, double tolerance, int* active,
                              T* G) {
  extern __shared__ double shared_raw[];  // double: aligned for T and for the reductions
  double* red = shared_raw;
  T* x = reinterpret_cast<T*>(red + kReduceSlots);
  T* y = x + n * n;
  T* column = y + n * n;
  int* swaps = reinterpret_cast<int*>(column + n);
  const std::int64_t k = blockIdx.x;
  const std::int64_t per = static_cast<std::int64_t>(n) * n;
  T* xg = X + k * per;
  T* st = state + k * polar::kStateSize;
  for (int e = threadIdx.x; e < per; e += kThreads) x[e] = xg[e];
  CudaBlock b{red};
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
  return sizeof(double) * kReduceSlots + sizeof(T) * static_cast<std::size_t>(2 * n * n + n) +
         swaps;
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
