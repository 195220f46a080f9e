// The CUDA backend: one Context (device, stream, cuBLAS/cuSOLVER handles, workspaces) shared by
// the float and double primitives, which forward to the implementations in src/cuda/*_ops.cu.
#include <memory>
#include <string>

#include "backends/backends.hpp"  // declares make_cuda_backend and cuda_usable
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "cuda/cuda_api.hpp"
#include "cuda/ops.hpp"
#include "kernels/kernels.cuh"

namespace dcalign::cuda {
namespace {

template <typename T>
class CudaPrimitives final : public Primitives<T> {
 public:
  explicit CudaPrimitives(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {}
  Device device() const override { return Device::cuda; }

  Buffer<T> allocate(index_t n) override { return ops::allocate<T>(use(), n); }
  void to_device(const T* host, T* dst, index_t n) override { ops::to_device(use(), host, dst, n); }
  void to_host(const T* src, T* host, index_t n) override { ops::to_host(use(), src, host, n); }
  void copy(const T* src, T* dst, index_t n) override { ops::copy(use(), src, dst, n); }
  void fill(T* dst, index_t n, T value) override { ops::fill(use(), dst, n, value); }
  void to_float64(MatrixView<const T> src, MatrixView<double> dst) override {
    ops::convert(use(), src, dst);
  }
  void from_float64(MatrixView<const double> src, MatrixView<T> dst) override {
    ops::convert(use(), src, dst);
  }
  void synchronize() override { use().sync(); }

  void gemm(Op ta, Op tb, T alpha, MatrixView<const T> A, MatrixView<const T> B, T beta,
            MatrixView<T> C) override {
    ops::gemm(use(), ta, tb, alpha, A, B, beta, C);
  }
  void gemm_batched(Op ta, Op tb, T alpha, StackView<const T> A, StackView<const T> B, T beta,
                    StackView<T> C) override {
    ops::gemm_batched(use(), ta, tb, alpha, A, B, beta, C);
  }
  void trsm_upper_batched(StackView<const T> R, StackView<T> B) override {
    ops::trsm_upper_batched(use(), R, B);
  }
  void vstack(StackView<const T> in, MatrixView<T> out) override { ops::vstack(use(), in, out); }
  void unvstack(MatrixView<const T> in, StackView<T> out) override {
    ops::unvstack(use(), in, out);
  }
  void gather(const T* src, index_t sc, index_t si, index_t sj, StackView<T> dst) override {
    ops::gather(use(), src, sc, si, sj, dst);
  }
  void syrk(Op trans, T alpha, MatrixView<const T> A, T beta, MatrixView<T> C) override {
    ops::syrk(use(), trans, alpha, A, beta, C);
  }
  void geam(T alpha, MatrixView<const T> A, T beta, MatrixView<const T> B,
            MatrixView<T> C) override {
    ops::geam(use(), alpha, A, beta, B, C);
  }

  PolarInfo<T> polar_batched(StackView<const T> M, bool transposed, StackView<T> G) override {
    return ops::polar_batched(use(), M, transposed, G);
  }
  std::vector<T> qr_batched(StackView<T> A, StackView<T> R) override {
    return ops::qr_batched(use(), A, R);
  }
  void svd_topk(MatrixView<const T> W, index_t k, T* s, MatrixView<T> U, MatrixView<T> V) override {
    ops::svd_topk(use(), W, k, s, U, V);
  }
  std::vector<T> lstsq_batched(StackView<const T> A, MatrixView<const T> Z,
                               StackView<T> G) override {
    return ops::lstsq_batched(use(), A, Z, G);
  }
  void syev_largest(MatrixView<T> S, index_t k, T* evals, MatrixView<T> V) override {
    ops::syev_largest(use(), S, k, evals, V);
  }
  void sygv_smallest(MatrixView<T> S, MatrixView<T> B, index_t k, T* evals,
                     MatrixView<T> V) override {
    ops::sygv_smallest(use(), S, B, k, evals, V);
  }

  void polar_start(StackView<const T> M, bool transposed, StackView<T> X, T* state,
                   double stop_below) override {
    ops::polar_start(use(), M, transposed, X, state, stop_below);
  }
  void inverse_batched(StackView<const T> X, StackView<T> Y, T* state) override {
    ops::inverse_batched(use(), X, Y, state);
  }
  index_t polar_newton_step(StackView<T> X, StackView<const T> Y, T* state, int iteration,
                            double tolerance) override {
    return ops::polar_newton_step(use(), X, Y, state, iteration, tolerance);
  }
  index_t polar_newton_steps(StackView<T> X, StackView<T> Y, T* state, int max_steps,
                             double tolerance) override {
    const index_t active = ops::polar_newton_steps(use(), X, Y, state, max_steps, tolerance);
    if (active >= 0) return active;
    return Primitives<T>::polar_newton_steps(X, Y, state, max_steps, tolerance);
  }
  bool polar_newton_polish(StackView<T> X, StackView<T> G, T* state, int max_steps,
                           double tolerance) override {
    return ops::polar_newton_polish(use(), X, G, state, max_steps, tolerance);
  }
  void add_identity_batched(T alpha, StackView<T> C) override {
    ops::add_identity_batched(use(), alpha, C);
  }

  bool all_finite(const T* x, index_t n) override { return ops::all_finite(use(), x, n); }
  std::vector<index_t> first_nonfinite_batched(StackView<const T> x) override {
    return ops::first_nonfinite_batched(use(), x);
  }
  std::vector<T> orthogonality_errors(StackView<const T> G) override {
    return ops::orthogonality_errors(use(), G);
  }
  std::vector<T> residuals(StackView<const T> A, StackView<const T> G,
                           MatrixView<const T> Z) override {
    return ops::residuals(use(), A, G, Z);
  }
  std::vector<T> product_column_norms(StackView<const T> A, StackView<const T> G) override {
    return ops::product_column_norms(use(), A, G);
  }
  double sum_squares(const T* x, index_t n) override { return ops::sum_squares(use(), x, n); }
  std::vector<double> inner_products(StackView<const T> X, StackView<const T> Y) override {
    return ops::inner_products(use(), X, Y);
  }

 private:
  // Every entry point makes the backend's device current (several backends may live on
  // different devices in one process).
  Context& use() {
    ctx_->activate();
    return *ctx_;
  }
  std::shared_ptr<Context> ctx_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const BackendOptions& opts)
      : ctx_(std::make_shared<Context>(device, opts)), f32_(ctx_), f64_(ctx_) {
    f32_.set_float64(&f64_);  // same Context: the same stream orders the promoted work
    f64_.set_float64(&f64_);
  }
  Device device() const override { return Device::cuda; }
  std::string description() const override {
    ctx_->activate();
    return ctx_->description();
  }
  Primitives<float>& f32() override { return f32_; }
  Primitives<double>& f64() override { return f64_; }
  cudaStream_t stream() const { return ctx_->stream(); }

 private:
  std::shared_ptr<Context> ctx_;
  CudaPrimitives<float> f32_;
  CudaPrimitives<double> f64_;
};

// Why device `device` cannot be used, or an empty string. Never throws.
std::string unusable_reason(int device) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return "cudaGetDeviceCount failed: " + describe(status) +
           " (no NVIDIA driver loaded, or no GPU visible to this process)";
  }
  if (count == 0) return "no CUDA device is visible to this process";
  if (device < 0 || device >= count)
    return "CUDA device " + std::to_string(device) + " requested, but " + std::to_string(count) +
           " device(s) are present (ordinals 0.." + std::to_string(count - 1) + ")";
  if (device >= kMaxDevices)
    return "CUDA device " + std::to_string(device) + " is beyond the supported " +
           std::to_string(kMaxDevices) + " devices";
  const cudaError_t image = kernels::probe_kernel_image(device);
  if (image != cudaSuccess)
    return "device " + std::to_string(device) +
           " cannot run this build's kernels (compiled for other GPU architectures; set "
           "CMAKE_CUDA_ARCHITECTURES): " +
           describe(image);
  return {};
}

}  // namespace

bool cuda_usable(std::string* why) {
  const std::string reason = unusable_reason(0);
  if (why) *why = reason;
  return reason.empty();
}

std::shared_ptr<Backend> make_cuda_backend(const BackendOptions& opts) {
  const std::string reason = unusable_reason(opts.device_id);
  if (!reason.empty()) throw BackendError("CUDA backend requested but unavailable: " + reason);
  return std::make_shared<CudaBackend>(opts.device_id, opts);
}

cudaStream_t stream_of(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (!cuda)
    throw BackendError("stream_of: the backend is not a CUDA backend (device " +
                       to_string(backend.device()) + ")");
  return cuda->stream();
}

}  // namespace dcalign::cuda

namespace dcalign {

bool cuda_available(std::string* why) { return cuda::cuda_usable(why); }

DeviceMemory cuda_device_memory(int device_id) {
  const std::string reason = cuda::unusable_reason(device_id);
  if (!reason.empty())
    throw BackendError("the memory of CUDA device " + std::to_string(device_id) +
                       " cannot be read: " + reason);
  int current = 0;
  std::size_t free = 0, total = 0;
  cudaError_t status = cudaGetDevice(&current);
  if (status == cudaSuccess) status = cudaSetDevice(device_id);
  if (status == cudaSuccess) status = cudaMemGetInfo(&free, &total);
  (void)cudaSetDevice(current);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw BackendError("cudaMemGetInfo on CUDA device " + std::to_string(device_id) +
                       " failed: " + cuda::describe(status));
  }
  return {static_cast<std::uint64_t>(free), static_cast<std::uint64_t>(total)};
}

int cuda_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace dcalign
