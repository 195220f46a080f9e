// The backend conformance suite (tests/backend_conformance.hpp) on the CUDA backend. Every test
// skips, with the reason, where no usable GPU is present.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backend_conformance.hpp"
#include "dcalign/backend.hpp"

namespace dcalign::conformance {

Backend* backend_under_test(std::string* why_not) {
  std::string why;
  if (!cuda_available(&why)) {
    if (why_not) *why_not = "no usable GPU: " + why;
    return nullptr;
  }
  // Created once, on first use (context creation takes a while).
  static const std::shared_ptr<Backend> backend = make_backend(Device::cuda);
  return backend.get();
}

INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, BackendConformance, Precisions);

}  // namespace dcalign::conformance
