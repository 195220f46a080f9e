// Shapes of the GPU tests. DCALIGN_GPU_TEST_SMALL=1 (set by scripts/gpu-check.sh for its
// compute-sanitizer runs, which slow kernels down 10-100 times) asks for the small shapes: the
// same code paths on fewer and smaller matrices, and a skip where a test's point is its size.
#pragma once

#include <cstdlib>
#include <cstring>

// True when DCALIGN_GPU_TEST_SMALL is set to anything but "" or "0".
inline bool dcalign_gpu_small() {
  const char* v = std::getenv("DCALIGN_GPU_TEST_SMALL");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}
