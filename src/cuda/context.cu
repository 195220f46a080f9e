// Device context: shared per-device stream and memory pool, library handles, workspaces.
#include <cstdint>
#include <limits>
#include <mutex>
#include <sstream>
#include <utility>

#include "base/staged_copy.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "kernels/kernels.cuh"

namespace dcalign::cuda {
namespace {

struct StreamRegistry {
  std::mutex mutex;
  std::array<cudaStream_t, kMaxDevices> streams{};
};

StreamRegistry& registry() {
  // Leaked on purpose: buffers freed during static destruction are still freed on these
  // streams, and destroying streams after the CUDA runtime has shut down is not allowed.
  static StreamRegistry* r = new StreamRegistry();
  return *r;
}

}  // namespace

cudaStream_t shared_stream(int device) {
  if (device < 0 || device >= kMaxDevices)
    throw BackendError("CUDA device ordinal " + std::to_string(device) +
                       " outside the supported range 0.." + std::to_string(kMaxDevices - 1));
  StreamRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  cudaStream_t& s = r.streams[static_cast<size_t>(device)];
  if (s) return s;
  // Keep freed pool memory cached instead of returning it to the driver at every
  // synchronisation, so that allocate() stays cheap (dcalign allocates per call).
  cudaMemPool_t pool = nullptr;
  DCALIGN_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
  std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
  DCALIGN_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  cudaStream_t created = nullptr;
  DCALIGN_CUDA(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
  s = created;
  return s;
}

void free_on_stream(void* p, void* stream) {
  // Called from Buffer's destructor: must not throw. A failure here (e.g. during process exit,
  // after the runtime unloaded) leaves nothing to clean up that the driver will not reclaim.
  if (cudaFreeAsync(p, static_cast<cudaStream_t>(stream)) != cudaSuccess) (void)cudaGetLastError();
}

int to_int(index_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw InvalidInput(std::string(what) + " = " + std::to_string(v) +
                       " exceeds the 32-bit range of the cuBLAS/cuSOLVER interface");
  return static_cast<int>(v);
}

Context::Context(int device, const BackendOptions& opts)
    : device_(device),
      tf32_(opts.allow_tf32),
      inverse_per_matrix_from_(opts.cuda_inverse_per_matrix_from),
      staged_(opts.staged_upload) {
  // cuda_inverse_per_matrix_from: cuBLAS's getrfBatched + getriBatched ran at about 1 TFLOP/s on
  // 50 matrices of order 950 (H200), where cuSOLVER's blocked getrf + getrs on one matrix after
  // another should be faster; the default stays 0 (never) until a GPU run measures the crossing
  // (bench/gpu_probe's inverse case times both; gpu_bench --inverse-per-matrix-from runs whole
  // alignments with it). Orders up to 32 keep cuBLAS's one-kernel matinvBatched.
  if (opts.cuda_inverse_per_matrix_from < 0)
    throw InvalidInput("BackendOptions::cuda_inverse_per_matrix_from is " +
                       std::to_string(opts.cuda_inverse_per_matrix_from) +
                       "; expected 0 (never) or a matrix order");
  DCALIGN_CUDA(cudaSetDevice(device_));
  stream_ = shared_stream(device_);  // also sets up the device's memory pool
  if (opts.cuda_stream) {
    cudaStream_t adopted = static_cast<cudaStream_t>(opts.cuda_stream);
#if CUDART_VERSION >= 12080
    // Refuse a stream of another device before anything is queued on it (the special handles
    // cudaStreamLegacy and cudaStreamPerThread name the current device's, set above).
    int stream_device = device_;
    if (adopted != cudaStreamLegacy && adopted != cudaStreamPerThread)
      DCALIGN_CUDA(cudaStreamGetDevice(adopted, &stream_device));
    if (stream_device != device_)
      throw InvalidInput("BackendOptions::cuda_stream belongs to CUDA device " +
                         std::to_string(stream_device) + " but device_id is " +
                         std::to_string(device_) + "; expected a stream of the backend's device");
#endif
    stream_ = adopted;
  }
  try {
    DCALIGN_CUDA(cublasCreate(&blas_));
    DCALIGN_CUDA(cublasSetStream(blas_, stream_));
    // TF32 tensor cores round float inputs to 10 mantissa bits; only when asked for.
    DCALIGN_CUDA(
        cublasSetMathMode(blas_, tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    DCALIGN_CUDA(cusolverDnCreate(&solver_));
    DCALIGN_CUDA(cusolverDnSetStream(solver_, stream_));
    DCALIGN_CUDA(cusolverDnCreateGesvdjInfo(&gesvdj_));
  } catch (...) {
    if (gesvdj_) cusolverDnDestroyGesvdjInfo(gesvdj_);
    if (solver_) cusolverDnDestroy(solver_);
    if (blas_) cublasDestroy(blas_);
    throw;
  }
}

Context::~Context() {
  // No throwing here: release what can be released, ignore failures (the process may be
  // shutting down, or the device may be in an error state already).
  cudaSetDevice(device_);
  // Transfers from the staging buffers may still be running.
  if (staging_[0]) cudaStreamSynchronize(stream_);
  for (void* h : staging_)
    if (h) cudaFreeHost(h);
  for (cudaEvent_t e : staged_done_)
    if (e) cudaEventDestroy(e);
  for (Area& a : areas_)
    if (a.ptr) cudaFreeAsync(a.ptr, stream_);
  for (PointerCache& c : pointer_cache_)
    if (c.ptr) cudaFreeAsync(c.ptr, stream_);
  if (gesvdj_) cusolverDnDestroyGesvdjInfo(gesvdj_);
  if (solver_) cusolverDnDestroy(solver_);
  if (blas_) cublasDestroy(blas_);
  (void)cudaGetLastError();
}

void Context::activate() const {
  int current = -1;
  DCALIGN_CUDA(cudaGetDevice(&current));
  if (current != device_) DCALIGN_CUDA(cudaSetDevice(device_));
}

void Context::sync() const { DCALIGN_CUDA(cudaStreamSynchronize(stream_)); }

void Context::upload_staged(const void* host, void* dst, std::size_t bytes) {
  auto acquire = [&](int b) -> void* {
    const auto k = static_cast<size_t>(b);
    if (!staging_[k]) {
      DCALIGN_CUDA(cudaEventCreateWithFlags(&staged_done_[k], cudaEventDisableTiming));
      DCALIGN_CUDA(cudaHostAlloc(&staging_[k], kStagingChunk, cudaHostAllocDefault));
    }
    // The transfer that last read buffer b (an event never recorded is complete).
    DCALIGN_CUDA(cudaEventSynchronize(staged_done_[k]));
    return staging_[k];
  };
  auto send = [&](int b, std::size_t offset, std::size_t length) {
    const auto k = static_cast<size_t>(b);
    DCALIGN_CUDA(cudaMemcpyAsync(static_cast<char*>(dst) + offset, staging_[k], length,
                                 cudaMemcpyHostToDevice, stream_));
    DCALIGN_CUDA(cudaEventRecord(staged_done_[k], stream_));
  };
  base::staged_copy(host, bytes, kStagingBuffers, kStagingChunk, base::staging_threads(), acquire,
                    send);
}

void* Context::workspace(Slot slot, std::size_t bytes) {
  Area& a = areas_[static_cast<size_t>(slot)];
  if (bytes <= a.bytes && a.ptr) return a.ptr;
  // Freed stream-ordered: work queued earlier that still uses the old area finishes first.
  if (a.ptr) DCALIGN_CUDA(cudaFreeAsync(a.ptr, stream_));
  a.ptr = nullptr;
  a.bytes = 0;
  const std::size_t rounded = (bytes + (std::size_t(1) << 20) - 1) >> 20 << 20;
  a.ptr = device_malloc(rounded, stream_, "a workspace");
  a.bytes = rounded;
  return a.ptr;
}

void** Context::pointer_array(PointerSlot slot, const void* base, index_t stride_bytes,
                              index_t count) {
  PointerCache& c = pointer_cache_[static_cast<size_t>(slot)];
  if (c.ptr && c.base == base && c.stride == stride_bytes && c.count == count) return c.ptr;
  if (count > c.capacity || !c.ptr) {
    if (c.ptr) DCALIGN_CUDA(cudaFreeAsync(c.ptr, stream_));
    c.ptr = nullptr;
    c.capacity = 0;
    c.ptr = static_cast<void**>(device_malloc(
        sizeof(void*) * static_cast<size_t>(count > 0 ? count : 1), stream_, "a pointer array"));
    c.capacity = count > 0 ? count : 1;
  }
  kernels::pointer_array(stream_, c.ptr, base, stride_bytes, count);
  c.base = base;
  c.stride = stride_bytes;
  c.count = count;
  return c.ptr;
}

std::string Context::description() const {
  cudaDeviceProp prop{};
  DCALIGN_CUDA(cudaGetDeviceProperties(&prop, device_));
  int driver = 0, runtime = 0;
  DCALIGN_CUDA(cudaDriverGetVersion(&driver));
  DCALIGN_CUDA(cudaRuntimeGetVersion(&runtime));
  int blas_version = 0;
  DCALIGN_CUDA(cublasGetVersion(blas_, &blas_version));
  int sv[3] = {0, 0, 0};
  DCALIGN_CUDA(cusolverGetProperty(MAJOR_VERSION, &sv[0]));
  DCALIGN_CUDA(cusolverGetProperty(MINOR_VERSION, &sv[1]));
  DCALIGN_CUDA(cusolverGetProperty(PATCH_LEVEL, &sv[2]));
  auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  };
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << "cuda: device " << device_ << " " << prop.name << " (compute capability "
     << prop.major << "." << prop.minor << ", " << prop.multiProcessorCount << " SMs, "
     << static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0) << " GiB), driver "
     << version(driver) << ", runtime " << version(runtime) << ", cuBLAS " << blas_version / 10000
     << "." << (blas_version / 100) % 100 << "." << blas_version % 100 << ", cuSOLVER " << sv[0]
     << "." << sv[1] << "." << sv[2] << (tf32_ ? ", TF32 GEMM allowed" : ", TF32 off");
  return os.str();
}

}  // namespace dcalign::cuda
