// Built when dcalign is compiled without the CUDA backend: --device cuda fails with a reason.
#include <string>

#include "dcalign/backend.hpp"

namespace dcalign {

bool cuda_available(std::string* why) {
  if (why)
    *why =
        "this build of dcalign has no CUDA backend (nvcc was not found at configure time, or "
        "DCALIGN_CUDA=OFF)";
  return false;
}

}  // namespace dcalign
