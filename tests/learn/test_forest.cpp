// Random forest (XGBoost's random-forest mode): learning separable toy problems, a non-linear
// one (XOR) that logistic regression cannot learn, probabilities, determinism, and the
// scikit-learn semantics the configuration is meant to reproduce (fully grown trees, leaf class
// fractions as probabilities, leaf means for regression).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "dcalign/learn.hpp"
#include "dcalign/random.hpp"
#include "learn/toy_data.hpp"

namespace dcalign::learn {
namespace {

using testing::blobs;
using testing::Data;

// XOR: four clusters at (+-3, +-3) (standard deviation 0.5, so they never overlap); the class
// is 1 where the two coordinates have opposite signs. No line separates the classes.
Data xor_clusters(index_t n, std::uint64_t seed) {
  Rng rng(seed);
  Data data{Matrix<double>(n, 2), std::vector<double>(static_cast<size_t>(n))};
  for (index_t i = 0; i < n; ++i) {
    const double sx = (i % 2 == 0) ? 1.0 : -1.0;
    const double sy = ((i / 2) % 2 == 0) ? 1.0 : -1.0;
    data.X(i, 0) = 3 * sx + 0.5 * rng.normal();
    data.X(i, 1) = 3 * sy + 0.5 * rng.normal();
    data.y[static_cast<size_t>(i)] = sx * sy < 0 ? 1.0 : 0.0;
  }
  return data;
}

ModelOptions options(std::uint64_t seed = 1) {
  ModelOptions o;
  o.seed = seed;
  o.threads = 1;
  return o;
}

void expect_distributions(const Matrix<double>& p) {
  for (index_t i = 0; i < p.rows(); ++i) {
    double sum = 0;
    for (index_t c = 0; c < p.cols(); ++c) {
      EXPECT_GE(p(i, c), 0.0);
      EXPECT_LE(p(i, c), 1.0);
      sum += p(i, c);
    }
    EXPECT_NEAR(sum, 1.0, 1e-9) << "row " << i;
  }
}

TEST(LearnForest, SeparatesTwoDistantBlobsOnTrainingAndHeldOutData) {
  const Data train = blobs(200, 2, 10.0, 1), test = blobs(200, 2, 10.0, 2);
  auto model = make_model("forest", options());
  EXPECT_EQ(model->name(), "forest");
  model->fit(train.X, train.y, 2);
  EXPECT_EQ(accuracy(train.y, model->predict(train.X)), 1.0);
  EXPECT_EQ(accuracy(test.y, model->predict(test.X)), 1.0);
  const Matrix<double> p = model->predict_proba(test.X);
  ASSERT_EQ(p.cols(), 2);
  expect_distributions(p);
  EXPECT_EQ(roc_auc_ovr(test.y, p), 1.0);
}

TEST(LearnForest, LearnsXorWhereLogisticRegressionCannot) {
  const Data train = xor_clusters(400, 3), test = xor_clusters(400, 4);
  auto linear = make_model("logreg", options());
  linear->fit(train.X, train.y, 2);
  EXPECT_LT(accuracy(test.y, linear->predict(test.X)), 0.75);
  for (const char* method : {"exact", "hist"}) {
    ModelOptions o = options();
    o.forest.tree_method = method;
    auto forest = make_model("forest", o);
    forest->fit(train.X, train.y, 2);
    EXPECT_EQ(accuracy(train.y, forest->predict(train.X)), 1.0) << method;
    EXPECT_GT(accuracy(test.y, forest->predict(test.X)), 0.95) << method;
  }
}

TEST(LearnForest, SeparatesThreeBlobs) {
  const Data train = blobs(300, 3, 10.0, 5), test = blobs(300, 3, 10.0, 6);
  auto model = make_model("forest", options());
  model->fit(train.X, train.y, 3);
  EXPECT_EQ(accuracy(train.y, model->predict(train.X)), 1.0);
  EXPECT_EQ(accuracy(test.y, model->predict(test.X)), 1.0);
  const Matrix<double> p = model->predict_proba(test.X);
  ASSERT_EQ(p.cols(), 3);
  expect_distributions(p);
  // Classes absent from the training data get probability 0.
  auto wide = make_model("forest", options());
  wide->fit(train.X, train.y, 4);
  const Matrix<double> q = wide->predict_proba(test.X);
  ASSERT_EQ(q.cols(), 4);
  expect_distributions(q);
  for (index_t i = 0; i < q.rows(); ++i) EXPECT_EQ(q(i, 3), 0.0);
  EXPECT_EQ(accuracy(test.y, wide->predict(test.X)), 1.0);
}

TEST(LearnForest, ProbabilitiesAgreeWithPredictOnOverlappingClasses) {
  const Data train = blobs(300, 3, 1.5, 7), test = blobs(150, 3, 1.5, 8);
  for (int k : {2, 3}) {
    Data tr = train, te = test;
    if (k == 2)
      for (auto* d : {&tr, &te})
        for (auto& v : d->y) v = v > 0 ? 1.0 : 0.0;
    auto model = make_model("forest", options());
    model->fit(tr.X, tr.y, k);
    const Matrix<double> p = model->predict_proba(te.X);
    expect_distributions(p);
    const auto pred = model->predict(te.X);
    bool strictly_between = false;
    for (index_t i = 0; i < p.rows(); ++i) {
      index_t arg = 0;
      for (index_t c = 1; c < k; ++c)
        if (p(i, c) > p(i, arg)) arg = c;
      EXPECT_EQ(pred[static_cast<size_t>(i)], static_cast<double>(arg)) << "row " << i;
      strictly_between = strictly_between || (p(i, 0) > 0.01 && p(i, 0) < 0.99);
    }
    EXPECT_TRUE(strictly_between) << "overlapping classes should give soft probabilities";
  }
}

TEST(LearnForest, SeedDeterminesTheForest) {
  const Data train = blobs(200, 3, 2.0, 9), test = blobs(100, 3, 2.0, 10);
  auto a = make_model("forest", options(5));
  auto b = make_model("forest", options(5));
  auto c = make_model("forest", options(6));
  a->fit(train.X, train.y, 3);
  b->fit(train.X, train.y, 3);
  c->fit(train.X, train.y, 3);
  const auto pa = a->predict_proba(test.X).values();
  EXPECT_EQ(pa, b->predict_proba(test.X).values());
  EXPECT_EQ(a->predict(test.X), b->predict(test.X));
  EXPECT_NE(pa, c->predict_proba(test.X).values());
  // Refitting reproduces the first fit.
  a->fit(train.X, train.y, 3);
  EXPECT_EQ(a->predict_proba(test.X).values(), pa);
  // More threads do not change the forest. Few trees: on cores busy with other work, XGBoost's
  // spinning OpenMP threads can make each tree's parallel regions very slow.
  ModelOptions one = options(5), two = options(5);
  one.forest.n_estimators = two.forest.n_estimators = 10;
  two.threads = 2;
  auto t1 = make_model("forest", one), t2 = make_model("forest", two);
  t1->fit(train.X, train.y, 3);
  t2->fit(train.X, train.y, 3);
  EXPECT_EQ(t1->predict_proba(test.X).values(), t2->predict_proba(test.X).values());
  // Every 64-bit seed is accepted (XGBoost's own parameter is signed), and the high half counts.
  auto high = make_model("forest", options(~std::uint64_t{0}));
  high->fit(train.X, train.y, 3);
  auto high2 = make_model("forest", options(std::uint64_t{5} << 32 | 7));
  high2->fit(train.X, train.y, 3);
  auto low = make_model("forest", options(7));
  low->fit(train.X, train.y, 3);
  EXPECT_NE(high2->predict_proba(test.X).values(), low->predict_proba(test.X).values());
}

// One tree on all rows and all features is a single fully grown CART tree: it memorises the
// training set (distinct points, random labels), as sklearn's max_depth=None and
// min_samples_leaf=1 do. A depth limit stops it.
TEST(LearnForest, TreesAreFullyGrownByDefault) {
  Rng rng(11);
  const index_t n = 200;
  Matrix<double> X = random_normal<double>(n, 3, rng);
  std::vector<double> y(static_cast<size_t>(n));
  for (auto& v : y) v = rng.uniform() < 0.5 ? 0.0 : 1.0;
  ModelOptions o = options();
  o.forest.n_estimators = 1;
  o.forest.subsample = 1.0;
  o.forest.max_features = 1.0;
  auto full = make_model("forest", o);
  full->fit(X, y, 2);
  EXPECT_EQ(accuracy(y, full->predict(X)), 1.0);
  const Matrix<double> p = full->predict_proba(X);
  for (index_t i = 0; i < n; ++i) EXPECT_EQ(p(i, 1), y[static_cast<size_t>(i)]);  // pure leaves
  // The default forest (bootstrap-like subsampling, sqrt(d) features) still fits it closely.
  auto forest = make_model("forest", options());
  forest->fit(X, y, 2);
  EXPECT_GE(accuracy(y, forest->predict(X)), 0.95);
  o.forest.max_depth = 2;
  auto stump = make_model("forest", o);
  stump->fit(X, y, 2);
  EXPECT_LT(accuracy(y, stump->predict(X)), 0.8);
}

// Rows that no split can separate end in one leaf, whose class fractions are the probabilities
// (sklearn's predict_proba), not XGBoost's sigmoid / softmax of the leaf values.
TEST(LearnForest, ProbabilitiesAreLeafClassFractions) {
  ModelOptions o = options();
  o.forest.subsample = 1.0;  // every tree the same: the forest's mean is one tree's leaf
  o.forest.max_features = 1.0;
  o.forest.n_estimators = 10;
  // Binary: x = 0 holds labels 0, 0, 1; x = 5 holds 1, 1, 1, 0.
  const Matrix<double> X(7, 1, {0, 0, 0, 5, 5, 5, 5});
  auto binary = make_model("forest", o);
  binary->fit(X, {0, 0, 1, 1, 1, 1, 0}, 2);
  const Matrix<double> p = binary->predict_proba(Matrix<double>(2, 1, {0, 5}));
  EXPECT_NEAR(p(0, 1), 1.0 / 3, 1e-6);
  EXPECT_NEAR(p(1, 1), 3.0 / 4, 1e-6);
  EXPECT_EQ(binary->predict(Matrix<double>(2, 1, {0, 5})), (std::vector<double>{0, 1}));
  // Three classes: x = 0 holds 0, 1, 2, 2; x = 5 holds 0, 0, 0.
  const Matrix<double> X4(7, 1, {0, 0, 0, 0, 5, 5, 5});
  auto multi = make_model("forest", o);
  multi->fit(X4, {0, 1, 2, 2, 0, 0, 0}, 3);
  const Matrix<double> q = multi->predict_proba(Matrix<double>(2, 1, {-1, 6}));
  EXPECT_NEAR(q(0, 0), 0.25, 1e-6);
  EXPECT_NEAR(q(0, 1), 0.25, 1e-6);
  EXPECT_NEAR(q(0, 2), 0.5, 1e-6);
  EXPECT_NEAR(q(1, 0), 1.0, 1e-6);
  // Regression: the leaf's mean target (x = 0: 1, 2, 3, 6; x = 5: 10, 20, 30).
  auto reg = make_model("forest", o);
  reg->fit(X4, {1, 2, 3, 6, 10, 20, 30}, 0);
  const auto r = reg->predict(Matrix<double>(2, 1, {0, 5}));
  EXPECT_NEAR(r[0], 3.0, 1e-5);
  EXPECT_NEAR(r[1], 20.0, 1e-5);
}

TEST(LearnForest, SingleClassPresentPredictsIt) {
  const Data train = blobs(40, 1, 0.0, 12);
  auto model = make_model("forest", options());
  model->fit(train.X, std::vector<double>(40, 1.0), 2);
  const Matrix<double> p = model->predict_proba(train.X);
  for (index_t i = 0; i < p.rows(); ++i) EXPECT_EQ(p(i, 1), 1.0);
  EXPECT_EQ(model->predict(train.X), std::vector<double>(40, 1.0));
}

TEST(LearnForest, LearnsRegression) {
  Rng rng(13);
  auto toy = [&rng](index_t n) {
    Data d{Matrix<double>(n, 2), std::vector<double>(static_cast<size_t>(n))};
    for (index_t i = 0; i < n; ++i) {
      d.X(i, 0) = 2 * rng.uniform() - 1;
      d.X(i, 1) = 2 * rng.uniform() - 1;
      d.y[static_cast<size_t>(i)] = d.X(i, 0) * d.X(i, 0) + std::sin(2 * d.X(i, 1));
    }
    return d;
  };
  const Data train = toy(600), test = toy(300);
  auto model = make_model("forest", options());
  model->fit(train.X, train.y, 0);
  const auto pred = model->predict(test.X);
  const double mean =
      std::accumulate(test.y.begin(), test.y.end(), 0.0) / static_cast<double>(test.y.size());
  double var = 0;
  for (double v : test.y) var += (v - mean) * (v - mean);
  var /= static_cast<double>(test.y.size());
  const double e = rmse(test.y, pred);
  EXPECT_GE(1 - e * e / var, 0.9);
}

}  // namespace
}  // namespace dcalign::learn
