// The papers' theorems on synthetic collaborations, for float and double, on every backend
// available here (the CUDA cases run where a GPU is present; see tests/cuda).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "dcalign/align.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::convert;
using testing::frob;
using testing::frob_diff;
using testing::mul;
using testing::to_double;

struct Shape {
  index_t a, m, l, c;
};

// Random shapes from a fixed seed plus the edge cases c = 1 and l = a.
std::vector<Shape> shapes() {
  std::vector<Shape> s = {{40, 12, 6, 1}, {9, 14, 9, 3}, {1, 3, 1, 2}, {30, 10, 1, 4}};
  Rng rng(2024);
  for (int k = 0; k < 6; ++k) {
    const index_t l = 1 + static_cast<index_t>(rng.below(10));
    const index_t m = l + static_cast<index_t>(rng.below(20));
    const index_t a = std::max(m, l) + static_cast<index_t>(rng.below(100));
    const index_t c = 1 + static_cast<index_t>(rng.below(6));
    s.push_back({a, m, l, c});
  }
  return s;
}

std::string describe(const Shape& s) {
  return "(a, m, l, c) = (" + std::to_string(s.a) + ", " + std::to_string(s.m) + ", " +
         std::to_string(s.l) + ", " + std::to_string(s.c) + ")";
}

template <typename T>
class AlignTheorems : public ::testing::Test {
 protected:
  // Tolerances: double 1e-10 absolute on F_i G_i, whose entries are O(1) because F_i
  // has orthonormal columns and G_i is orthogonal; float 1e-4 relative. Both sit a few orders
  // above eps(T) * cond(A_i^T A_1), the forward error bound of a polar factor, for the
  // moderately conditioned anchors drawn here (cond(A_i) < 50).
  static double concord_tol() { return std::is_same_v<T, double> ? 1e-10 : 1e-4; }
  static double orth_tol() { return std::is_same_v<T, double> ? 1e-12 : 1e-5; }
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AlignTheorems, Precisions);

// Theorem 5.3: under SameSpan-Orth, G_i = E_i^T O and F_1 G_1 = ... = F_c G_c. The synthetic
// bases are F_i = V E_i, so in the theorem's terms F_i = F_1 (E_1^T E_i) and G_i = E_i^T E_1 O.
TYPED_TEST(AlignTheorems, OdcRecoversSecretRotationsUnderSameSpanOrth) {
  using T = TypeParam;
  for (const Shape& sh : shapes()) {
    SCOPED_TRACE(describe(sh));
    auto syn = testing::make_synthetic(sh.a, sh.m, sh.l, sh.c, SpanCondition::same_span_orth, 7);
    auto anchors = testing::released_anchors<T>(syn);
    Rng rng(99);
    AlignOptions opts;
    opts.rotation = TargetRotation::supplied;
    opts.rotation_matrix = random_orthogonal<double>(sh.l, rng);
    auto res = align(anchors, opts);
    const auto& O = opts.rotation_matrix;
    const double scale = std::is_same_v<T, double> ? 1.0 : std::sqrt(double(sh.l));
    EXPECT_LE(res.report.orthogonality_error, this->orth_tol() * std::sqrt(double(sh.l)));
    const Matrix<double> F1G1 = mul(syn.F[0], to_double(res.G[0]));
    for (index_t i = 0; i < sh.c; ++i) {
      const Matrix<double> Gi = to_double(res.G[i]);
      EXPECT_LE(testing::orthogonality_error(Gi), this->orth_tol() * std::sqrt(double(sh.l)));
      // G_i = E_i^T O (eq. 74) with the theorem's E_i.
      EXPECT_LE(frob_diff(Gi, mul(syn.E[i], mul(syn.E[0], O), true, false)),
                this->concord_tol() * scale)
          << "user " << i;
      EXPECT_LE(frob_diff(mul(syn.F[i], Gi), F1G1), this->concord_tol() * scale) << "user " << i;
    }
    // With exact alignment the objective vanishes (relative to ||A_1||^2).
    const double a1 = frob(to_double(anchors.matrix(0)));
    EXPECT_LE(res.report.objective, 1e3 * testing::eps<T>() * a1 * a1 * sh.c);
  }
}

// Changing O multiplies every F_i G_i by the same orthogonal matrix O_1^T O_2.
TYPED_TEST(AlignTheorems, OdcChangeOfRotationIsCommonOrthogonalFactor) {
  using T = TypeParam;
  const Shape sh{80, 20, 8, 5};
  auto syn = testing::make_synthetic(sh.a, sh.m, sh.l, sh.c, SpanCondition::same_span_orth, 11);
  auto anchors = testing::released_anchors<T>(syn);
  AlignOptions o1, o2;
  o1.seed = 1;
  o2.seed = 2;  // Haar draws from different seeds
  auto r1 = align(anchors, o1), r2 = align(anchors, o2);
  const Matrix<double> Q = mul(to_double(r1.G[0]), to_double(r2.G[0]), true, false);
  EXPECT_GT(frob_diff(Q, Matrix<double>::identity(sh.l)), 0.1) << "seeds gave the same O";
  EXPECT_LE(testing::orthogonality_error(Q), 10 * this->orth_tol());
  for (index_t i = 0; i < sh.c; ++i) {
    const auto FG1 = mul(syn.F[i], to_double(r1.G[i])), FG2 = mul(syn.F[i], to_double(r2.G[i]));
    EXPECT_LE(frob_diff(mul(FG1, Q), FG2), this->concord_tol() * std::sqrt(double(sh.l)) * 10)
        << "user " << i;
  }
}

// Theorem 4.3: under SameSpan (non-orthonormal F_i), Imakura-DC is weakly concordant for any
// invertible R.
TYPED_TEST(AlignTheorems, ImakuraWeakConcordanceUnderSameSpan) {
  using T = TypeParam;
  for (RightFactor right : {RightFactor::identity, RightFactor::uniform}) {
    for (const Shape& sh : {Shape{60, 15, 5, 4}, Shape{30, 8, 3, 1}, Shape{6, 10, 6, 3}}) {
      SCOPED_TRACE(describe(sh) + (right == RightFactor::identity ? " R = I" : " R uniform"));
      auto syn = testing::make_synthetic(sh.a, sh.m, sh.l, sh.c, SpanCondition::same_span, 5);
      auto anchors = testing::released_anchors<T>(syn);
      AlignOptions opts;
      opts.method = Method::imakura;
      opts.right = right;
      opts.seed = 3;
      auto res = align(anchors, opts);
      const auto F1G1 = mul(syn.F[0], to_double(res.G[0]));
      // The error grows with cond(E_i) (Unif[0,1) mixing, not orthogonal): allow a margin of
      // 1e3 * eps * cond-ish scale relative to ||F_1 G_1||.
      const double tol = (std::is_same_v<T, double> ? 1e-8 : 5e-3) * frob(F1G1);
      for (index_t i = 1; i < sh.c; ++i)
        EXPECT_LE(frob_diff(mul(syn.F[i], to_double(res.G[i])), F1G1), tol) << "user " << i;
      // The target is U R with U orthonormal: A_i G_i = Z exactly under the assumption.
      const double zn = frob(to_double(res.target));
      EXPECT_LE(std::sqrt(res.report.objective), tol * zn + 1e-12);
    }
  }
}

// Kawakami-DC: sum_i ||A_i g_ik||^2 = 1 for every column k, in both forms, checked with an
// independent host computation; the two forms agree up to one sign per column.
TYPED_TEST(AlignTheorems, KawakamiConstraintAndFormsAgree) {
  using T = TypeParam;
  const Shape sh{70, 16, 4, 5};
  // DiffSpan: the top-l singular values of [Q_1 ... Q_c] are distinct, so the columns are
  // determined up to sign (under SameSpan they coincide and only the subspace is defined).
  auto syn = testing::make_synthetic(sh.a, sh.m, sh.l, sh.c, SpanCondition::diff_span, 21);
  auto anchors = testing::released_anchors<T>(syn);
  Stack<T> G[2];
  for (int form = 0; form < 2; ++form) {
    AlignOptions opts;
    opts.method = Method::kawakami;
    opts.kawakami_form = form == 0 ? KawakamiForm::qr_svd : KawakamiForm::eigen;
    auto res = align(anchors, opts);
    const double tol = std::is_same_v<T, double> ? 1e-10 : 1e-3;
    for (index_t k = 0; k < sh.l; ++k) {
      double s = 0;
      for (index_t i = 0; i < sh.c; ++i) {
        const auto y = mul(to_double(anchors.matrix(i)), to_double(res.G[i]));
        for (index_t r = 0; r < sh.a; ++r) s += y(r, k) * y(r, k);
      }
      EXPECT_NEAR(s, 1.0, tol) << "form " << form << ", column " << k;
    }
    EXPECT_LE(res.report.constraint_error, tol);
    G[form] = res.G;
  }
  if (!std::is_same_v<T, double>) return;  // the float eigen form is too inaccurate to compare
  for (index_t k = 0; k < sh.l; ++k) {
    double dot = 0, n0 = 0, n1 = 0;
    for (index_t i = 0; i < sh.c; ++i)
      for (index_t r = 0; r < sh.l; ++r) {
        dot += G[0](i, r, k) * G[1](i, r, k);
        n0 += G[0](i, r, k) * G[0](i, r, k);
        n1 += G[1](i, r, k) * G[1](i, r, k);
      }
    const double sign = dot < 0 ? -1.0 : 1.0;
    double diff = 0;
    for (index_t i = 0; i < sh.c; ++i)
      for (index_t r = 0; r < sh.l; ++r)
        diff = std::max(diff, std::abs(G[0](i, r, k) - sign * G[1](i, r, k)));
    EXPECT_LE(diff, 1e-7 * std::sqrt(n0)) << "column " << k;
    EXPECT_NEAR(n0, n1, 1e-7 * n0);
  }
}

// GOPP: the objective never increases, and never ends above ODC's on the same input.
TYPED_TEST(AlignTheorems, GoppMonotoneAndNotAboveOdc) {
  using T = TypeParam;
  const Shape sh{90, 25, 6, 6};
  auto syn = testing::make_synthetic(sh.a, sh.m, sh.l, sh.c, SpanCondition::diff_span_orth, 31);
  auto anchors = testing::released_anchors<T>(syn);
  AlignOptions odc;
  odc.evaluate_consensus = true;
  auto ref = align(anchors, odc);
  for (GoppInit init : {GoppInit::spectral, GoppInit::odc}) {
    SCOPED_TRACE(init == GoppInit::spectral ? "spectral start" : "ODC start");
    AlignOptions opts;
    opts.method = Method::gopp;
    opts.gopp.init = init;
    opts.gopp.tolerance = std::is_same_v<T, double> ? 1e-12 : 1e-6;
    auto res = align(anchors, opts);
    const auto& h = res.report.objective_history;
    ASSERT_GE(h.size(), 2u);
    // Rounding slack: the objective is a difference of sums of squares of size ||W||^2.
    const double slack = 50 * testing::eps<T>() * h.front() * sh.c;
    for (size_t t = 1; t < h.size(); ++t) EXPECT_LE(h[t], h[t - 1] + slack) << "iteration " << t;
    EXPECT_LE(res.report.objective, ref.report.objective + slack);
    EXPECT_LE(res.report.objective, ref.report.consensus_objective + slack);
    // The reported objective (from the final Z) matches the history's last entry.
    EXPECT_NEAR(res.report.objective, h.back(), 1e-6 * h.front() + slack);
    EXPECT_LE(res.report.orthogonality_error, this->orth_tol() * std::sqrt(double(sh.l)));
  }
}

// The report's derived objective (ODC: ||A_i||^2 + ||Z||^2 - 2 tr(G_i^T M_i); GOPP: from its
// mean target) and the consensus objective against direct sums over A_i G_i computed here in
// double: the values the evaluation produced before it derived them.
TYPED_TEST(AlignTheorems, EvaluationMatchesDirectSums) {
  using T = TypeParam;
  const Shape sh{70, 18, 6, 5};
  auto syn = testing::make_synthetic(sh.a, sh.m, sh.l, sh.c, SpanCondition::diff_span_orth, 41);
  auto anchors = testing::released_anchors<T>(syn);
  for (Method m : {Method::odc, Method::gopp, Method::imakura, Method::kawakami}) {
    SCOPED_TRACE(to_string(m));
    AlignOptions opts;
    opts.method = m;
    opts.evaluate_consensus = true;
    auto res = align(anchors, opts);
    std::vector<Matrix<double>> Y;
    Matrix<double> zbar(sh.a, sh.l);
    double norms = 0;
    for (index_t i = 0; i < sh.c; ++i) {
      const Matrix<double> A = to_double(anchors.matrix(i));
      norms += frob(A) * frob(A);
      Y.push_back(mul(A, to_double(res.G[i])));
      for (index_t k = 0; k < zbar.size(); ++k) zbar.data()[k] += Y.back().data()[k] / sh.c;
    }
    double obj = 0, cons = 0;
    for (const auto& y : Y) {
      const double d =
          m == Method::kawakami ? frob_diff(y, zbar) : frob_diff(y, to_double(res.target));
      obj += d * d;
      cons += frob_diff(y, zbar) * frob_diff(y, zbar);
    }
    // The derived forms cancel terms of size sum_i ||A_i||^2: rounding eps * that, times a
    // small constant for the sums (the direct sums are accurate to eps^2 of it).
    const double slack = 100 * testing::eps<T>() * norms;
    EXPECT_NEAR(res.report.objective, obj, slack + 1e-9 * obj);
    EXPECT_NEAR(res.report.consensus_objective, cons, slack + 1e-9 * cons);
    EXPECT_LE(cons, obj + slack) << "the mean is the best common target";
  }
  AlignOptions plain;
  const auto res = align(anchors, plain);
  EXPECT_TRUE(std::isnan(res.report.consensus_objective)) << "consensus is opt-in for ODC";
  EXPECT_NE(res.report.to_json().find("\"consensus_objective\": null"), std::string::npos);
}

TYPED_TEST(AlignTheorems, SameSeedSameResult) {
  using T = TypeParam;
  auto syn = testing::make_synthetic(50, 12, 5, 4, SpanCondition::diff_span, 8);
  auto anchors = testing::released_anchors<T>(syn);
  for (Method m : {Method::odc, Method::imakura, Method::kawakami, Method::gopp}) {
    AlignOptions opts;
    opts.method = m;
    opts.seed = 77;
    opts.svd.algorithm = SvdAlgorithm::randomized;
    auto r1 = align(anchors, opts), r2 = align(anchors, opts);
    EXPECT_EQ(r1.G.data()[0], r2.G.data()[0]);
    EXPECT_TRUE(std::equal(r1.G.data(), r1.G.data() + r1.G.size(), r2.G.data())) << to_string(m);
  }
}

TEST(AlignReport, JsonHasDocumentedKeys) {
  auto syn = testing::make_synthetic(30, 8, 3, 2, SpanCondition::same_span_orth, 1);
  auto res = align(testing::released_anchors<double>(syn), AlignOptions{});
  const std::string js = res.report.to_json();
  for (const char* key : {"\"method\"", "\"users\"", "\"anchor_rows\"", "\"dim\"", "\"objective\"",
                          "\"orthogonality_error\"", "\"seconds\"", "\"total\"", "\"procrustes\""})
    EXPECT_NE(js.find(key), std::string::npos) << key << " missing in " << js;
  double phases = 0;
  for (const auto& [name, s] : res.report.seconds) phases += s;
  EXPECT_NEAR(phases, res.report.total_seconds, 1e-12);
}

}  // namespace
}  // namespace dcalign
