// The Gram route of the top-k SVD (src/core/spectral.cpp) and GOPP's Gram form
// (src/core/gopp.cpp): the singular triplets of known spectra on tall and wide matrices, the
// fallback to the exact SVD past sigma_1 / sigma_k = 100, the methods' agreement with the exact
// SVD, and GOPP's objective history against a host alternation written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/common.hpp"
#include "dcalign/align.hpp"
#include "dcalign/random.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::eps;
using testing::frob_diff;
using testing::mul;
using testing::to_double;

/// W = U diag(s) V^T (m x n) with s_j = kappa^(-j/(p-1)), p = min(m, n); U, V orthonormal.
struct KnownW {
  Matrix<double> W, U, V;
  std::vector<double> s;
};
KnownW known(index_t m, index_t n, double kappa, std::uint64_t seed) {
  Rng rng(seed);
  const index_t p = std::min(m, n);
  KnownW k;
  const auto qu = random_orthogonal<double>(m, rng), qv = random_orthogonal<double>(n, rng);
  k.U = Matrix<double>(m, p);
  k.V = Matrix<double>(n, p);
  for (index_t j = 0; j < p; ++j) {
    for (index_t i = 0; i < m; ++i) k.U(i, j) = qu(i, j);
    for (index_t i = 0; i < n; ++i) k.V(i, j) = qv(i, j);
    k.s.push_back(p == 1 ? 1.0 : std::pow(kappa, -double(j) / double(p - 1)));
  }
  Matrix<double> us = k.U;
  for (index_t j = 0; j < p; ++j)
    for (index_t i = 0; i < m; ++i) us(i, j) *= k.s[j];
  k.W = mul(us, k.V, false, true);
  return k;
}

template <typename T>
class Spectral : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Spectral, Precisions);

// Tall (K = W^T W) and wide (K = W W^T): the values, orthonormal U and V, U^T W V = diag(s)
// (pairing and signs), all within the accuracy the Gram route promises for kappa_k <= 8.
TYPED_TEST(Spectral, GramRouteFindsTheKnownTripletsTallAndWide) {
  using T = TypeParam;
  auto backend = make_backend(Device::cpu);
  auto& p = backend->primitives<T>();
  for (const auto& [m, n, k] :
       {std::tuple<index_t, index_t, index_t>{60, 24, 5}, {24, 60, 5}, {17, 17, 17}, {40, 1, 1}}) {
    SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + ", k " + std::to_string(k));
    const KnownW kn = known(m, n, 8.0, 100 + m + n);
    const Matrix<T> W = testing::convert<T>(kn.W);
    Matrix<T> U(m, k), V(n, k);
    std::vector<T> s(static_cast<size_t>(k));
    SvdOptions o;
    o.algorithm = SvdAlgorithm::gram;
    const core::SvdPath path = core::topk_svd(p, W.view(), k, o, s.data(), U.view(), V.view());
    const double ratio = kn.s[0] / kn.s[static_cast<size_t>(k - 1)];
    ASSERT_EQ(path.algorithm, SvdAlgorithm::gram) << path.describe();
    EXPECT_EQ(path.describe(), "gram");
    // Eigenvalues of K within O(n eps ||W||^2): sigma_j within that over 2 sigma_j.
    const double size = double(std::max(m, n));
    for (index_t j = 0; j < k; ++j) EXPECT_NEAR(s[j], kn.s[j], 4 * size * eps<T>() / kn.s[j]) << j;
    EXPECT_NEAR(path.ratio, ratio, 1e-3 * ratio);
    const auto u = to_double(U.view()), v = to_double(V.view());
    // Orthonormal to rounding (the re-orthonormalising QR on the W-side factor).
    EXPECT_LE(testing::orthogonality_error(u), 20 * size * eps<T>());
    EXPECT_LE(testing::orthogonality_error(v), 20 * size * eps<T>());
    // U^T W V = diag(s): the Gram bound eps sigma_1^2 / gap(sigma^2) times kappa^2 slack.
    Matrix<double> d = mul(mul(u, kn.W, true, false), v);
    Matrix<double> want(k, k);
    for (index_t j = 0; j < k; ++j) want(j, j) = s[j];
    EXPECT_LE(frob_diff(d, want), 50 * size * eps<T>() * ratio * ratio) << "pairing or signs";
  }
}

// The sign convention: every singular vector pair comes out with u_j^T r >= 0 for the fixed
// probe r, whichever route ran and whatever sign LAPACK gave it.
TYPED_TEST(Spectral, SignsAreCanonicalWhateverTheRoute) {
  using T = TypeParam;
  auto backend = make_backend(Device::cpu);
  auto& p = backend->primitives<T>();
  const index_t m = 40, n = 10, k = 4;
  const KnownW kn = known(m, n, 10.0, 3);
  const Matrix<T> W = testing::convert<T>(kn.W);
  std::vector<Matrix<double>> Us, Vs;
  for (SvdAlgorithm a : {SvdAlgorithm::gram, SvdAlgorithm::exact}) {
    Matrix<T> U(m, k), V(n, k);
    std::vector<T> s(static_cast<size_t>(k));
    SvdOptions o;
    o.algorithm = a;
    core::topk_svd(p, W.view(), k, o, s.data(), U.view(), V.view());
    Us.push_back(to_double(U.view()));
    Vs.push_back(to_double(V.view()));
    // Negating a pair and canonicalising again restores it exactly.
    Matrix<T> U2 = U, V2 = V;
    for (index_t i = 0; i < m; ++i) U2(i, 1) = -U2(i, 1);
    for (index_t i = 0; i < n; ++i) V2(i, 1) = -V2(i, 1);
    core::canonical_signs(p, U2.view(), V2.view());
    EXPECT_EQ(frob_diff(to_double(U2.view()), to_double(U.view())), 0.0);
    EXPECT_EQ(frob_diff(to_double(V2.view()), to_double(V.view())), 0.0);
  }
  // The two routes agree to their accuracy, signs included (without the convention a column
  // of one could be the negative of the other's: a difference of 2).
  const double tol = std::is_same_v<T, float> ? 1e-3 : 1e-9;
  EXPECT_LE(frob_diff(Us[0], Us[1]), tol);
  EXPECT_LE(frob_diff(Vs[0], Vs[1]), tol);
}

// Past sigma_1 / sigma_k = 100 the Gram route would lose more than two digits against the exact
// SVD: it falls back, says so, and the result is the exact SVD's.
TYPED_TEST(Spectral, GramRouteFallsBackToTheExactSvdWhenIllConditioned) {
  using T = TypeParam;
  auto backend = make_backend(Device::cpu);
  auto& p = backend->primitives<T>();
  const index_t m = 50, n = 12, k = 12;
  const KnownW kn = known(m, n, 1e3, 7);  // sigma_1 / sigma_12 = 1000
  const Matrix<T> W = testing::convert<T>(kn.W);
  Matrix<T> U(m, k), Ue(m, k);
  std::vector<T> s(static_cast<size_t>(k)), se(static_cast<size_t>(k));
  SvdOptions o;
  o.algorithm = SvdAlgorithm::gram;
  const core::SvdPath path = core::topk_svd(p, W.view(), k, o, s.data(), U.view(), MatrixView<T>());
  EXPECT_EQ(path.algorithm, SvdAlgorithm::exact);
  EXPECT_TRUE(path.gram_fallback);
  EXPECT_NE(path.describe().find("gram fallback"), std::string::npos) << path.describe();
  EXPECT_GT(path.ratio, 100.0);
  p.svd_topk(W.view(), k, se.data(), Ue.view(), MatrixView<T>());
  core::canonical_signs(p, Ue.view(), MatrixView<T>());  // topk_svd's sign convention
  EXPECT_EQ(s, se);
  EXPECT_EQ(to_double(U.view()).data()[0], to_double(Ue.view()).data()[0]);
  EXPECT_EQ(frob_diff(to_double(U.view()), to_double(Ue.view())), 0.0);
  // At k = 6 the same matrix has sigma_1 / sigma_6 = 1000^(5/11) < 100: the Gram route runs.
  std::vector<T> s6(6);
  o.algorithm = SvdAlgorithm::gram;
  EXPECT_EQ(
      core::topk_svd(p, W.view(), 6, o, s6.data(), MatrixView<T>(), MatrixView<T>()).algorithm,
      SvdAlgorithm::gram);
}

// Entries near the top of the range: W is finite but W^T W overflows. The Gram route detects it
// and the exact SVD (which scales W internally) runs, with the same vectors as at a normal scale.
TYPED_TEST(Spectral, OverflowingGramFallsBackToTheExactSvd) {
  using T = TypeParam;
  auto backend = make_backend(Device::cpu);
  auto& p = backend->primitives<T>();
  const index_t m = 30, n = 6, k = 3;
  const KnownW kn = known(m, n, 4.0, 11);
  const double big = std::is_same_v<T, double> ? 1e160 : 1e20;  // squares overflow T
  Matrix<double> wb = kn.W;
  for (index_t q = 0; q < wb.size(); ++q) wb.data()[q] *= big;
  const Matrix<T> W = testing::convert<T>(wb);
  Matrix<T> U(m, k);
  std::vector<T> s(static_cast<size_t>(k));
  SvdOptions o;
  o.algorithm = SvdAlgorithm::gram;
  const core::SvdPath path = core::topk_svd(p, W.view(), k, o, s.data(), U.view(), MatrixView<T>());
  EXPECT_TRUE(path.gram_fallback) << path.describe();
  EXPECT_EQ(path.algorithm, SvdAlgorithm::exact);
  for (index_t j = 0; j < k; ++j) EXPECT_NEAR(s[j] / big, kn.s[j], 1e-4) << j;
  // Same subspace as the known U: ||U U^T - U* U*^T|| small.
  Matrix<double> ustar(m, k);
  for (index_t j = 0; j < k; ++j)
    for (index_t i = 0; i < m; ++i) ustar(i, j) = kn.U(i, j);
  const auto u = to_double(U.view());
  EXPECT_LE(frob_diff(mul(u, u, false, true), mul(ustar, ustar, false, true)), 1e-4);
}

// Every method that needs U_1 gives the same alignment with the Gram route as with the exact
// SVD: G_i G_0^T is independent of the signs of U_1's columns (G_i -> G_i D for OPP, LS and
// GOPP; Kawakami's QR-SVD form likewise), and the report names the route.
TYPED_TEST(Spectral, MethodsAgreeWithTheExactSvd) {
  using T = TypeParam;
  const index_t c = 5, l = 4;
  const auto anchors = testing::released_anchors<T>(
      testing::make_synthetic(80, 9, l, c, SpanCondition::diff_span, 31));
  for (Method method : {Method::opp, Method::imakura, Method::gopp, Method::kawakami}) {
    SCOPED_TRACE(to_string(method));
    AlignOptions o;
    o.method = method;
    o.svd.algorithm = SvdAlgorithm::gram;
    const auto g = align(anchors, o);
    o.svd.algorithm = SvdAlgorithm::exact;
    const auto e = align(anchors, o);
    EXPECT_EQ(g.report.svd, "gram");
    EXPECT_EQ(e.report.svd, "exact");
    const double tol = std::is_same_v<T, double> ? 1e-10 : 2e-3;
    const auto g0 = to_double(g.G[0]), e0 = to_double(e.G[0]);
    for (index_t i = 0; i < c; ++i) {
      const auto gi = to_double(g.G[i]), ei = to_double(e.G[i]);
      EXPECT_LE(frob_diff(mul(gi, g0, false, true), mul(ei, e0, false, true)),
                tol * (1 + testing::frob(mul(ei, e0, false, true))))
          << "user " << i;
    }
    EXPECT_NEAR(g.report.objective, e.report.objective, tol * (1 + std::abs(e.report.objective)));
  }
}

// GOPP iterates on K = W^T W when c l <= a. Its objective history must match the alternation
// written directly here (Z -> G_i = polar(A_i^T Z) -> Z = mean A_i G_i, f = sum ||A_i G_i - Z||^2
// evaluated from its definition), started from the same Z: the library's U_1.
TEST(GoppGramForm, ObjectiveHistoryMatchesADirectAlternation) {
  const index_t c = 4, l = 3, a = 40;  // c l = 12 <= a: the Gram form
  const auto anchors = testing::released_anchors<double>(
      testing::make_synthetic(a, 7, l, c, SpanCondition::diff_span, 5));
  AlignOptions o;
  o.method = Method::gopp;
  o.gopp.tolerance = 0;  // run every iteration
  o.gopp.max_iterations = 6;
  const auto res = align(anchors, o);
  ASSERT_EQ(res.report.objective_history.size(), 6u);

  auto backend = make_backend(Device::cpu);
  auto& p = backend->f64();
  Matrix<double> Z(a, l);
  std::vector<double> s(static_cast<size_t>(l));
  Matrix<double> W(a, c * l);
  for (index_t i = 0; i < c; ++i)
    for (index_t j = 0; j < l; ++j)
      for (index_t r = 0; r < a; ++r) W(r, i * l + j) = anchors(i, r, j);
  p.svd_topk(W.view(), l, s.data(), Z.view(), MatrixView<double>());
  for (int it = 0; it < 6; ++it) {
    Stack<double> M(c, l, l), G(c, l, l);
    for (index_t i = 0; i < c; ++i) {
      const auto m = mul(to_double(anchors[i]), Z, true, false);
      for (index_t j = 0; j < l; ++j)
        for (index_t r = 0; r < l; ++r) M(i, r, j) = m(r, j);
    }
    p.polar_batched(M.view(), false, G.view());  // one SVD per user: not the library's path
    Matrix<double> Zn(a, l);
    for (index_t i = 0; i < c; ++i) {
      const auto ag = mul(to_double(anchors[i]), to_double(G[i]));
      for (index_t k = 0; k < a * l; ++k) Zn.data()[k] += ag.data()[k] / double(c);
    }
    double f = 0;
    for (index_t i = 0; i < c; ++i) {
      const auto ag = mul(to_double(anchors[i]), to_double(G[i]));
      f += std::pow(frob_diff(ag, Zn), 2);
    }
    Z = Zn;
    EXPECT_NEAR(res.report.objective_history[static_cast<size_t>(it)], f, 1e-9 * (1 + f))
        << "iteration " << it;
  }
  // The returned target is the mean of the final A_i G_i, up to the signs of U_1's columns
  // (the library's start comes from the Gram route, the reference's from the exact SVD).
  Matrix<double> zt = to_double(res.target.view());
  for (index_t j = 0; j < l; ++j) {
    double dot = 0;
    for (index_t r = 0; r < a; ++r) dot += zt(r, j) * Z(r, j);
    if (dot < 0)
      for (index_t r = 0; r < a; ++r) zt(r, j) = -zt(r, j);
  }
  EXPECT_LE(frob_diff(zt, Z), 1e-9 * (1 + testing::frob(Z)));
}

}  // namespace
}  // namespace dcalign
