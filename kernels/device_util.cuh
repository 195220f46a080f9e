#pragma once
// Device helpers shared by the kernels: launch geometry, deterministic block sums, a tiled
// transpose walk. Only included by kernels/*.cu.
#include <cuda_runtime.h>

#include <cstdint>

namespace dcalign::cuda::kernels {

/// Threads per block of every kernel here (1-D blocks; 8 warps).
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
/// Tile edge of the shared-memory transposes (kThreads = kTile * kTileRows).
constexpr int kTile = 32;
constexpr int kTileRows = kThreads / kTile;

/// Blocks for a grid-stride loop over n items: enough to fill the GPU, at most `cap`.
inline unsigned grid_for(std::int64_t n, std::int64_t cap = 65535) {
  std::int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  if (b > cap) b = cap;
  return static_cast<unsigned>(b);
}
/// gridDim.y for a loop over matrices (the y dimension is limited to 65535).
inline unsigned grid_y(std::int64_t count) {
  return static_cast<unsigned>(count < 1 ? 1 : (count > 65535 ? 65535 : count));
}

/// Sum of v over the block, valid in thread 0. The order of the additions depends only on the
/// block size, so results are reproducible run to run. All threads must call it.
__device__ inline double block_sum(double v, double* shared /* kWarps */) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kWarps; ++w) total += shared[w];
  return total;
}

__device__ inline double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;  // valid in lane 0
}

/// Walks an n x n output in kTile x kTile tiles, calling f(i, j, s) for every (i, j) with
/// s = S(j, i), where S(r, c) = src[r + c * ld]: the transposed source is staged through shared
/// memory so that both the reads of S and the caller's accesses at (i, j) (consecutive i in
/// consecutive threads) are coalesced. All threads of the block must call it.
template <typename T, typename F>
__device__ void for_each_transposed(int n, const T* src, std::int64_t ld,
                                    T (*tile)[kTile + 1] /* shared, kTile rows */, F&& f) {
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  const int tiles = (n + kTile - 1) / kTile;
  for (int tj = 0; tj < tiles; ++tj)
    for (int ti = 0; ti < tiles; ++ti) {
      // tile[a][b] = S(tj*kTile + b, ti*kTile + a)
      for (int a = ty; a < kTile; a += kTileRows) {
        const int r = tj * kTile + tx, c = ti * kTile + a;
        if (r < n && c < n) tile[a][tx] = src[r + static_cast<std::int64_t>(c) * ld];
      }
      __syncthreads();
      for (int b = ty; b < kTile; b += kTileRows) {
        const int i = ti * kTile + tx, j = tj * kTile + b;
        if (i < n && j < n) f(i, j, tile[tx][b]);  // S(j, i)
      }
      __syncthreads();
    }
}

}  // namespace dcalign::cuda::kernels
