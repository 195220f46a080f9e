#pragma once
// What a CUDA backend owns: the device, its stream, the cuBLAS and cuSOLVER handles bound to
// that stream, grow-only workspaces and cached pointer arrays. One Context serves both
// precisions (Primitives<float> and Primitives<double> of one backend).
//
// Streams and memory. All work of a backend is queued on one stream: by default ONE
// non-blocking stream per device and process (shared_stream(d), created on first use, never
// destroyed), or a stream the caller hands in (BackendOptions::cuda_stream, adopted: never
// destroyed, never synchronised beyond itself). Memory comes from the device's default
// stream-ordered pool (cudaMallocAsync), whose release threshold is raised to UINT64_MAX so that
// freed memory stays cached: allocate() neither synchronises nor calls into the driver's
// allocator once the pool is warm. A Buffer is freed with cudaFreeAsync on the stream it was
// allocated on (the deleter's context), so the free is ordered after every kernel that used
// the memory, whichever backend object queued them and even when that backend is already
// destroyed; an adopted stream must therefore outlive the buffers as well as the backend.
//
// A backend object is not thread-safe (like a cuBLAS handle): one host thread at a time.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "dcalign/backend.hpp"

namespace dcalign::cuda {

/// Highest device ordinal + 1 that the backend supports.
constexpr int kMaxDevices = 64;

/// The process-wide stream of `device` (created on first use, with the memory pool set up).
cudaStream_t shared_stream(int device);
/// Buffer deleter: cudaFreeAsync(p, stream), the stream passed as the Buffer's context.
void free_on_stream(void* p, void* stream);

/// Converts a size for a 32-bit cuBLAS/cuSOLVER argument; throws InvalidInput when it does not
/// fit.
int to_int(index_t v, const char* what);

class Context {
 public:
  /// Grow-only device workspaces. A pointer from workspace(s, ...) stays valid until the next
  /// workspace(s, ...) call with the same slot; every primitive asks each slot at most once
  /// and carves its pieces out of it (Layout).
  enum Slot { kSolver = 0, kScratch = 1, kResults = 2, kSlots = 3 };
  /// Pointer-array slots for the cuBLAS batched calls that take arrays of matrix pointers.
  enum PointerSlot { kPtrA = 0, kPtrB = 1, kPointerSlots = 2 };

  Context(int device, const BackendOptions& opts);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// Makes this context's device current (cheap when it already is).
  void activate() const;
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  cusolverDnHandle_t solver() const { return solver_; }
  gesvdjInfo_t gesvdj() const { return gesvdj_; }
  bool tf32() const { return tf32_; }
  /// BackendOptions::cuda_inverse_per_matrix_from (0: never).
  index_t inverse_per_matrix_from() const { return inverse_per_matrix_from_; }

  void* workspace(Slot slot, std::size_t bytes);
  /// Device array of `count` pointers base + k*stride (element stride), rebuilt by a small
  /// kernel only when (base, stride, count) differ from the slot's last request.
  void** pointer_array(PointerSlot slot, const void* base, index_t stride_bytes, index_t count);
  template <typename T>
  T** pointers(PointerSlot slot, const T* base, index_t stride, index_t count) {
    return reinterpret_cast<T**>(pointer_array(slot, base, stride * index_t(sizeof(T)), count));
  }
  /// Waits for the stream (after which host copies of device results may be read).
  void sync() const;

  /// Whether uploads from pageable host memory are staged (BackendOptions::staged_upload).
  bool staged_upload() const { return staged_; }
  /// Copies `bytes` from host memory (pageable) to device memory `dst` through the two
  /// page-locked staging buffers (allocated on first use, kStagingChunk bytes each), in stream
  /// order. Returns when `host` is no longer read; the last transfers may still be running.
  void upload_staged(const void* host, void* dst, std::size_t bytes);
  static constexpr std::size_t kStagingChunk = std::size_t(16) << 20;
  static constexpr int kStagingBuffers = 2;

  std::string description() const;

 private:
  struct Area {
    void* ptr = nullptr;
    std::size_t bytes = 0;
  };
  struct PointerCache {
    void** ptr = nullptr;
    index_t capacity = 0;
    const void* base = nullptr;
    index_t stride = -1, count = -1;
  };
  int device_;
  bool tf32_;
  index_t inverse_per_matrix_from_ = 0;
  bool staged_;
  std::array<void*, kStagingBuffers> staging_{};            ///< page-locked, cudaHostAlloc
  std::array<cudaEvent_t, kStagingBuffers> staged_done_{};  ///< the last transfer from each
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  gesvdjInfo_t gesvdj_ = nullptr;
  std::array<Area, kSlots> areas_{};
  std::array<PointerCache, kPointerSlots> pointer_cache_{};
};

/// Offsets of the pieces of one workspace request, each aligned to 256 bytes.
class Layout {
 public:
  template <typename U>
  std::size_t add(index_t n) {
    const std::size_t offset = (bytes_ + 255) / 256 * 256;
    bytes_ = offset + static_cast<std::size_t>(n > 0 ? n : 0) * sizeof(U);
    return offset;
  }
  std::size_t bytes() const { return bytes_ > 0 ? bytes_ : 1; }
  template <typename U>
  static U* at(void* base, std::size_t offset) {
    return reinterpret_cast<U*>(static_cast<char*>(base) + offset);
  }

 private:
  std::size_t bytes_ = 0;
};

}  // namespace dcalign::cuda
