// The per-matrix steps of the batched polar iteration (src/core/polar.cpp). No library call
// fits: each fuses norms, the scalar decisions of base/polar_scalar.hpp (run by thread 0 on the
// device, exactly as the CPU backend runs them) and an elementwise update, one block per matrix.
#include "base/polar_scalar.hpp"
#include "cuda/check.hpp"
#include "kernels/device_util.cuh"
#include "kernels/kernels.cuh"

namespace dcalign::cuda::kernels {
namespace {

// X_k = M_k / ||M_k||_F (or M_k^T / ||M_k||_F) and state_k = polar::start(...).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    polar_start_kernel(int n, const T* M, index_t ld, index_t stride, bool transposed, T* X,
                       T* state, double stop_below) {
  __shared__ double shared[kWarps];
  __shared__ T factor_shared;
  __shared__ T tile[kTile][kTile + 1];
  const index_t k = blockIdx.x;
  const T* m = M + k * stride;
  T* x = X + k * n * n;
  const int per = n * n;
  double s = 0.0;
  for (int e = threadIdx.x; e < per; e += blockDim.x) {
    const int i = e % n, j = e / n;
    const double v = static_cast<double>(m[i + j * ld]);
    s += v * v;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) factor_shared = polar::start(state + k * polar::kStateSize, s, stop_below);
  __syncthreads();
  const T factor = factor_shared;
  if (!transposed) {
    for (int e = threadIdx.x; e < per; e += blockDim.x) {
      const int i = e % n, j = e / n;
      x[e] = factor * m[i + j * ld];
    }
  } else {
    for_each_transposed(n, m, ld, tile, [&](int i, int j, T mji) {
      x[i + static_cast<index_t>(j) * n] = factor * mji;
    });
  }
}

// Zero pivots reported by the batched LU/inverse, for the matrices still iterating.
template <typename T>
__global__ void polar_mark_singular_kernel(index_t count, const int* info, T* state) {
  for (index_t k = blockIdx.x * index_t(blockDim.x) + threadIdx.x; k < count;
       k += index_t(gridDim.x) * blockDim.x) {
    T* st = state + k * polar::kStateSize;
    if (info[k] > 0 && polar::active(st)) polar::mark_singular(st);
  }
}

// One scaled Newton step X <- (zeta X + Y^T / zeta) / 2 with zeta from ||X||_F and ||Y||_F,
// fused with ||X_new - X||_F^2 and ||X_new||_F^2; Y^T is read through shared-memory tiles.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    polar_newton_step_kernel(int n, T* X, const T* Y, T* state, int iteration, double tolerance,
                             int* active) {
  __shared__ double shared[kWarps];
  __shared__ T zeta_shared;
  __shared__ int run_shared;
  __shared__ T tile[kTile][kTile + 1];
  const index_t k = blockIdx.x;
  T* st = state + k * polar::kStateSize;
  if (threadIdx.x == 0) run_shared = polar::active(st) ? 1 : 0;
  __syncthreads();
  if (!run_shared) return;  // uniform over the block
  const index_t per = static_cast<index_t>(n) * n;
  T* x = X + k * per;
  const T* y = Y + k * per;
  double fx = 0.0, fy = 0.0;
  for (index_t e = threadIdx.x; e < per; e += blockDim.x) {
    const double a = static_cast<double>(x[e]), b = static_cast<double>(y[e]);
    fx += a * a;
    fy += b * b;
  }
  fx = block_sum(fx, shared);
  fy = block_sum(fy, shared);
  if (threadIdx.x == 0) zeta_shared = polar::newton_zeta(st, fx, fy, iteration);
  __syncthreads();
  const T zeta = zeta_shared;
  if (!(zeta > T(0))) {  // newton_zeta stopped this matrix; uniform over the block
    // The count is of the matrices active afterwards, whatever stopped them (the contract of
    // Primitives::polar_newton_step); newton_zeta flags every matrix it returns 0 for.
    if (threadIdx.x == 0 && polar::active(st)) atomicAdd(active, 1);
    return;
  }
  // The CPU backend's arithmetic: X_new = a X + b Y^T with a = zeta / 2, b = 1 / (2 zeta).
  const T a = zeta / T(2), b = T(1) / (T(2) * zeta);
  double dx = 0.0, xn = 0.0;
  for_each_transposed(n, y, n, tile, [&](int i, int j, T yji) {
    const index_t e = i + static_cast<index_t>(j) * n;
    const T old = x[e];
    const T updated = a * old + b * yji;
    x[e] = updated;
    const double d = static_cast<double>(updated) - static_cast<double>(old);
    dx += d * d;
    xn += static_cast<double>(updated) * static_cast<double>(updated);
  });
  dx = block_sum(dx, shared);
  xn = block_sum(xn, shared);
  if (threadIdx.x == 0) {
    polar::newton_after(st, dx, xn, tolerance, n);
    if (polar::active(st)) atomicAdd(active, 1);
  }
}

}  // namespace

template <typename T>
void polar_start(cudaStream_t stream, index_t count, index_t n, const T* M, index_t ld,
                 index_t stride, bool transposed, T* X, T* state, double stop_below) {
  if (count <= 0 || n <= 0) return;
  polar_start_kernel<T><<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
      static_cast<int>(n), M, ld, stride, transposed, X, state, stop_below);
  check_launch("polar_start_kernel");
}

template <typename T>
void polar_mark_singular(cudaStream_t stream, index_t count, const int* info, T* state) {
  if (count <= 0) return;
  polar_mark_singular_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(count, info, state);
  check_launch("polar_mark_singular_kernel");
}

template <typename T>
void polar_newton_step(cudaStream_t stream, index_t count, index_t n, T* X, const T* Y, T* state,
                       int iteration, double tolerance, int* active) {
  if (count <= 0 || n <= 0) return;
  polar_newton_step_kernel<T><<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
      static_cast<int>(n), X, Y, state, iteration, tolerance, active);
  check_launch("polar_newton_step_kernel");
}

#define DCALIGN_INSTANTIATE_POLAR(T)                                                             \
  template void polar_start<T>(cudaStream_t, index_t, index_t, const T*, index_t, index_t, bool, \
                               T*, T*, double);                                                  \
  template void polar_mark_singular<T>(cudaStream_t, index_t, const int*, T*);                   \
  template void polar_newton_step<T>(cudaStream_t, index_t, index_t, T*, const T*, T*, int,      \
                                     double, int*);
DCALIGN_INSTANTIATE_POLAR(float)
DCALIGN_INSTANTIATE_POLAR(double)

}  // namespace dcalign::cuda::kernels
