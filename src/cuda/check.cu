// Status codes to exceptions, in one place (see check.hpp).
#include <sstream>

#include "cuda/check.hpp"
#include "dcalign/error.hpp"

namespace dcalign::cuda {
namespace {

const char* cusolver_status_name(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_SUCCESS:
      return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED:
      return "CUSOLVER_STATUS_NOT_INITIALIZED (no driver or no usable GPU?)";
    case CUSOLVER_STATUS_ALLOC_FAILED:
      return "CUSOLVER_STATUS_ALLOC_FAILED (out of device memory)";
    case CUSOLVER_STATUS_INVALID_VALUE:
      return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH:
      return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_MAPPING_ERROR:
      return "CUSOLVER_STATUS_MAPPING_ERROR";
    case CUSOLVER_STATUS_EXECUTION_FAILED:
      return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR:
      return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_NOT_SUPPORTED";
    case CUSOLVER_STATUS_ZERO_PIVOT:
      return "CUSOLVER_STATUS_ZERO_PIVOT";
    case CUSOLVER_STATUS_INVALID_LICENSE:
      return "CUSOLVER_STATUS_INVALID_LICENSE";
    default:
      return "unknown cuSOLVER status";
  }
}

[[noreturn]] void fail(const char* library, const char* call, int code, const std::string& text) {
  std::ostringstream os;
  os << library << " call failed: " << call << " returned " << code << " (" << text << ")";
  throw BackendError(os.str());
}

}  // namespace

std::string describe(cudaError_t status) {
  std::ostringstream os;
  os << cudaGetErrorName(status) << " (code " << static_cast<int>(status)
     << "): " << cudaGetErrorString(status);
  return os.str();
}

void check(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  // Reset the runtime's last-error slot so that a later launch check does not report this
  // (non-sticky) failure a second time; sticky faults stay and fail every later call.
  (void)cudaGetLastError();
  fail("CUDA runtime", call, static_cast<int>(status), describe(status));
}

void check(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail("cuBLAS", call, static_cast<int>(status), cublasGetStatusString(status));
}

void check(cusolverStatus_t status, const char* call) {
  if (status == CUSOLVER_STATUS_SUCCESS) return;
  fail("cuSOLVER", call, static_cast<int>(status), cusolver_status_name(status));
}

void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  fail("CUDA kernel launch", kernel, static_cast<int>(status), describe(status));
}

void* device_malloc(std::size_t bytes, cudaStream_t stream, const char* what) {
  void* p = nullptr;
  const cudaError_t status = cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, stream);
  if (status != cudaSuccess) {
    std::ostringstream call;
    call << "cudaMallocAsync(" << bytes << " bytes of device memory for " << what << ")";
    check(status, call.str().c_str());
  }
  return p;
}

}  // namespace dcalign::cuda
