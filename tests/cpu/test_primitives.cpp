// Backend primitives against independent host computations (MAGMA-style: each routine's
// residual or orthogonality error is asserted).
#include <gtest/gtest.h>

#include <cmath>

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

TYPED_TEST(Primitive, PolarFactorIsOrthogonalAndSymmetrises) {
  using T = TypeParam;
  Rng rng(5);
  const index_t l = 17, c = 9;
  Stack<T> M(c, l, l), G(c, l, l);
  for (index_t i = 0; i < M.size(); ++i) M.data()[i] = static_cast<T>(rng.normal());
  for (bool transposed : {false, true}) {
    auto info = this->p().polar_batched(M.view(), transposed, G.view());
    for (index_t k = 0; k < c; ++k) {
      const auto g = testing::to_double(G[k]);
      Matrix<double> m = testing::to_double(M[k]);
      if (transposed) m = mul(m, Matrix<double>::identity(l), true, false);
      EXPECT_LE(testing::orthogonality_error(g), 10 * this->tol());
      // Polar decomposition M = G H with H symmetric positive definite: G^T M symmetric.
      const auto h = mul(g, m, true, false);
      EXPECT_LE(frob_diff(h, mul(h, Matrix<double>::identity(l), true, false)),
                10 * this->tol() * frob(m));
      for (index_t j = 0; j < l; ++j) EXPECT_GT(h(j, j), 0.0);
      EXPECT_GT(info.sigma_min[k], 0);
      EXPECT_GE(info.sigma_max[k], info.sigma_min[k]);
    }
  }
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
  SvdOptions exact, rnd;
  rnd.algorithm = SvdAlgorithm::randomized;
  rnd.seed = 11;
  this->p().svd_topk(Wt.view(), k, exact, se.data(), Ue.view(), Ve.view());
  this->p().svd_topk(Wt.view(), k, rnd, sr.data(), Ur.view(), Vr.view());
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
  this->p().svd_topk(Wt.view(), k, rnd, sr.data(), Ur.view(), Vr.view());
  const double without = sin_angle(ue, testing::to_double(Ur));
  EXPECT_LE(without, 0.05);
  EXPECT_LT(with_power, without);
}

TYPED_TEST(Primitive, LeastSquaresSolvesNormalEquations) {
  using T = TypeParam;
  Rng rng(9);
  const index_t a = 40, l = 6, c = 3;
  Stack<T> A(c, a, l), G(c, l, l);
  for (index_t i = 0; i < A.size(); ++i) A.data()[i] = static_cast<T>(rng.uniform());
  const Matrix<T> Z = random_uniform<T>(a, l, rng);
  auto ratio = this->p().lstsq_batched(A.view(), Z.view(), G.view());
  for (index_t k = 0; k < c; ++k) {
    const auto ak = testing::to_double(A[k]);
    // A^T (A G - Z) = 0.
    Matrix<double> r = mul(ak, testing::to_double(G[k]));
    const auto z = testing::to_double(Z);
    for (index_t i = 0; i < r.size(); ++i) r.data()[i] -= z.data()[i];
    EXPECT_LE(frob(mul(ak, r, true, false)), this->tol() * 100 * frob(ak) * frob(z));
    EXPECT_GT(ratio[k], 0.0);
  }
}

TYPED_TEST(Primitive, QrFactorsReproduceInput) {
  using T = TypeParam;
  Rng rng(10);
  const index_t a = 25, l = 5, c = 4;
  Stack<T> A(c, a, l), Q(c, a, l), R(c, l, l);
  for (index_t i = 0; i < A.size(); ++i) A.data()[i] = static_cast<T>(rng.normal());
  std::copy(A.data(), A.data() + A.size(), Q.data());
  this->p().qr_batched(Q.view(), R.view());
  for (index_t k = 0; k < c; ++k) {
    const auto q = testing::to_double(Q[k]);
    EXPECT_LE(testing::orthogonality_error(q), this->tol() * 10);
    EXPECT_LE(frob_diff(mul(q, testing::to_double(R[k])), testing::to_double(A[k])),
              this->tol() * 10 * frob(testing::to_double(A[k])));
  }
}

TYPED_TEST(Primitive, GeneralizedEigenResidual) {
  using T = TypeParam;
  if (!std::is_same_v<T, double>) GTEST_SKIP() << "checked in double only";
  Rng rng(12);
  const index_t n = 12, k = 4;
  Matrix<double> X = random_normal<double>(n, n, rng), Y = random_normal<double>(n + 3, n, rng);
  Matrix<double> S = mul(X, X, false, true), B = mul(Y, Y, true, false);
  Matrix<T> St = testing::convert<T>(S), Bt = testing::convert<T>(B), V(n, k);
  std::vector<T> w(k);
  this->p().sygv_smallest(St.view(), Bt.view(), k, w.data(), V.view());
  const auto v = testing::to_double(V);
  const auto sv = mul(S, v), bv = mul(B, v);
  for (index_t j = 0; j < k; ++j) {
    if (j > 0) {
      EXPECT_LE(w[j - 1], w[j]);
    }
    for (index_t i = 0; i < n; ++i) EXPECT_NEAR(sv(i, j), w[j] * bv(i, j), 1e-8 * frob(S));
  }
  EXPECT_LE(frob_diff(mul(v, bv, true, false), Matrix<double>::identity(k)), 1e-10);
}

}  // namespace
}  // namespace dcalign
