#pragma once
// The list of backends: what each one provides to make_backend (src/backends/backends.cpp).
// A backend defines these in its own folder; adding one means a declaration here, a case in
// backends.cpp, its folder and its CMake, and nothing in another backend or in src/core.
#include <memory>
#include <string>

#include "dcalign/backend.hpp"

namespace dcalign {

namespace cpu {
std::shared_ptr<Backend> make_cpu_backend(const BackendOptions& opts);  // src/cpu/cpu_factory.cpp
std::string own_kernels();  ///< the instruction set of the CPU backend's own loops
}  // namespace cpu

#ifdef DCALIGN_HAVE_CUDA
namespace cuda {
std::shared_ptr<Backend> make_cuda_backend(const BackendOptions& opts);  // src/cuda/cuda_backend.cu
bool cuda_usable(std::string* why);
}  // namespace cuda
#endif
// cuda_backend.cu with the backend, cuda_unavailable.cpp without: cudaMemGetInfo of a device
// (BackendError when it cannot be had) and cudaGetDeviceCount (0 on any failure).
DeviceMemory cuda_device_memory(int device_id);
int cuda_devices();

}  // namespace dcalign
