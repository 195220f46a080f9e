// The "linear" model (ordinary least squares with an intercept) against solutions worked out in
// the test: exact recovery of a noiseless linear target, the normal equations with noise, the
// minimum-norm answer for collinear features, and its refusal of classification.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dcalign/error.hpp"
#include "dcalign/learn.hpp"
#include "dcalign/random.hpp"

namespace dcalign::learn {
namespace {

Matrix<double> gaussian(index_t n, index_t d, std::uint64_t seed) {
  Rng rng(seed);
  return random_normal<double>(n, d, rng);
}

TEST(LearnLinear, RecoversANoiselessLinearTarget) {
  const index_t n = 50, d = 4;
  const Matrix<double> X = gaussian(n, d, 1);
  const std::vector<double> w = {1.5, -2.0, 0.25, 3.0};
  std::vector<double> y(n);
  for (index_t i = 0; i < n; ++i) {
    y[i] = 7.0;
    for (index_t j = 0; j < d; ++j) y[i] += X(i, j) * w[j];
  }
  auto m = make_model("linear");
  m->fit(X, y, 0);
  const std::vector<double> p = m->parameters();  // w, then the intercept
  ASSERT_EQ(p.size(), 5u);
  for (index_t j = 0; j < d; ++j) EXPECT_NEAR(p[j], w[j], 1e-12);
  EXPECT_NEAR(p[4], 7.0, 1e-12);
  const std::vector<double> pred = m->predict(X);
  for (index_t i = 0; i < n; ++i) EXPECT_NEAR(pred[i], y[i], 1e-11);
}

// With noise: the residual is orthogonal to every centred feature and sums to zero (the normal
// equations of least squares with an intercept).
TEST(LearnLinear, ResidualSatisfiesTheNormalEquations) {
  const index_t n = 80, d = 3;
  const Matrix<double> X = gaussian(n, d, 2);
  Rng rng(3);
  std::vector<double> y(n);
  for (index_t i = 0; i < n; ++i) y[i] = X(i, 0) - X(i, 2) + rng.normal();
  auto m = make_model("linear");
  m->fit(X, y, 0);
  const std::vector<double> pred = m->predict(X);
  double sum = 0;
  std::vector<double> dot(d, 0.0);
  for (index_t i = 0; i < n; ++i) {
    const double r = y[i] - pred[i];
    sum += r;
    for (index_t j = 0; j < d; ++j) dot[j] += r * X(i, j);
  }
  EXPECT_NEAR(sum, 0.0, 1e-10);
  for (index_t j = 0; j < d; ++j) EXPECT_NEAR(dot[j], 0.0, 1e-10) << j;
}

// Two copies of one feature: the minimum-norm weights split the coefficient evenly.
TEST(LearnLinear, CollinearFeaturesGetTheMinimumNormWeights) {
  const index_t n = 30;
  Matrix<double> X(n, 2);
  std::vector<double> y(n);
  Rng rng(4);
  for (index_t i = 0; i < n; ++i) {
    X(i, 0) = X(i, 1) = rng.normal();
    y[i] = 4 * X(i, 0) + 1;
  }
  auto m = make_model("linear");
  m->fit(X, y, 0);
  const std::vector<double> p = m->parameters();
  EXPECT_NEAR(p[0], 2.0, 1e-10);
  EXPECT_NEAR(p[1], 2.0, 1e-10);
  EXPECT_NEAR(p[2], 1.0, 1e-10);
}

TEST(LearnLinear, RefusesClassification) {
  auto m = make_model("linear");
  EXPECT_TRUE(m->can_fit(0));
  EXPECT_FALSE(m->can_fit(2));
  const Matrix<double> X = gaussian(10, 2, 5);
  const std::vector<double> y = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
  try {
    m->fit(X, y, 2);
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("classification"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(make_model("logreg")->can_fit(0));
}

// ModelOptions::standardize_target: a model fitted on standardised targets and predicting back
// in their units. kNN's mean of the neighbours' targets commutes with the affine map, so it
// predicts what the plain kNN does; FedAvg gives exactly the central model trained by hand on
// targets scaled with all clients' moments, its predictions mapped back.
TEST(LearnTargetScaling, KnnCommutesAndFedAvgMatchesScalingByHand) {
  const index_t n = 60;
  const Matrix<double> X = gaussian(n, 3, 6);
  std::vector<double> y(n);
  for (index_t i = 0; i < n; ++i) y[i] = 150 + 40 * X(i, 0) - 25 * X(i, 1);
  ModelOptions plain, scaled;
  scaled.standardize_target = true;
  auto a = make_model("knn", plain), b = make_model("knn", scaled);
  a->fit(X, y, 0);
  b->fit(X, y, 0);
  const auto pa = a->predict(X), pb = b->predict(X);
  for (index_t i = 0; i < n; ++i) EXPECT_NEAR(pb[i], pa[i], 1e-10 * std::abs(pa[i]));

  // Two clients; the moments of all 60 targets.
  std::vector<Matrix<double>> Xc = {Matrix<double>(30, 3), Matrix<double>(30, 3)};
  std::vector<std::vector<double>> yc(2), ys(2);
  double mean = 0, ss = 0;
  for (double v : y) mean += v / n;
  for (double v : y) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / n);
  for (index_t i = 0; i < n; ++i) {
    const size_t k = i < 30 ? 0 : 1;
    for (index_t j = 0; j < 3; ++j) Xc[k](i % 30, j) = X(i, j);
    yc[k].push_back(y[i]);
    ys[k].push_back((y[i] - mean) / sd);
  }
  FedAvgOptions fo;
  fo.rounds = 3;
  plain.threads = scaled.threads = 1;
  plain.mlp.hidden_layers = scaled.mlp.hidden_layers = {8};
  const auto by_hand = fit_fedavg(Xc, ys, 0, plain, fo);
  int rounds = 0;
  const auto built_in = fit_fedavg(Xc, yc, 0, scaled, fo, [&](const FedAvgRound&, const Model& m) {
    ++rounds;
    EXPECT_EQ(m.predict(X).size(), static_cast<size_t>(n));
  });
  EXPECT_EQ(rounds, 3);
  const auto ph = by_hand->predict(X), pi = built_in->predict(X);
  for (index_t i = 0; i < n; ++i) EXPECT_NEAR(pi[i], ph[i] * sd + mean, 1e-9 * std::abs(pi[i]));
}

}  // namespace
}  // namespace dcalign::learn
