// Paper 004's OPP (eqs. 17-19) and RDP (eqs. 24-25): OPP against brute force and GOPP's first
// step; RDP's gradient against finite differences, its descent, convergence, consensus under a
// shared span, full rank, determinism and option checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/common.hpp"
#include "dcalign/align.hpp"
#include "dcalign/aligner.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::frob;
using testing::mul;
using testing::to_double;

template <typename T>
class Opp : public ::testing::Test {
 protected:
  // Orthogonality as for ODC (tests/core/test_align.cpp): a few orders above eps(T) * l.
  static double orth_tol() { return std::is_same_v<T, double> ? 1e-12 : 1e-5; }
  // Slack of the brute-force comparison: rounding of tr(G^T M) with |M| ~ a.
  static double slack(double scale) { return (std::is_same_v<T, double> ? 1e-12 : 1e-5) * scale; }
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Opp, Precisions);

template <typename T>
Stack<T> diffspan_anchors(index_t a, index_t m, index_t l, index_t c, std::uint64_t seed) {
  return testing::released_anchors<T>(
      testing::make_synthetic(a, m, l, c, SpanCondition::diff_span, seed));
}

// ||A G - U||^2 = ||A||^2 + ||U||^2 - 2 tr(G^T M) for orthogonal G with M = A^T U: comparing
// tr(G^T M) over orthogonal G compares the objectives.
double trace_gm(const Matrix<double>& G, const Matrix<double>& M) {
  double s = 0;
  for (index_t i = 0; i < G.size(); ++i) s += G.data()[i] * M.data()[i];
  return s;
}

// l = 2: every orthogonal G is a rotation or a reflection by theta; a grid of 2 x 62832 angles
// finds none better than OPP's G_i, and the grid's best comes within its resolution of it.
TYPED_TEST(Opp, BeatsEveryOrthogonalMatrixOnAGridForL2) {
  using T = TypeParam;
  const index_t c = 3, l = 2;
  auto anchors = diffspan_anchors<T>(30, 5, l, c, 11);
  AlignOptions opts;
  opts.method = Method::opp;
  auto res = align(anchors, opts);
  EXPECT_EQ(res.report.method, "opp");
  const Matrix<double> U = to_double(res.target.view());
  for (index_t i = 0; i < c; ++i) {
    const Matrix<double> A = to_double(anchors[i]);
    const Matrix<double> M = mul(A, U, true, false);
    const double opp = trace_gm(to_double(res.G[i]), M);
    double best = -std::numeric_limits<double>::infinity();
    for (int k = 0; k < 62832; ++k) {
      const double th = k * 1e-4, co = std::cos(th), si = std::sin(th);
      best = std::max(best, trace_gm(Matrix<double>(2, 2, {co, si, -si, co}), M));  // rotation
      best = std::max(best, trace_gm(Matrix<double>(2, 2, {co, si, si, -co}), M));  // reflection
    }
    const double scale = frob(M);
    EXPECT_LE(best, opp + this->slack(scale)) << "user " << i;
    // Grid step 1e-4: the best angle is within 5e-5 of OPP's, a loss of at most 5e-9 |M|.
    EXPECT_GE(best, opp - 1e-7 * scale - this->slack(scale)) << "user " << i;
    EXPECT_LE(testing::orthogonality_error(to_double(res.G[i])), this->orth_tol());
  }
}

// l = 3: 200000 Haar-random orthogonal matrices (both determinant signs), none better.
TYPED_TEST(Opp, BeatsRandomOrthogonalMatricesForL3) {
  using T = TypeParam;
  const index_t c = 2, l = 3;
  auto anchors = diffspan_anchors<T>(25, 6, l, c, 12);
  AlignOptions opts;
  opts.method = Method::opp;
  auto res = align(anchors, opts);
  const Matrix<double> U = to_double(res.target.view());
  Rng rng(5);
  std::vector<Matrix<double>> samples;
  for (int k = 0; k < 200000; ++k) samples.push_back(random_orthogonal<double>(l, rng));
  for (index_t i = 0; i < c; ++i) {
    const Matrix<double> M = mul(to_double(anchors[i]), U, true, false);
    const double opp = trace_gm(to_double(res.G[i]), M);
    double best = -std::numeric_limits<double>::infinity();
    for (const auto& G : samples) best = std::max(best, trace_gm(G, M));
    EXPECT_LE(best, opp + this->slack(frob(M))) << "user " << i;
    EXPECT_LE(testing::orthogonality_error(to_double(res.G[i])), this->orth_tol());
  }
}

// OPP is GOPP's first half-step from the spectral start, and its target is Imakura's U R with
// R = I; the reported objective is sum_i ||A_i G_i - U||^2.
TYPED_TEST(Opp, IsGoppsFirstStepAndReportsItsObjective) {
  using T = TypeParam;
  const index_t c = 4, l = 5;
  auto anchors = diffspan_anchors<T>(60, 9, l, c, 13);
  AlignOptions opts;
  opts.method = Method::opp;
  auto opp = align(anchors, opts);
  opts.method = Method::gopp;
  opts.gopp.max_iterations = 1;
  auto gopp = align(anchors, opts);
  opts.method = Method::imakura;
  auto ls = align(anchors, opts);
  const double tol = std::is_same_v<T, double> ? 1e-12 : 1e-5;
  for (index_t i = 0; i < c; ++i)
    EXPECT_LE(testing::frob_diff(to_double(opp.G[i]), to_double(gopp.G[i])), tol) << "user " << i;
  EXPECT_LE(testing::frob_diff(to_double(opp.target.view()), to_double(ls.target.view())), tol);
  double direct = 0;
  const Matrix<double> U = to_double(opp.target.view());
  for (index_t i = 0; i < c; ++i) {
    const Matrix<double> R = mul(to_double(anchors[i]), to_double(opp.G[i]));
    direct += std::pow(testing::frob_diff(R, U), 2);
  }
  // The derived objective carries eps(T) * sum_i ||A_i||^2 (docs/explanation/methods.md).
  const double energy = std::pow(frob(to_double(anchors.view().concatenated())), 2);
  EXPECT_NEAR(opp.report.objective, direct, 20 * testing::eps<T>() * energy);
  EXPECT_LE(opp.report.orthogonality_error, this->orth_tol() * std::sqrt(double(l)));
}

// ---- RDP

Stack<double> random_full_rank(index_t c, index_t l, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Matrix<double>> g;
  for (index_t i = 0; i < c; ++i) {
    Matrix<double> m = random_normal<double>(l, l, rng);
    for (index_t j = 0; j < l; ++j) m(j, j) += 2.0;  // away from singular
    g.push_back(m);
  }
  return Stack<double>::from_matrices(g);
}

std::vector<double> stacked(const Stack<double>& G) { return {G.data(), G.data() + G.size()}; }

// eq. 24 directly: 1/2 sum_ij ||A_i G_i - A_j G_j||^2 + eta sum_i log(det(G_i^T G_i))^2.
double direct_objective(const Stack<double>& A, const Stack<double>& G, double eta) {
  const index_t c = A.count();
  std::vector<Matrix<double>> Y;
  for (index_t i = 0; i < c; ++i) Y.push_back(mul(A.matrix(i), G.matrix(i)));
  double f = 0;
  for (index_t i = 0; i < c; ++i)
    for (index_t j = 0; j < c; ++j) f += 0.5 * std::pow(testing::frob_diff(Y[i], Y[j]), 2);
  for (index_t i = 0; i < c; ++i) {
    Matrix<double> gram = mul(G.matrix(i), G.matrix(i), true, false);
    // log det of an SPD matrix by Cholesky.
    const index_t l = gram.rows();
    double ld = 0;
    for (index_t k = 0; k < l; ++k) {
      double d = gram(k, k);
      for (index_t p = 0; p < k; ++p) d -= gram(k, p) * gram(k, p);
      d = std::sqrt(d);
      gram(k, k) = d;
      ld += 2 * std::log(d);
      for (index_t r = k + 1; r < l; ++r) {
        double v = gram(r, k);
        for (index_t p = 0; p < k; ++p) v -= gram(r, p) * gram(k, p);
        gram(r, k) = v / d;
      }
    }
    f += eta * ld * ld;
  }
  return f;
}

// The analytic gradient against central differences, relative error below 1e-6; the value
// against eq. 24 computed directly.
// Both forms of the compressed anchors: the QR factor (a >= c l) and W itself (a < c l).
TEST(Rdp, GradientMatchesCentralDifferences) {
  const index_t c = 3, l = 3;
  auto backend = make_backend(Device::cpu);
  auto& p = backend->primitives<double>();
  const Stack<double> G = random_full_rank(c, l, 22);
  for (const auto& [a, eta] : std::vector<std::pair<index_t, double>>{
           {20, 0.0}, {20, 1e-2}, {20, 1.0}, {20, 30.0}, {7, 0.0}, {7, 1.0}}) {
    SCOPED_TRACE("a = " + std::to_string(a) + ", eta = " + std::to_string(eta));
    auto anchors = diffspan_anchors<double>(a, 6, l, c, 21);
    std::vector<double> x = stacked(G), g(x.size()), scratch(x.size());
    const double f = core::rdp_objective(p, anchors.view(), x.data(), eta, g.data());
    EXPECT_NEAR(f, direct_objective(anchors, G, eta), 1e-10 * std::abs(f));
    double err = 0, norm = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const double h = 1e-5 * std::max(1.0, std::abs(x[k])), x0 = x[k];
      x[k] = x0 + h;
      const double fp = core::rdp_objective(p, anchors.view(), x.data(), eta, scratch.data());
      x[k] = x0 - h;
      const double fm = core::rdp_objective(p, anchors.view(), x.data(), eta, scratch.data());
      x[k] = x0;
      err += std::pow((fp - fm) / (2 * h) - g[k], 2);
      norm += g[k] * g[k];
    }
    EXPECT_LT(std::sqrt(err / norm), 1e-6);
  }
  // A singular G_i has f = +inf once eta > 0 (what keeps the line search in GL(l)).
  auto anchors = diffspan_anchors<double>(20, 6, l, c, 21);
  Stack<double> S = G;
  for (index_t r = 0; r < l; ++r) S(1, r, 2) = S(1, r, 0);
  std::vector<double> x = stacked(S), g(x.size());
  EXPECT_EQ(core::rdp_objective(p, anchors.view(), x.data(), 1.0, g.data()),
            std::numeric_limits<double>::infinity());
}

template <typename T>
class RdpStarts : public ::testing::Test {};
TYPED_TEST_SUITE(RdpStarts, Precisions);

// From both starts the objective decreases, the gradient meets the tolerance, G stays full
// rank, and the report says so. DiffSpan (no exact consensus) so that the penalty matters.
TYPED_TEST(RdpStarts, DecreasesAndConvergesFromBothStarts) {
  using T = TypeParam;
  const index_t c = 4, l = 4;
  auto anchors = diffspan_anchors<T>(50, 8, l, c, 31);
  for (Method m : {Method::rdp_ls, Method::rdp_opp}) {
    SCOPED_TRACE(to_string(m));
    AlignOptions opts;
    opts.method = m;
    auto res = align(anchors, opts);
    const auto& r = res.report;
    EXPECT_EQ(r.method, to_string(m));
    ASSERT_GE(r.objective_history.size(), 2u);
    EXPECT_LT(r.objective_history.back(), r.objective_history.front());
    for (size_t k = 1; k < r.objective_history.size(); ++k)  // monotone: a descent method
      EXPECT_LE(r.objective_history[k], r.objective_history[k - 1] * (1 + 1e-12));
    EXPECT_TRUE(r.converged) << "gradient norm " << r.gradient_norm;
    double energy = 0;  // the tolerance is relative to sum_i ||A_i||_F^2
    for (index_t i = 0; i < c; ++i) energy += std::pow(frob(to_double(anchors[i])), 2);
    EXPECT_LE(r.gradient_norm, opts.rdp.gradient_tolerance * energy);
    EXPECT_GT(r.iterations, 0);
    EXPECT_DOUBLE_EQ(r.objective, r.objective_history.back());
    EXPECT_GT(r.min_rank_ratio, 1e-3);
    // The target is the mean of the A_i G_i, and the consensus objective is measured against it.
    EXPECT_TRUE(std::isfinite(r.consensus_objective));
    for (index_t i = 0; i < c; ++i) {
      const Matrix<double> Gi = to_double(res.G[i]);
      EXPECT_GT(std::abs(Gi(0, 0)) + std::abs(Gi(1, 1)), 0.0);
    }
    const std::string json = r.to_json();
    EXPECT_NE(json.find("\"gradient_norm\""), std::string::npos);
  }
}

// The float path (host loops for the per-user products, QR in float) solves the same problem
// as the double path (the backend's BLAS); also with fewer anchor rows than c l (no QR).
TEST(Rdp, FloatAndDoubleAgree) {
  for (index_t a : {40, 10}) {
    SCOPED_TRACE("a = " + std::to_string(a));
    const index_t c = 4, l = 3;
    // m = l + 1 like the paper's Pima (m = 8, l = 6): overlapping spans, a well-posed minimum.
    auto anchors = diffspan_anchors<double>(a, 4, l, c, 91);
    AlignOptions opts;
    opts.method = Method::rdp_opp;
    auto d = align(anchors, opts);
    auto f = align(testing::released_anchors<float>(
                       testing::make_synthetic(a, 4, l, c, SpanCondition::diff_span, 91)),
                   opts);
    EXPECT_TRUE(d.report.converged) << d.report.iterations << " " << d.report.gradient_norm;
    EXPECT_TRUE(f.report.converged) << f.report.iterations << " " << f.report.gradient_norm;
    EXPECT_NEAR(f.report.objective, d.report.objective, 1e-4 * d.report.objective);
    EXPECT_LT(d.report.objective, d.report.objective_history.front());
  }
}

// Both starts solve the same problem: with the penalty the minimisers agree closely here, and
// eq. 24's value at the result equals the direct sum.
TEST(Rdp, BothStartsReachTheSameValueAndTheReportedValueIsEq24) {
  const index_t c = 3, l = 3;
  auto anchors = diffspan_anchors<double>(40, 6, l, c, 41);
  AlignOptions opts;
  opts.method = Method::rdp_ls;
  auto ls = align(anchors, opts);
  opts.method = Method::rdp_opp;
  auto op = align(anchors, opts);
  double energy = 0;
  for (index_t i = 0; i < c; ++i) energy += std::pow(frob(anchors.matrix(i)), 2);
  const double eta = opts.rdp.eta * energy / c;
  for (const auto* res : {&ls, &op}) {
    Stack<double> G(c, l, l);
    for (index_t k = 0; k < G.size(); ++k) G.data()[k] = res->G.data()[k];
    EXPECT_NEAR(res->report.objective, direct_objective(anchors, G, eta),
                1e-9 * res->report.objective);
  }
  // Local minima may differ in general; on this instance both reach the same value.
  EXPECT_NEAR(ls.report.objective, op.report.objective, 1e-6 * op.report.objective);
}

// eta = 0 and a shared span: the anchors admit exact consensus, and RDP reaches it from the OPP
// start, which is not consensual when the secret mixings are not orthogonal (SameSpan).
TEST(Rdp, ReachesConsensusUnderASharedSpanWithoutPenalty) {
  for (SpanCondition cond : {SpanCondition::same_span, SpanCondition::same_span_orth}) {
    SCOPED_TRACE(to_string(cond));
    const index_t c = 4, l = 5;
    auto anchors =
        testing::released_anchors<double>(testing::make_synthetic(60, 10, l, c, cond, 51));
    AlignOptions opts;
    opts.method = Method::rdp_opp;
    opts.rdp.eta = 0;
    opts.evaluate_consensus = true;
    auto res = align(anchors, opts);
    double energy = 0;
    for (index_t i = 0; i < c; ++i) energy += std::pow(frob(anchors.matrix(i)), 2);
    if (cond == SpanCondition::same_span) {
      EXPECT_GT(res.report.objective_history.front(), 1e-3 * energy);  // a real start
    }
    EXPECT_TRUE(res.report.converged);
    EXPECT_LE(res.report.objective, 1e-10 * energy);
    EXPECT_LE(res.report.consensus_objective, 1e-10 * energy);
    EXPECT_GT(res.report.min_rank_ratio, 1e-3);  // full rank
  }
}

// Scaling the anchors scales f by the same factor (eta is relative to their energy), so from
// the scale-free OPP start the same G results.
TEST(Rdp, ResultDoesNotDependOnTheAnchorScale) {
  const index_t c = 3, l = 4;
  auto anchors = diffspan_anchors<double>(40, 7, l, c, 61);
  Stack<double> scaled = anchors;
  for (index_t k = 0; k < scaled.size(); ++k) scaled.data()[k] *= 4.0;
  AlignOptions opts;
  opts.method = Method::rdp_opp;
  opts.rdp.gradient_tolerance = 1e-9;
  auto a = align(anchors, opts);
  auto b = align(scaled, opts);
  for (index_t i = 0; i < c; ++i)
    EXPECT_LE(testing::frob_diff(to_double(a.G[i]), to_double(b.G[i])),
              1e-6 * frob(to_double(a.G[i])));
}

TEST(Rdp, SameInputSameNumbers) {
  auto anchors = diffspan_anchors<double>(50, 8, 4, 5, 71);
  AlignOptions opts;
  opts.method = Method::rdp_ls;
  opts.svd.algorithm = SvdAlgorithm::randomized;
  opts.svd.seed = 3;
  auto a = align(anchors, opts);
  auto b = align(anchors, opts);
  EXPECT_TRUE(std::equal(a.G.data(), a.G.data() + a.G.size(), b.G.data()));
  EXPECT_EQ(a.report.objective_history, b.report.objective_history);
  EXPECT_EQ(a.report.iterations, b.report.iterations);
}

TEST(Rdp, RejectsBadOptions) {
  auto anchors = diffspan_anchors<double>(20, 5, 3, 2, 81);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* what;
    void (*set)(AlignOptions&, double);
    double value;
  };
  const Case cases[] = {
      {"rdp_eta", [](AlignOptions& o, double v) { o.rdp.eta = v; }, -1.0},
      {"rdp_eta", [](AlignOptions& o, double v) { o.rdp.eta = v; }, nan},
      {"rdp_eta", [](AlignOptions& o, double v) { o.rdp.eta = v; }, inf},
      {"rdp_gradient_tolerance", [](AlignOptions& o, double v) { o.rdp.gradient_tolerance = v; },
       nan},
      {"rdp_gradient_tolerance", [](AlignOptions& o, double v) { o.rdp.gradient_tolerance = v; },
       -1.0},
      {"rdp_max_iterations",
       [](AlignOptions& o, double v) { o.rdp.max_iterations = static_cast<index_t>(v); }, 0.0},
      {"rdp_memory", [](AlignOptions& o, double v) { o.rdp.memory = static_cast<index_t>(v); },
       0.0},
  };
  for (Method m : {Method::rdp_ls, Method::rdp_opp})
    for (const Case& k : cases) {
      AlignOptions opts;
      opts.method = m;
      k.set(opts, k.value);
      try {
        align(anchors, opts);
        ADD_FAILURE() << k.what << " = " << k.value << " was accepted";
      } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find(k.what), std::string::npos) << e.what();
      }
    }
}

// A saved OPP or RDP model loads with its options and enrols: OPP by the Procrustes step
// against U_1 (the batch G_i exactly), RDP by least squares against its target, the mean of the
// A_i G_i.
TEST(OppRdp, AlignerSavesLoadsAndEnrols) {
  const index_t c = 4, l = 3;
  auto anchors = diffspan_anchors<double>(40, 4, l, c, 95);
  const std::string dir = ::testing::TempDir() + "dcalign_opp_rdp_model";
  for (Method m : {Method::opp, Method::rdp_ls, Method::rdp_opp}) {
    SCOPED_TRACE(to_string(m));
    AlignOptions opts;
    opts.method = m;
    opts.rdp.eta = 0.05;
    Aligner<double> model;
    const auto fit = model.fit(anchors, opts);
    model.save(dir);
    const auto loaded = Aligner<double>::load(dir);
    EXPECT_EQ(loaded.method(), m);
    EXPECT_EQ(loaded.options().rdp.eta, m == Method::opp ? AlignOptions().rdp.eta : 0.05);
    const auto e = loaded.enroll(anchors);
    if (m == Method::opp) {
      for (index_t i = 0; i < c; ++i)
        EXPECT_LE(testing::frob_diff(to_double(e.G[i]), to_double(fit.G[i])), 1e-12);
    } else {
      // The target is the mean of the fitted A_i G_i.
      Matrix<double> mean(40, l);
      for (index_t i = 0; i < c; ++i) {
        const Matrix<double> Y = mul(anchors.matrix(i), fit.G.matrix(i));
        for (index_t k = 0; k < Y.size(); ++k) mean.data()[k] += Y.data()[k] / c;
      }
      EXPECT_LE(testing::frob_diff(to_double(loaded.target().view()), mean), 1e-10 * frob(mean));
      for (double res : e.report.residual) EXPECT_TRUE(std::isfinite(res));
    }
  }
}

TEST(Rdp, MethodNames) {
  EXPECT_EQ(parse_method("rdp-ls"), Method::rdp_ls);
  EXPECT_EQ(parse_method("RDP_OPP"), Method::rdp_opp);
  EXPECT_EQ(parse_method("opp"), Method::opp);
  EXPECT_EQ(to_string(Method::rdp_ls), "rdp-ls");
  EXPECT_EQ(to_string(Method::rdp_opp), "rdp-opp");
  EXPECT_EQ(to_string(Method::opp), "opp");
}

}  // namespace
}  // namespace dcalign
