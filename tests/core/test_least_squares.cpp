// The QR route of the batched least squares (src/core/least_squares.cpp), which the CUDA
// backend takes, run here on the CPU backend against its SVD route (Primitives::lstsq_batched):
// the same G_k to the conditioning of the problem, rank ratios that bound the exact ones from
// below by at most a factor l, and exact ratios for the users at or below the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/common.hpp"
#include "dcalign/random.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::eps;

template <typename T>
class LeastSquaresQr : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LeastSquaresQr, Precisions);

// c users of a x l anchors with condition numbers kappa[k] (geometric singular values) and a
// target Z that is not in any user's column span.
template <typename T>
struct Problem {
  Stack<T> A;
  Matrix<T> Z;
};

template <typename T>
Problem<T> problem(index_t a, index_t l, const std::vector<double>& kappa, std::uint64_t seed) {
  Rng rng(seed);
  const index_t c = static_cast<index_t>(kappa.size());
  Problem<T> pr{Stack<T>(c, a, l), Matrix<T>(a, l)};
  for (index_t k = 0; k < c; ++k) {
    const std::vector<T> v = testing::conditioned_values<T>(a, l, kappa[k], rng);
    std::copy(v.begin(), v.end(), pr.A[k].data());
  }
  for (index_t i = 0; i < pr.Z.size(); ++i) pr.Z.data()[i] = static_cast<T>(rng.normal());
  return pr;
}

template <typename T>
double rel_diff(MatrixView<const T> x, MatrixView<const T> y) {
  double d = 0, n = 0;
  for (index_t j = 0; j < x.cols(); ++j)
    for (index_t i = 0; i < x.rows(); ++i) {
      const double e = double(x(i, j)) - double(y(i, j));
      d += e * e;
      n += double(y(i, j)) * double(y(i, j));
    }
  return std::sqrt(d / n);
}

TYPED_TEST(LeastSquaresQr, MatchesTheSvdRouteAndBoundsTheRatios) {
  using T = TypeParam;
  const index_t a = 300, l = 12;
  const std::vector<double> kappa = {1.0, 10.0, 100.0, 1e3};
  const Problem<T> pr = problem<T>(a, l, kappa, 41);
  const index_t c = pr.A.count();
  auto backend = make_backend(Device::cpu);
  auto& p = backend->primitives<T>();
  ASSERT_FALSE(core::qr_least_squares_preferred(p));  // the CPU keeps the SVD route
  Stack<T> Gs(c, l, l), Gq(c, l, l);
  const double tol = double(l) * eps<T>();
  const auto exact = p.lstsq_batched(pr.A.view(), pr.Z.view(), Gs.view());
  const auto bound = core::least_squares_qr(p, pr.A.view(), pr.Z.view(), Gq.view(), tol);
  ASSERT_EQ(bound.size(), static_cast<size_t>(c));
  for (index_t k = 0; k < c; ++k) {
    SCOPED_TRACE("user " + std::to_string(k) + ", kappa " + std::to_string(kappa[k]));
    // Both backward stable; Z far from the span: the solutions' forward errors are
    // O(kappa^2 eps) relative (the LS problem's own condition). 4 l kappa^2 eps covers both.
    EXPECT_LE(rel_diff<T>(Gq[k], Gs[k]), 4.0 * double(l) * kappa[k] * kappa[k] * eps<T>());
    // The ratio: the polar iteration's bound, between exact / l and exact.
    const double e = double(exact[k]), b = double(bound[k]);
    EXPECT_NEAR(e, 1.0 / kappa[k], 1e-3 / kappa[k] + 50 * eps<T>());
    EXPECT_LE(b, e * (1 + 1e-3));
    EXPECT_GE(b, e / double(l) * (1 - 1e-3));
  }
}

// A user below the rank tolerance gets its exact ratio (the SVD path inside the polar step), and
// one with an exactly dependent column a ratio at rounding level; G stays finite either way (the
// caller refuses the user).
TYPED_TEST(LeastSquaresQr, DoubtfulUsersGetExactRatios) {
  using T = TypeParam;
  const index_t a = 200, l = 8;
  const double weak = std::is_same_v<T, float> ? 1e-7 : 1e-15;  // below l eps
  Problem<T> pr = problem<T>(a, l, {10.0, 1.0 / weak, 10.0}, 43);
  auto backend = make_backend(Device::cpu);
  auto& p = backend->primitives<T>();
  Stack<T> Gs(3, l, l), Gq(3, l, l);
  const double tol = double(l) * eps<T>();
  const StackView<const T> A(pr.A.view());
  const MatrixView<const T> Z(pr.Z.view());
  const auto exact = p.lstsq_batched(A, Z, Gs.view());
  const auto got = core::least_squares_qr(p, A, Z, Gq.view(), tol);
  EXPECT_LE(double(got[1]), tol);
  // exact singular values of R_1 against those of A_1: equal up to the QR's backward error,
  // eps ||A|| absolute on sigma_min (relative to sigma_max: eps).
  EXPECT_NEAR(double(got[1]), double(exact[1]), 20 * eps<T>());
  EXPECT_GT(double(got[0]), 0.1 / double(l));
  // An exactly dependent column: a ratio at rounding level, and no Inf or NaN in G.
  for (index_t i = 0; i < a; ++i) pr.A(2, i, l - 1) = pr.A(2, i, 0);
  const auto dep = core::least_squares_qr(p, A, Z, Gq.view(), tol);
  EXPECT_LE(double(dep[2]), tol);
  for (index_t i = 0; i < Gq.size(); ++i) ASSERT_TRUE(std::isfinite(double(Gq.data()[i])));
}

}  // namespace
}  // namespace dcalign
