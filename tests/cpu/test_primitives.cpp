// Backend primitives against independent host computations (MAGMA-style: each routine's
// residual or orthogonality error is asserted). Every primitive is covered by the conformance
// suite (tests/backend_conformance.hpp, run by test_conformance.cpp); what stays here goes
// beyond it: the randomized SVD on a noisy spectrum against the exact one.
#include <gtest/gtest.h>

#include <cmath>

#include "core/common.hpp"
#include "dcalign/backend.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::frob;
using testing::frob_diff;
using testing::mul;

template <typename T>
class Primitive : public ::testing::Test {
 protected:
  std::shared_ptr<Backend> backend = make_backend(Device::cpu);
  Primitives<T>& p() { return backend->primitives<T>(); }
  static double tol() { return std::is_same_v<T, double> ? 1e-11 : 2e-4; }
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Primitive, Precisions);

// Largest principal angle sine between the column spaces of two orthonormal bases:
// ||(I - U U^T) W||_2 <= ||(I - U U^T) W||_F.
double sin_angle(const Matrix<double>& U, const Matrix<double>& W) {
  const Matrix<double> proj = mul(U, mul(U, W, true, false));
  return frob_diff(W, proj);
}

TYPED_TEST(Primitive, RandomizedTopKMatchesExactOnLowRankPlusNoise) {
  using T = TypeParam;
  Rng rng(3);
  const index_t m = 300, n = 200, k = 8;
  // W = U diag(s) V^T + 1e-3 N with a clear gap after the k-th singular value.
  Matrix<double> U0 = random_orthogonal<double>(m, rng), V0 = random_orthogonal<double>(n, rng);
  Matrix<double> W(m, n);
  for (index_t j = 0; j < k; ++j)
    for (index_t c = 0; c < n; ++c)
      for (index_t r = 0; r < m; ++r) W(r, c) += (10.0 - j) * U0(r, j) * V0(c, j);
  for (index_t i = 0; i < W.size(); ++i) W.data()[i] += 1e-3 * rng.normal();
  const Matrix<T> Wt = testing::convert<T>(W);
  Matrix<T> Ue(m, k), Ve(n, k), Ur(m, k), Vr(n, k);
  std::vector<T> se(k), sr(k);
  SvdOptions rnd;
  rnd.algorithm = SvdAlgorithm::randomized;
  rnd.seed = 11;
  this->p().svd_topk(Wt.view(), k, se.data(), Ue.view(), Ve.view());
  core::topk_svd(this->p(), MatrixView<const T>(Wt.view()), k, rnd, sr.data(), Ur.view(),
                 Vr.view());
  const auto ue = testing::to_double(Ue), ur = testing::to_double(Ur);
  EXPECT_LE(testing::orthogonality_error(ur), 1e3 * testing::eps<T>());
  EXPECT_LE(sin_angle(ue, ur), 1e-3);
  EXPECT_LE(sin_angle(testing::to_double(Ve), testing::to_double(Vr)), 1e-3);
  for (index_t j = 0; j < k; ++j) EXPECT_NEAR(se[j], sr[j], 1e-4 * se[0]);
  // Exact: W V = U S.
  const auto wv = mul(W, testing::to_double(Ve));
  for (index_t j = 0; j < k; ++j)
    for (index_t r = 0; r < m; ++r) EXPECT_NEAR(wv(r, j), se[j] * ue(r, j), 1e2 * this->tol() * 10);
  // Without power iterations the sketch is less accurate, but oversampling keeps it close.
  const double with_power = sin_angle(ue, ur);
  rnd.power_iterations = 0;
  core::topk_svd(this->p(), MatrixView<const T>(Wt.view()), k, rnd, sr.data(), Ur.view(),
                 Vr.view());
  const double without = sin_angle(ue, testing::to_double(Ur));
  EXPECT_LE(without, 0.05);
  EXPECT_LT(with_power, without);
}

}  // namespace
}  // namespace dcalign
