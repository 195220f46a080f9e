// The backend conformance suite (tests/backend_conformance.hpp) on the CPU backend, and the
// CPU backend's error reporting from inside its OpenMP loops.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend_conformance.hpp"
#include "dcalign/backend.hpp"

namespace dcalign::conformance {

Backend* backend_under_test(std::string* why_not) {
  static const std::shared_ptr<Backend> backend = make_backend(Device::cpu);
  if (why_not) why_not->clear();
  return backend.get();
}

INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, BackendConformance, Precisions);

namespace {

// The own kernels (src/cpu/kernels.cpp) run with the instruction set DCALIGN_CPU_ISA names, by
// default the widest the CPU has; CTest runs this whole suite once more for each narrower set
// (tests/cpu/CMakeLists.txt), and this test shows that the variable took effect.
TEST(CpuKernels, DescriptionNamesTheInstructionSetInUse) {
  const std::string d = backend_under_test(nullptr)->description();
  const char* env = std::getenv("DCALIGN_CPU_ISA");
  if (env && *env) {
    EXPECT_NE(d.find(std::string("own kernels ") + env), std::string::npos) << d;
  } else {
    EXPECT_TRUE(d.find("own kernels baseline") != std::string::npos ||
                d.find("own kernels avx2") != std::string::npos ||
                d.find("own kernels avx512") != std::string::npos)
        << d;
  }
}

// Run by CTest with DCALIGN_CPU_ISA=sse9 (test cpu_kernels_unknown_isa): making the backend
// fails with a message naming the variable and the accepted values.
TEST(CpuKernels, UnknownInstructionSetIsRefused) {
  const char* env = std::getenv("DCALIGN_CPU_ISA");
  if (!env || std::string(env) != "sse9") GTEST_SKIP() << "needs DCALIGN_CPU_ISA=sse9";
  try {
    make_backend(Device::cpu);
    ADD_FAILURE() << "no exception for DCALIGN_CPU_ISA=sse9";
  } catch (const BackendError& e) {
    EXPECT_EQ(std::string(e.what()),
              "DCALIGN_CPU_ISA='sse9' is not an instruction set of the CPU kernels (expected "
              "baseline, avx2 or avx512)");
  }
}

// An exception thrown inside an OpenMP region terminates the program; the backend carries the
// first failure (lowest matrix index) out of the loop and rethrows it, naming the matrix. The
// SVD-based primitives reject a NaN or Inf before gesdd (which reports a NaN as an illegal
// argument and does not return on an Inf) with a NumericalError.
template <typename T>
class CpuParallelErrors : public ::testing::Test {
 protected:
  Primitives<T>& p() { return backend_under_test(nullptr)->primitives<T>(); }
};
TYPED_TEST_SUITE(CpuParallelErrors, Precisions);

TYPED_TEST(CpuParallelErrors, PolarBatchedNamesTheFirstMatrixWithANanOrInf) {
  using T = TypeParam;
  const index_t c = 40, l = 6;  // more matrices than threads: the loop runs in parallel
  std::vector<T> M(static_cast<size_t>(c * l * l)), G(M.size());
  Rng rng(1);
  for (auto& x : M) x = static_cast<T>(rng.normal());
  M[static_cast<size_t>(37 * l * l + 4)] = std::numeric_limits<T>::quiet_NaN();
  M[static_cast<size_t>(23 * l * l + 2)] = -std::numeric_limits<T>::infinity();
  try {
    this->p().polar_batched(StackView<const T>(M.data(), c, l, l), false,
                            StackView<T>(G.data(), c, l, l));
    ADD_FAILURE() << "no exception for a NaN input";
  } catch (const NumericalError& e) {
    EXPECT_EQ(std::string(e.what()),
              "polar_batched, matrix 23: gesdd: the matrix holds NaN or Inf");
  }
  // The backend is usable afterwards.
  M[static_cast<size_t>(37 * l * l + 4)] = M[static_cast<size_t>(23 * l * l + 2)] = T(1);
  const auto info = this->p().polar_batched(StackView<const T>(M.data(), c, l, l), false,
                                            StackView<T>(G.data(), c, l, l));
  EXPECT_GT(info.sigma_min[23], T(0));
}

TYPED_TEST(CpuParallelErrors, LstsqBatchedNamesTheMatrixWithANan) {
  using T = TypeParam;
  const index_t c = 9, a = 11, l = 4;
  std::vector<T> A(static_cast<size_t>(c * a * l)), Z(static_cast<size_t>(a * l)),
      G(static_cast<size_t>(c * l * l));
  Rng rng(2);
  for (auto& x : A) x = static_cast<T>(rng.normal());
  for (auto& x : Z) x = static_cast<T>(rng.normal());
  A[static_cast<size_t>(5 * a * l)] = std::numeric_limits<T>::infinity() * T(0);  // NaN
  EXPECT_THROW(
      {
        try {
          this->p().lstsq_batched(StackView<const T>(A.data(), c, a, l),
                                  MatrixView<const T>(Z.data(), a, l),
                                  StackView<T>(G.data(), c, l, l));
        } catch (const NumericalError& e) {
          EXPECT_EQ(std::string(e.what()),
                    "lstsq_batched, matrix 5: gesdd: the matrix holds NaN or Inf");
          throw;
        }
      },
      NumericalError);
}

TYPED_TEST(CpuParallelErrors, SvdTopkRejectsInfInsteadOfHanging) {
  using T = TypeParam;
  const index_t m = 8, n = 5;
  std::vector<T> W(static_cast<size_t>(m * n), T(1)), s(2);
  W[7] = std::numeric_limits<T>::infinity();
  EXPECT_THROW(this->p().svd_topk(MatrixView<const T>(W.data(), m, n), 2, s.data(), MatrixView<T>(),
                                  MatrixView<T>()),
               NumericalError);
}

TYPED_TEST(CpuParallelErrors, SyevLargestRejectsInfInsteadOfHanging) {
  using T = TypeParam;
  const index_t n = 6;
  std::vector<T> S(static_cast<size_t>(n * n), T(1)), V(static_cast<size_t>(n * 2)), w(2);
  S[3] = std::numeric_limits<T>::infinity();  // lower triangle, column 0
  EXPECT_THROW(this->p().syev_largest(MatrixView<T>(S.data(), n, n), 2, w.data(),
                                      MatrixView<T>(V.data(), n, 2)),
               NumericalError);
}

TYPED_TEST(CpuParallelErrors, GemmBatchedShapeErrorsLeaveTheLoop) {
  using T = TypeParam;
  // Inner dimensions that do not match: gemm throws InvalidInput inside gemm_batched's loop.
  std::vector<T> A(3 * 4 * 5), B(3 * 4 * 5), C(3 * 4 * 4);
  try {
    this->p().gemm_batched(Op::none, Op::none, T(1), StackView<const T>(A.data(), 3, 4, 5),
                           StackView<const T>(B.data(), 3, 4, 5), T(0),
                           StackView<T>(C.data(), 3, 4, 4));
    ADD_FAILURE() << "no exception for mismatched shapes";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()).rfind("gemm_batched, matrix 0: gemm: inner or outer", 0), 0)
        << e.what();
  }
}

}  // namespace
}  // namespace dcalign::conformance
