// LibTorch tensor API (include/dcalign/torch.hpp): the anchors' storage is handed to
// align_resident as a StackView when it already has dcalign's layout, else copied once.
#include "dcalign/torch.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <sstream>
#include <string>
#include <type_traits>

#if DCALIGN_HAVE_CUDA && DCALIGN_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#elif DCALIGN_HAVE_CUDA
#include <torch/cuda.h>
#endif

#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"

namespace dcalign::torch_api {
namespace {

std::string shape_of(const at::Tensor& t) {
  std::ostringstream os;
  os << "[";
  for (int64_t d = 0; d < t.dim(); ++d) os << (d ? ", " : "") << t.size(d);
  os << "]";
  return os.str();
}

std::string dtype_name(const at::Tensor& t) { return std::string(t.dtype().name()); }

bool floating(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble;
}

void check_dtype(const at::Tensor& t, const char* what) {
  if (!floating(t))
    throw InvalidInput(std::string(what) + ": dtype is " + dtype_name(t) +
                       "; expected float32 or float64");
}

// Whether dimension d of t has the stride s (any stride is fine for a dimension of size 1).
bool stride_ok(const at::Tensor& t, int64_t d, int64_t s) {
  return t.size(d) == 1 || t.stride(d) == s;
}

// `ordered`: the backend queues its work on the caller's current CUDA stream (backend_for).
template <typename T>
std::pair<at::Tensor, AlignReport> align_typed(const at::Tensor& input, Primitives<T>& p,
                                               const AlignOptions& opts, bool ordered) {
  const int64_t c = input.size(0), a = input.size(1), l = input.size(2);
  at::Tensor anchors = input;
  double copy_seconds = -1;
  if (!takes_without_copy(input)) {
    const auto t0 = std::chrono::steady_clock::now();
    anchors = at::empty_strided({c, a, l}, {a * l, 1, a}, input.options());
    anchors.copy_(input);
    copy_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  at::Tensor G = at::empty_strided({c, l, l}, {l * l, 1, l}, input.options());
  const StackView<const T> A(anchors.data_ptr<T>(), c, a, l);
  AlignReport report =
      align_resident(p, A, StackView<T>(G.data_ptr<T>(), c, l, l), MatrixView<T>(), opts);
  // On its own stream the backend may still be writing G: wait for it. On the caller's stream
  // G is ordered before whatever the caller queues next, like the result of any PyTorch op.
  if (!ordered) p.synchronize();
  if (copy_seconds >= 0) {
    AlignReport full = report;
    full.seconds.clear();
    full.total_seconds = 0;
    full.add_phase("copy_anchors", copy_seconds);
    for (const auto& [name, s] : report.seconds) full.add_phase(name, s);
    report = full;
  }
  return {G, report};
}

// The backend for a tensor's device. `ordered` is set when the backend queues its work on the
// caller's current CUDA stream (nothing to synchronise: the results are ordered on it).
std::shared_ptr<Backend> backend_for(const at::Tensor& t, bool& ordered) {
  ordered = false;
  if (t.device().is_cpu()) return make_backend(Device::cpu);
  if (t.device().is_cuda()) {
#if DCALIGN_HAVE_CUDA
    BackendOptions bo;
    bo.device_id = t.device().has_index() ? t.device().index() : 0;
#if DCALIGN_TORCH_CUDA
    // Adopt the caller's current stream: after the work that produced the tensor, before what
    // the caller queues next, and no synchronisation at all. PyTorch's default stream is the
    // legacy default stream, whose handle is 0 (for BackendOptions: dcalign's own stream).
    const cudaStream_t current =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(bo.device_id)).stream();
    bo.cuda_stream = current ? current : cudaStreamLegacy;
    ordered = true;
    return make_backend(Device::cuda, bo);  // BackendError with the reason if unusable
#else
    auto backend = make_backend(Device::cuda, bo);  // BackendError with the reason if unusable
    // dcalign's CUDA backend runs on its own stream: finish the work that produced the tensor.
    torch::cuda::synchronize(bo.device_id);
    return backend;
#endif
#else
    throw BackendError("anchors: the tensor is on " + t.device().str() +
                       ", but this dcalign was built without its CUDA backend; move the tensor "
                       "to the CPU (anchors.cpu()) or rebuild dcalign with DCALIGN_CUDA=ON");
#endif
  }
  throw BackendError("anchors: tensors on device " + t.device().str() +
                     " are not supported; expected a CPU or CUDA tensor");
}

}  // namespace

bool takes_without_copy(const at::Tensor& anchors) {
  if (!anchors.defined() || anchors.dim() != 3 || !floating(anchors)) return false;
  const int64_t a = anchors.size(1), l = anchors.size(2);
  return stride_ok(anchors, 0, a * l) && stride_ok(anchors, 1, 1) && stride_ok(anchors, 2, a);
}

std::pair<at::Tensor, AlignReport> align(const at::Tensor& anchors, const AlignOptions& opts) {
  if (!anchors.defined())
    throw InvalidInput("anchors: undefined tensor; expected a [c, a, l] float32/float64 tensor");
  if (anchors.dim() != 3)
    throw InvalidInput(
        "anchors: expected a 3-D tensor [c, a, l] (users, anchor rows, "
        "dimension), got a " +
        std::to_string(anchors.dim()) + "-D tensor of shape " + shape_of(anchors));
  check_dtype(anchors, "anchors");
  if (anchors.size(0) < 1 || anchors.size(1) < 1 || anchors.size(2) < 1)
    throw InvalidInput("anchors: shape " + shape_of(anchors) +
                       " has an empty dimension; expected [c, a, l] with c >= 1 users, "
                       "a >= 1 anchor rows and l >= 1 columns");
  bool ordered = false;
  auto backend = backend_for(anchors, ordered);
  if (anchors.scalar_type() == at::kFloat)
    return align_typed<float>(anchors, backend->f32(), opts, ordered);
  return align_typed<double>(anchors, backend->f64(), opts, ordered);
}

at::Tensor transform(const at::Tensor& X, const at::Tensor& G) {
  if (!X.defined() || !G.defined())
    throw InvalidInput("transform: undefined tensor; expected X [n, l] and G [l, l]");
  if (X.dim() != 2)
    throw InvalidInput("transform: X must be a 2-D tensor [n, l], got shape " + shape_of(X));
  if (G.dim() != 2 || G.size(0) != G.size(1))
    throw InvalidInput("transform: G must be a square 2-D tensor [l, l], got shape " + shape_of(G));
  check_dtype(X, "transform: X");
  check_dtype(G, "transform: G");
  if (X.scalar_type() != G.scalar_type())
    throw InvalidInput("transform: X is " + dtype_name(X) + " but G is " + dtype_name(G) +
                       "; expected the same dtype");
  if (X.device() != G.device())
    throw InvalidInput("transform: X is on " + X.device().str() + " but G is on " +
                       G.device().str() + "; expected the same device");
  if (X.size(1) != G.size(0))
    throw InvalidInput("transform: X has " + std::to_string(X.size(1)) + " columns but G is " +
                       shape_of(G) + "; expected X [n, l] and G [l, l] with the same l");
  return at::matmul(X, G);
}

}  // namespace dcalign::torch_api
