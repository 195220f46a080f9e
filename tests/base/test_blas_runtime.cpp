// The BLAS kernel selection (src/base/blas_runtime.cpp): the decision table for every kernel set
// and CPU level, a user's OPENBLAS_CORETYPE never overridden, and, in a process started with a
// library fallback simulated (CTest sets OPENBLAS_CORETYPE=Prescott for the BlasFallback tests,
// which unset it first), the switch to the CPU's kernel set with BLAS still right afterwards.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/blas_runtime.hpp"
#include "base/host_blas.hpp"
#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/random.hpp"

namespace dcalign::base {
namespace {

const std::vector<std::string> kAllSets = {
    "Katmai",       "Coppermine",    "Northwood",  "Prescott", "Banias",      "Atom",
    "Core2",        "Penryn",        "Dunnington", "Nehalem",  "Athlon",      "Opteron",
    "Opteron_SSE3", "Barcelona",     "Nano",       "Bobcat",   "Sandybridge", "Bulldozer",
    "Piledriver",   "Steamroller",   "Haswell",    "Zen",      "Excavator",   "SkylakeX",
    "Cooperlake",   "SapphireRapids"};
const std::vector<SimdLevel> kLevels = {SimdLevel::unknown, SimdLevel::sse,
                                        SimdLevel::avx,     SimdLevel::avx2,
                                        SimdLevel::avx512,  SimdLevel::avx512_bf16};

TEST(BlasKernels, EveryKnownSetHasALevelInAnyCase) {
  for (const auto& name : kAllSets) {
    EXPECT_NE(kernel_level(name), SimdLevel::unknown) << name;
    std::string upper = name;
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    EXPECT_EQ(kernel_level(upper), kernel_level(name)) << upper;
  }
  EXPECT_EQ(kernel_level("Prescott"), SimdLevel::sse);
  EXPECT_EQ(kernel_level("Haswell"), SimdLevel::avx2);
  EXPECT_EQ(kernel_level("SkylakeX"), SimdLevel::avx512);
  EXPECT_EQ(kernel_level("Cooperlake"), SimdLevel::avx512_bf16);
  EXPECT_EQ(kernel_level("NeoverseN1"), SimdLevel::unknown);
  EXPECT_EQ(kernel_level(""), SimdLevel::unknown);
  EXPECT_EQ(kernel_level("Prescot"), SimdLevel::unknown);  // a prefix is not the name
}

TEST(BlasKernels, TheTargetOfEveryLevelIsASetOfThatLevel) {
  for (bool amd : {false, true})
    for (SimdLevel l : kLevels) {
      const std::string set = kernel_set_for(l, amd);
      if (l == SimdLevel::unknown || l == SimdLevel::sse)
        EXPECT_TRUE(set.empty()) << to_string(l);
      else
        EXPECT_EQ(kernel_level(set), l) << set;
    }
  EXPECT_EQ(kernel_set_for(SimdLevel::avx2, true), "Zen");
  EXPECT_EQ(kernel_set_for(SimdLevel::avx2, false), "Haswell");
}

TEST(BlasKernels, AFallbackBelowTheCpuIsCorrected) {
  // The case that prompted it: Debian's OpenBLAS 0.3.21 on a Xeon newer than it.
  auto d = decide_kernels("Prescott", SimdLevel::avx512, false, nullptr, nullptr);
  EXPECT_EQ(d.target, "SkylakeX");
  EXPECT_EQ(d.chosen_by, "dcalign");
  EXPECT_NE(d.reason.find("Prescott"), std::string::npos) << d.reason;
  EXPECT_EQ(decide_kernels("Prescott", SimdLevel::avx512_bf16, false, nullptr, "auto").target,
            "Cooperlake");
  EXPECT_EQ(decide_kernels("Haswell", SimdLevel::avx512, false, nullptr, nullptr).target,
            "SkylakeX");
  EXPECT_EQ(decide_kernels("Nehalem", SimdLevel::avx2, true, nullptr, nullptr).target, "Zen");
  EXPECT_EQ(decide_kernels("Barcelona", SimdLevel::avx, true, nullptr, nullptr).target,
            "Sandybridge");
}

TEST(BlasKernels, TheLibrarysChoiceStaysWhereItIsNotBelowTheCpu) {
  for (bool amd : {false, true})
    for (const auto& set : kAllSets)
      for (SimdLevel l : kLevels) {
        const auto d = decide_kernels(set, l, amd, nullptr, nullptr);
        const bool below = l != SimdLevel::unknown &&
                           static_cast<int>(kernel_level(set)) < static_cast<int>(l) &&
                           !kernel_set_for(l, amd).empty();
        EXPECT_EQ(d.target.empty(), !below) << set << " on " << to_string(l);
        if (!d.target.empty()) {
          EXPECT_EQ(kernel_level(d.target), l) << set;
          EXPECT_EQ(d.chosen_by, "dcalign");
        } else {
          EXPECT_EQ(d.chosen_by, "OpenBLAS");
        }
        EXPECT_TRUE(d.error.empty());
      }
  EXPECT_TRUE(decide_kernels("Cooperlake", SimdLevel::avx512, false, nullptr, nullptr)
                  .target.empty());  // never down
  EXPECT_TRUE(decide_kernels("ThunderX2", SimdLevel::avx512, false, nullptr, nullptr)
                  .target.empty());  // a set it cannot rank
}

TEST(BlasKernels, AUsersSettingIsNeverOverridden) {
  for (bool amd : {false, true})
    for (const auto& set : kAllSets)
      for (SimdLevel l : kLevels)
        for (const char* mode : {static_cast<const char*>(nullptr), "auto", "library", "bogus"}) {
          const auto d = decide_kernels(set, l, amd, set.c_str(), mode);
          EXPECT_TRUE(d.target.empty()) << set;
          EXPECT_EQ(d.chosen_by, "OPENBLAS_CORETYPE");
          EXPECT_TRUE(d.error.empty());  // OpenBLAS's variable wins over dcalign's, even a bad one
        }
  for (const auto& set : kAllSets) {
    const auto d = decide_kernels(set, SimdLevel::avx512_bf16, false, nullptr, "library");
    EXPECT_TRUE(d.target.empty()) << set;
    EXPECT_EQ(d.chosen_by, "DCALIGN_BLAS_KERNELS=library");
  }
  // An empty OPENBLAS_CORETYPE is no setting (OpenBLAS itself ignores it).
  EXPECT_EQ(decide_kernels("Prescott", SimdLevel::avx512, false, "", nullptr).target, "SkylakeX");
}

TEST(BlasKernels, ABadPolicyIsAnError) {
  const auto d = decide_kernels("Prescott", SimdLevel::avx512, false, nullptr, "fastest");
  EXPECT_TRUE(d.target.empty());
  EXPECT_NE(d.error.find("DCALIGN_BLAS_KERNELS='fastest'"), std::string::npos) << d.error;
  EXPECT_NE(d.error.find("auto"), std::string::npos);
  EXPECT_NE(d.error.find("library"), std::string::npos);
}

TEST(BlasKernels, TheReportAndBlasInfoNameTheKernelSetInUse) {
  const BlasInfo info = blas_info();
  EXPECT_FALSE(info.kernels.empty());
  EXPECT_EQ(info.kernels, std::string(openblas_get_corename()));
  EXPECT_NE(info.library.find("OpenBLAS"), std::string::npos) << info.library;
  EXPECT_FALSE(info.chosen_by.empty());
  EXPECT_FALSE(info.reason.empty());

  Rng rng(5);
  Stack<double> A(3, 40, 4);
  for (index_t k = 0; k < A.count(); ++k)
    for (index_t j = 0; j < 4; ++j)
      for (index_t i = 0; i < 40; ++i) A[k](i, j) = rng.normal();
  AlignOptions opts;
  const auto out = align(A, opts);
  EXPECT_EQ(out.report.blas.kernels, info.kernels);
  const auto js = nlohmann::json::parse(out.report.to_json());
  ASSERT_TRUE(js.contains("blas"));
  EXPECT_EQ(js["blas"]["kernels"], info.kernels);
  EXPECT_EQ(js["blas"]["chosen_by"], info.chosen_by);
  EXPECT_EQ(js["blas"]["library"], info.library);

  EXPECT_NE(runtime_summary().find("kernels " + info.kernels), std::string::npos)
      << runtime_summary();
}

// ---- a process started on the generic kernels (CTest: OPENBLAS_CORETYPE=Prescott)

double gemm_error() {
  // C = A B through BLAS against a plain triple loop, relative max error.
  const int m = 97, n = 61, k = 83;
  Rng rng(11);
  const Matrix<double> A = random_normal<double>(m, k, rng), B = random_normal<double>(k, n, rng);
  Matrix<double> C(m, n);
  base::gemm(false, false, m, n, k, 1.0, A.data(), m, B.data(), k, 0.0, C.data(), m);
  double err = 0, scale = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += A(i, p) * B(p, j);
      err = std::max(err, std::abs(s - C(i, j)));
      scale = std::max(scale, std::abs(s));
    }
  return err / scale;
}

class BlasFallback : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("OPENBLAS_CORETYPE");
    if (!env || std::string(env) != "Prescott")
      GTEST_SKIP() << "run by CTest with OPENBLAS_CORETYPE=Prescott (blas_kernels_fallback)";
  }
};

TEST_F(BlasFallback, DISABLED_TheUsersChoiceHeldAtLoad) {
  EXPECT_EQ(blas_runtime().kernels, "Prescott");
  EXPECT_EQ(blas_runtime().chosen_by, "OPENBLAS_CORETYPE");
  EXPECT_EQ(std::string(openblas_get_corename()), "Prescott");
}

TEST_F(BlasFallback, DISABLED_WithoutTheUsersChoiceTheCpusSetIsLoaded) {
  // Unset, the library's load-time choice (Prescott) looks like OpenBLAS's own fallback.
  ::unsetenv("OPENBLAS_CORETYPE");
  const BlasRuntime r = detail::select_blas_kernels();
  const SimdLevel cpu = cpu_level();
  __builtin_cpu_init();
  const std::string want = kernel_set_for(cpu, __builtin_cpu_is("amd"));
  if (want.empty() || !r.switchable) {
    EXPECT_EQ(r.kernels, "Prescott") << r.reason;  // an SSE-only CPU, or a fixed library
  } else {
    EXPECT_EQ(r.kernels, want) << r.reason;
    EXPECT_EQ(r.chosen_by, "dcalign");
    EXPECT_EQ(r.library_choice, "Prescott");
  }
  EXPECT_EQ(std::string(openblas_get_corename()), r.kernels);
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);  // the environment is left as it was
  // The new kernels compute: a product within a few rounding errors of the plain loop.
  EXPECT_LT(gemm_error(), 1e-13);

  // And with the user's choice set again, it is restored.
  ::setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  const BlasRuntime back = detail::select_blas_kernels();
  EXPECT_EQ(back.chosen_by, "OPENBLAS_CORETYPE");
  // select_blas_kernels leaves the user's set alone; reload it as the process started.
  EXPECT_LT(gemm_error(), 1e-13);
}

}  // namespace
}  // namespace dcalign::base
