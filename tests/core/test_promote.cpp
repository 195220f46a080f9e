// Precision promotion (src/core/promote.cpp): a float32 user whose rank test fails because
// float32 arithmetic cannot resolve sigma_min(A_i^T Z), although its float32 inputs determine
// it, is recomputed in float64; a genuinely rank-deficient user still gets the error.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "dcalign/align.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/random.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::eps;

constexpr index_t kA = 1000, kL = 8, kC = 4;
constexpr index_t kWeakUser = 2;

// A float32-representable a x l matrix of standard normals.
Matrix<double> normal_matrix(index_t a, index_t l, std::uint64_t seed) {
  Rng rng(seed);
  Matrix<double> m(a, l);
  for (index_t i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<double>(static_cast<float>(rng.normal()));
  return m;
}

// Users of normal anchors; user kWeakUser's last column is its fourth plus `delta` times noise
// (0: an exactly dependent column), so M_k = A_k^T Z has a sigma ratio of about delta, rounded
// to float32 (the float32 inputs are what every run below sees).
Stack<double> anchors_with_weak_user(double delta) {
  std::vector<Matrix<double>> users;
  for (index_t k = 0; k < kC; ++k) users.push_back(normal_matrix(kA, kL, 300 + k));
  Rng rng(399);
  Matrix<double>& w = users[kWeakUser];
  for (index_t i = 0; i < kA; ++i)
    w(i, kL - 1) = static_cast<double>(static_cast<float>(w(i, 3) + delta * rng.normal()));
  return Stack<double>::from_matrices(users);
}

template <typename T>
Stack<T> cast(const Stack<double>& s) {
  Stack<T> out(s.count(), s.rows(), s.cols());
  for (index_t i = 0; i < s.size(); ++i) out.data()[i] = static_cast<T>(s.data()[i]);
  return out;
}

// max_k ||A_k - B_k||_F / ||B_k||_F over the users `which` (all when empty).
template <typename T>
double rel_diff(const Stack<T>& A, const Stack<double>& B, index_t only = -1) {
  double worst = 0;
  for (index_t k = 0; k < A.count(); ++k) {
    if (only >= 0 && k != only) continue;
    double d = 0, n = 0;
    for (index_t i = 0; i < A.stride(); ++i) {
      const double b = B.data()[k * B.stride() + i], e = double(A.data()[k * A.stride() + i]) - b;
      d += e * e;
      n += b * b;
    }
    worst = std::max(worst, std::sqrt(d / n));
  }
  return worst;
}

// sigma_min / sigma_max of A_k^T Z, in double from the (float-representable) inputs.
double product_ratio(const Stack<double>& A, const Matrix<double>& Z, index_t k) {
  auto backend = make_backend(Device::cpu);
  Matrix<double> M = testing::mul(testing::to_double(A[k]), Z, true, false);
  Stack<double> Ms = Stack<double>::from_matrices({M}), G(1, kL, kL);
  PolarOptions o;
  o.method = PolarMethod::svd;
  const auto info =
      polar_factor(backend->f64(), StackView<const double>(Ms.view()), false, G.view(), o);
  return info.sigma_min[0] / info.sigma_max[0];
}

AlignOptions odc_to(const Matrix<double>& Z) {
  AlignOptions o;
  o.method = Method::odc;
  o.target = Z;
  return o;
}

// The premise: float32's rank test (l eps_f = 9.5e-7) fails for the weak user, float64's
// (l eps_d) does not, and its float32 inputs determine the ratio.
TEST(Promotion, TheWeakUserIsBelowFloatButAboveDoubleResolution) {
  const Stack<double> A = anchors_with_weak_user(2e-7);
  const Matrix<double> Z = normal_matrix(kA, kL, 500);
  const double r = product_ratio(A, Z, kWeakUser);
  EXPECT_LT(r, kL * eps<float>());
  EXPECT_GT(r, 1e6 * kL * eps<double>());
  EXPECT_GT(product_ratio(A, Z, 0), 1e-2);
}

// The promoted G_k is the float64 answer from the float32 inputs, rounded: against float64's
// own run on the same (float-representable) anchors and target it differs by the rounding to
// float32 (u_f relative) plus the float64 runs' difference, about kappa l eps_d = 5e-9 with
// kappa = 5e6; 1e-6 (about 8 eps_f) holds both. Unpromoted, float32's product error
// (sqrt(a) eps_f ||A_k|| ||Z||, 2e-6 relative) moves the weak direction by O(1).
TEST(Promotion, OdcRecomputesTheWeakUserInFloat64) {
  const Stack<double> A = anchors_with_weak_user(2e-7);
  const Matrix<double> Z = normal_matrix(kA, kL, 500);
  const auto ref = align(A, odc_to(Z));
  ASSERT_EQ(ref.report.promoted_users, 0);
  const auto got = align(cast<float>(A), odc_to(Z));
  EXPECT_EQ(got.report.promoted_users, 1);
  EXPECT_LE(rel_diff(got.G, ref.G, kWeakUser), 1e-6);
  // The others as any float32 run: the polar factor's forward error kappa u with kappa < 1e2.
  EXPECT_LE(rel_diff(got.G, ref.G), 1e-4);
  EXPECT_LE(got.report.orthogonality_error, 1e-5);
  // The report's ratio is the float64 one of the promoted user.
  EXPECT_NEAR(got.report.min_rank_ratio, ref.report.min_rank_ratio,
              1e-3 * ref.report.min_rank_ratio);
  // The objective, derived from the products the promotion rounded back, matches float64's.
  EXPECT_NEAR(got.report.objective, ref.report.objective, 1e-4 * ref.report.objective);
  EXPECT_NE(got.report.to_json().find("\"promoted_users\": 1"), std::string::npos);
}

TEST(Promotion, AnExactlyDependentColumnIsStillAnError) {
  const Stack<double> A = anchors_with_weak_user(0.0);
  const Matrix<double> Z = normal_matrix(kA, kL, 500);
  try {
    align(cast<float>(A), odc_to(Z));
    ADD_FAILURE() << "a rank-deficient user was accepted";
  } catch (const InvalidInput& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("user 2: A_i^T Z is numerically rank deficient"), std::string::npos) << m;
    EXPECT_NE(m.find("float64"), std::string::npos) << m;
  }
  // float64 refuses it as before.
  EXPECT_THROW(align(A, odc_to(Z)), InvalidInput);
}

// OPP and GOPP take the same step (their targets U_1 and the GOPP iterates): the weak user is
// promoted instead of refused, and the results match float64's to float32 accuracy (the
// weak direction of M_k moves by eps_f kappa ||Z|| perturbations of the float32 target, so the
// objective, not G_k, is compared).
TEST(Promotion, OppAndGoppPromoteTooAndMatchFloat64) {
  const Stack<double> A = anchors_with_weak_user(2e-7);
  for (Method method : {Method::opp, Method::gopp}) {
    SCOPED_TRACE(to_string(method));
    AlignOptions o;
    o.method = method;
    const auto ref = align(A, o);
    const auto got = align(cast<float>(A), o);
    EXPECT_GE(got.report.promoted_users, 1);
    EXPECT_LE(got.report.orthogonality_error, 1e-5);
    EXPECT_NEAR(got.report.objective, ref.report.objective, 1e-3 * ref.report.objective);
  }
}

// polar_factor itself: a float32 matrix with sigma ratio 3e-7 (below l eps_f) is factored in
// float64 from its float32 entries; the answer is float64's factor of those entries, rounded.
TEST(Promotion, PolarFactorPromotesDoubtfulFloatMatrices) {
  auto backend = make_backend(Device::cpu);
  const index_t l = 8, c = 3;
  Stack<double> M(c, l, l);
  for (index_t k = 0; k < c; ++k) {
    Rng rng = Rng::stream(77, static_cast<std::uint64_t>(k));
    const Matrix<double> U = random_orthogonal<double>(l, rng),
                         V = random_orthogonal<double>(l, rng);
    Matrix<double> US = U;
    for (index_t j = 0; j < l; ++j) {
      const double s = k == 1 ? std::pow(3e-7, double(j) / double(l - 1)) : 1.0 + 0.1 * double(j);
      for (index_t i = 0; i < l; ++i) US(i, j) *= s;
    }
    const Matrix<double> m = testing::mul(US, V, false, true);
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < l; ++i) M[k](i, j) = static_cast<float>(m(i, j));
  }
  Stack<double> Gref(c, l, l);
  PolarOptions o;
  o.method = PolarMethod::svd;  // exact singular values for the reference ratio
  const auto ref =
      polar_factor(backend->f64(), StackView<const double>(M.view()), false, Gref.view(), o);
  const Stack<float> Mf = cast<float>(M);
  for (PolarMethod method : {PolarMethod::iterative, PolarMethod::svd})
    for (bool promote : {true, false}) {
      SCOPED_TRACE(to_string(method) + (promote ? ", promoted" : ", float32 only"));
      o.method = method;
      o.promote = promote;
      Stack<float> G(c, l, l);
      const auto info =
          polar_factor(backend->f32(), StackView<const float>(Mf.view()), false, G.view(), o);
      EXPECT_EQ(info.promoted, promote ? 1 : 0);
      const double d = rel_diff(G, Gref, 1);
      if (promote) {
        EXPECT_LE(d, 1e-6);
        // float64's ratio: exact on the SVD path; on the iterative path the bound
        // 1 / (||M||_F ||M^{-1}||_F), between the exact ratio / l and the exact ratio.
        const double exact = ref.sigma_min[1] / ref.sigma_max[1];
        const double got = double(info.sigma_min[1]) / double(info.sigma_max[1]);
        EXPECT_LE(got, exact * (1 + 1e-3));
        EXPECT_GE(got, (method == PolarMethod::svd ? exact : exact / double(l)) * (1 - 1e-3));
      } else {
        EXPECT_GT(d, 1e-4) << "float32 alone resolves it: the test shows nothing";
      }
      EXPECT_LE(rel_diff(G, Gref, 0), 1e-5);
    }
}

}  // namespace
}  // namespace dcalign
