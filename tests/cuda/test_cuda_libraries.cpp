// cuBLAS and cuSOLVER reach the CUDA backend through src/cuda/lazy_libraries.cpp, which opens
// them on first use. The check needs the CUDA toolkit's libraries but no GPU: every function of
// the table resolves, and calls forward to the real library (check_lazy_libraries makes them
// inside the library, where the forwarding definitions are visible also when it is shared).
#include <gtest/gtest.h>

#include "cuda/lazy_libraries.hpp"

namespace dcalign {
namespace {

TEST(CudaLibraries, EveryFunctionOfTheBackendResolvesAndForwards) {
  EXPECT_EQ(cuda::check_lazy_libraries(), "");
}

}  // namespace
}  // namespace dcalign
