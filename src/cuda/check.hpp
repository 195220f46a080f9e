#pragma once
// The one place where CUDA runtime, cuBLAS and cuSOLVER status codes become exceptions: every
// call into those libraries goes through DCALIGN_CUDA(...), every kernel launch is followed by
// check_launch(...). A failure throws dcalign::BackendError naming the call, the status code
// and its text; nothing aborts.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <cstddef>
#include <string>

namespace dcalign::cuda {

void check(cudaError_t status, const char* call);
void check(cublasStatus_t status, const char* call);
void check(cusolverStatus_t status, const char* call);
/// After a kernel launch: a launch error (bad configuration, no kernel image for this GPU) or
/// an earlier asynchronous fault reported by the runtime.
void check_launch(const char* kernel);

/// "NAME (code N): text" for a runtime status; used where a failure is a reason, not an error
/// (cuda_available).
std::string describe(cudaError_t status);

/// cudaMallocAsync on `stream`; throws BackendError (out of device memory, with the size) and
/// leaves no pending error behind for later launch checks.
void* device_malloc(std::size_t bytes, cudaStream_t stream, const char* what);

}  // namespace dcalign::cuda

#define DCALIGN_CUDA(call) ::dcalign::cuda::check((call), #call)
