// Built when dcalign is compiled without the CUDA backend: --device cuda fails with a reason.
// The build says which reason applies (DCALIGN_NO_CUDA_REASON, set by CMake); with the backend
// compiled, cuda_backend.cu answers instead with the runtime's reason (no driver, no GPU, ...).
#include <string>

#include "backends/backends.hpp"
#include "dcalign/error.hpp"

#ifndef DCALIGN_NO_CUDA_REASON
#define DCALIGN_NO_CUDA_REASON "it was built without it"
#endif

namespace dcalign {

bool cuda_available(std::string* why) {
  if (why) *why = "this build of dcalign has no CUDA backend: " DCALIGN_NO_CUDA_REASON;
  return false;
}

DeviceMemory cuda_device_memory(int device_id) {
  std::string why;
  cuda_available(&why);
  throw BackendError("the memory of CUDA device " + std::to_string(device_id) +
                     " cannot be read: " + why);
}

int cuda_devices() { return 0; }

}  // namespace dcalign
