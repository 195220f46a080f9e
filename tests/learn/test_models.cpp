// Models: learning toy problems, determinism, probability outputs, and the scikit-learn
// conventions (Glorot init, L2 penalty, Adam step, early stopping, gamma="scale") checked
// against computations written out in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// y = x0^2 + sin(2 x1) on the square [-1, 1]^2, no noise.
Data regression_toy(index_t n, std::uint64_t seed) {
  Rng rng(seed);
  Data data{Matrix<double>(n, 2), std::vector<double>(static_cast<size_t>(n))};
  for (index_t i = 0; i < n; ++i) {
    data.X(i, 0) = 2 * rng.uniform() - 1;
    data.X(i, 1) = 2 * rng.uniform() - 1;
    data.y[static_cast<size_t>(i)] = data.X(i, 0) * data.X(i, 0) + std::sin(2 * data.X(i, 1));
  }
  return data;
}

double r_squared(const std::vector<double>& y, const std::vector<double>& pred) {
  const double mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
  double var = 0;
  for (double v : y) var += (v - mean) * (v - mean);
  var /= static_cast<double>(y.size());
  const double e = rmse(y, pred);
  return 1 - e * e / var;
}

// One thread: mini-batch training gains nothing from more on the small test problems, and on a
// loaded machine spinning LibTorch/OpenMP threads can slow it down by an order of magnitude.
ModelOptions options_for(const std::string& kind, std::uint64_t seed = 1) {
  ModelOptions o;
  o.seed = seed;
  o.threads = 1;
  if (kind == "svm") o.svm.probability = true;
  return o;
}

class LearnEveryModel : public ::testing::TestWithParam<std::string> {};

TEST_P(LearnEveryModel, SeparatesThreeBlobs) {
  const Data train = blobs(300, 3, 6.0, 11), test = blobs(300, 3, 6.0, 12);
  auto model = make_model(GetParam(), options_for(GetParam()));
  EXPECT_EQ(model->name(), GetParam());
  model->fit(train.X, train.y, 3);
  EXPECT_TRUE(model->fitted());
  const auto pred = model->predict(test.X);
  ASSERT_EQ(pred.size(), test.y.size());
  EXPECT_GE(accuracy(test.y, pred), 0.95);
  for (double p : pred) EXPECT_TRUE(p == 0 || p == 1 || p == 2) << p;
}

TEST_P(LearnEveryModel, SeparatesTwoBlobs) {
  const Data train = blobs(200, 2, 3.0, 21), test = blobs(200, 2, 3.0, 22);
  ModelOptions o = options_for(GetParam());
  o.threads = 0;  // the default, all cores, exercised once per model
  auto model = make_model(GetParam(), o);
  model->fit(train.X, train.y, 2);
  EXPECT_GE(accuracy(test.y, model->predict(test.X)), 0.95);
  // Ranking quality of the class-1 probability on a problem this easy.
  EXPECT_GE(roc_auc_ovr(test.y, model->predict_proba(test.X)), 0.98);
}

TEST_P(LearnEveryModel, ProbabilitiesAreDistributionsAgreeingWithPredict) {
  // Overlapping blobs, so the probabilities are not all 0 or 1.
  const Data train = blobs(240, 3, 2.0, 31), test = blobs(120, 3, 2.0, 32);
  auto model = make_model(GetParam(), options_for(GetParam()));
  model->fit(train.X, train.y, 3);
  const Matrix<double> p = model->predict_proba(test.X);
  ASSERT_EQ(p.rows(), test.X.rows());
  ASSERT_EQ(p.cols(), 3);
  const auto pred = model->predict(test.X);
  int agree = 0;
  for (index_t i = 0; i < p.rows(); ++i) {
    double sum = 0;
    index_t arg = 0;
    for (index_t c = 0; c < 3; ++c) {
      EXPECT_GE(p(i, c), 0.0);
      EXPECT_LE(p(i, c), 1.0);
      sum += p(i, c);
      if (p(i, c) > p(i, arg)) arg = c;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << i;
    agree += static_cast<double>(arg) == pred[static_cast<size_t>(i)] ? 1 : 0;
  }
  // SVM votes over one-vs-one decisions while its probabilities come from Platt scaling, and
  // kNN breaks vote ties by distance, so those two may disagree on a few borderline points.
  EXPECT_GE(agree, 0.9 * static_cast<double>(p.rows()));
}

TEST_P(LearnEveryModel, SameSeedGivesIdenticalPredictions) {
  const Data train = blobs(150, 3, 2.5, 41), test = blobs(60, 3, 2.5, 42);
  auto a = make_model(GetParam(), options_for(GetParam(), 5));
  auto b = make_model(GetParam(), options_for(GetParam(), 5));
  a->fit(train.X, train.y, 3);
  b->fit(train.X, train.y, 3);
  EXPECT_EQ(a->predict(test.X), b->predict(test.X));
  EXPECT_EQ(a->predict_proba(test.X).values(), b->predict_proba(test.X).values());
  EXPECT_EQ(a->parameters(), b->parameters());
  // Refitting the same object reproduces the first fit as well.
  const auto first = a->predict_proba(test.X).values();
  a->fit(train.X, train.y, 3);
  EXPECT_EQ(a->predict_proba(test.X).values(), first);
}

INSTANTIATE_TEST_SUITE_P(Learn, LearnEveryModel,
                         ::testing::Values("mlp", "logreg", "svm", "knn", "forest"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------------------------------------
// MLP

TEST(LearnMlp, DifferentSeedGivesDifferentWeights) {
  const Data train = blobs(100, 2, 3.0, 51);
  auto a = make_model("mlp", options_for("mlp", 1));
  auto b = make_model("mlp", options_for("mlp", 2));
  a->fit(train.X, train.y, 2);
  b->fit(train.X, train.y, 2);
  ASSERT_EQ(a->parameters().size(), b->parameters().size());
  // 2 -> 256 -> 1: 512 + 256 + 256 + 1 parameters.
  EXPECT_EQ(a->parameters().size(), 1025u);
  EXPECT_NE(a->parameters(), b->parameters());
}

TEST(LearnMlp, LearnsRegression) {
  const Data train = regression_toy(400, 61), test = regression_toy(200, 62);
  auto model = make_model("mlp", options_for("mlp"));
  model->fit(train.X, train.y, 0);
  const auto pred = model->predict(test.X);
  EXPECT_GE(r_squared(test.y, pred), 0.9);
  EXPECT_GT(model->info().best_validation_score, 0.9);  // validation R^2
}

// The first epoch, run as a single full batch in double precision, recomputed by hand:
// sklearn's Glorot-uniform initialisation (drawn from Rng in the order W0, b0, W1, b1), the
// loss mean cross-entropy + alpha/2 ||W||^2 / batch, and sklearn's Adam step
//   p -= lr sqrt(1 - b2) / (1 - b1) * m / (sqrt(v) + eps)   with m = (1-b1) g, v = (1-b2) g^2.
TEST(LearnMlp, FirstStepMatchesSklearnConventions) {
  const index_t n = 20, d = 2, h = 5, k = 3;
  const Data data = blobs(n, 3, 1.5, 71);
  ModelOptions o;
  o.seed = 42;
  o.threads = 1;
  o.mlp.hidden_layers = {static_cast<int>(h)};
  o.mlp.float64 = true;
  o.mlp.alpha = 0.5;  // large, so that a wrong penalty convention shows
  o.mlp.batch_size = 1000;
  o.mlp.max_epochs = 1;
  o.mlp.early_stopping = false;
  auto model = make_model("mlp", o);
  model->fit(data.X, data.y, 3);

  Rng rng(42);
  auto draw = [&rng](index_t count, double r) {
    std::vector<double> v(static_cast<size_t>(count));
    for (auto& x : v) x = (2 * rng.uniform() - 1) * r;
    return v;
  };
  auto W0 = draw(d * h, std::sqrt(6.0 / (d + h)));  // row-major d x h
  auto b0 = draw(h, std::sqrt(6.0 / (d + h)));
  auto W1 = draw(h * k, std::sqrt(6.0 / (h + k)));  // row-major h x k
  auto b1 = draw(k, std::sqrt(6.0 / (h + k)));

  // Forward and backward pass by hand.
  std::vector<double> pre(n * h), act(n * h), dout(n * k);
  double loss = 0;
  for (index_t i = 0; i < n; ++i) {
    for (index_t u = 0; u < h; ++u) {
      double s = b0[u];
      for (index_t f = 0; f < d; ++f) s += data.X(i, f) * W0[f * h + u];
      pre[i * h + u] = s;
      act[i * h + u] = std::max(s, 0.0);
    }
    double out[3], mx = -1e300;
    for (index_t c = 0; c < k; ++c) {
      out[c] = b1[c];
      for (index_t u = 0; u < h; ++u) out[c] += act[i * h + u] * W1[u * k + c];
      mx = std::max(mx, out[c]);
    }
    double z = 0;
    for (index_t c = 0; c < k; ++c) z += std::exp(out[c] - mx);
    const int yi = static_cast<int>(data.y[i]);
    loss += (mx + std::log(z) - out[yi]) / n;
    for (index_t c = 0; c < k; ++c)
      dout[i * k + c] = (std::exp(out[c] - mx) / z - (c == yi ? 1.0 : 0.0)) / n;
  }
  double sq = 0;
  for (double w : W0) sq += w * w;
  for (double w : W1) sq += w * w;
  loss += 0.5 * o.mlp.alpha * sq / n;
  ASSERT_EQ(model->info().loss_curve.size(), 1u);
  EXPECT_NEAR(model->info().loss_curve[0], loss, 1e-12);

  std::vector<double> gW0(d * h, 0), gb0(h, 0), gW1(h * k, 0), gb1(k, 0);
  for (index_t i = 0; i < n; ++i)
    for (index_t c = 0; c < k; ++c) {
      gb1[c] += dout[i * k + c];
      for (index_t u = 0; u < h; ++u) {
        gW1[u * k + c] += act[i * h + u] * dout[i * k + c];
        if (pre[i * h + u] > 0) {
          const double back = dout[i * k + c] * W1[u * k + c];
          gb0[u] += back;
          for (index_t f = 0; f < d; ++f) gW0[f * h + u] += data.X(i, f) * back;
        }
      }
    }
  for (size_t j = 0; j < W0.size(); ++j) gW0[j] += o.mlp.alpha * W0[j] / n;
  for (size_t j = 0; j < W1.size(); ++j) gW1[j] += o.mlp.alpha * W1[j] / n;

  const double b1m = o.mlp.beta1, b2m = o.mlp.beta2;
  const double lr_t = o.mlp.learning_rate * std::sqrt(1 - b2m) / (1 - b1m);
  auto stepped = [&](const std::vector<double>& p, const std::vector<double>& g) {
    std::vector<double> r(p.size());
    for (size_t j = 0; j < p.size(); ++j)
      r[j] = p[j] - lr_t * (1 - b1m) * g[j] / (std::sqrt((1 - b2m) * g[j] * g[j]) + o.mlp.epsilon);
    return r;
  };
  std::vector<double> expected;
  for (auto&& part : {stepped(W0, gW0), stepped(b0, gb0), stepped(W1, gW1), stepped(b1, gb1)})
    expected.insert(expected.end(), part.begin(), part.end());
  const auto got = model->parameters();
  ASSERT_EQ(got.size(), expected.size());
  // torch::optim::Adam's epsilon placement would differ here by ~1e-9.
  for (size_t j = 0; j < got.size(); ++j) EXPECT_NEAR(got[j], expected[j], 1e-13) << j;
}

// sklearn's rule: a validation score below best + tol counts as no improvement; training stops
// once more than n_iter_no_change epochs in a row did not improve, and the weights of the best
// epoch are restored.
TEST(LearnMlp, EarlyStoppingFollowsSklearnRuleAndRestoresBestEpoch) {
  const Data train = blobs(300, 3, 1.5, 81);  // overlapping: the score keeps moving
  ModelOptions o = options_for("mlp", 3);
  o.mlp.hidden_layers = {16};
  auto model = make_model("mlp", o);
  model->fit(train.X, train.y, 3);
  const FitInfo& info = model->info();
  ASSERT_LT(info.iterations, o.mlp.max_epochs);
  ASSERT_EQ(info.validation_scores.size(), static_cast<size_t>(info.iterations));
  ASSERT_EQ(info.loss_curve.size(), static_cast<size_t>(info.iterations));

  double best = -1e300;
  int count = 0, stop = -1, best_epoch = -1;
  for (size_t e = 0; e < info.validation_scores.size(); ++e) {
    const double s = info.validation_scores[e];
    count = s < best + o.mlp.tol ? count + 1 : 0;
    if (s > best) {
      best = s;
      best_epoch = static_cast<int>(e);
    }
    if (count > o.mlp.n_iter_no_change) {
      stop = static_cast<int>(e) + 1;
      break;
    }
  }
  EXPECT_EQ(stop, info.iterations);
  EXPECT_EQ(info.best_validation_score, best);

  // Training the same seed for exactly best_epoch + 1 epochs follows the same trajectory and
  // ends on the best epoch: its weights must be the ones the early-stopped model kept.
  o.mlp.max_epochs = best_epoch + 1;
  auto cut = make_model("mlp", o);
  cut->fit(train.X, train.y, 3);
  EXPECT_EQ(cut->info().iterations, best_epoch + 1);
  EXPECT_EQ(cut->parameters(), model->parameters());
}

TEST(LearnMlp, CudaDeviceNeedsCuda) {
  ModelOptions o = options_for("mlp");
  o.device = "cuda";
  if (!cuda_available()) {
    // The error names what is missing: LibTorch's CUDA (Debian's CPU build, as in CI) or a GPU.
    const std::string missing = torch_built_with_cuda() ? "sees no usable GPU" : "without CUDA";
    for (const char* kind : {"mlp", "logreg"}) {
      try {
        make_model(kind, o);
        ADD_FAILURE() << kind << ": device cuda accepted without CUDA";
      } catch (const BackendError& e) {
        EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
      }
    }
    return;
  }
  const Data train = blobs(200, 3, 6.0, 91), test = blobs(100, 3, 6.0, 92);
  for (const char* kind : {"mlp", "logreg"}) {
    auto model = make_model(kind, o);
    model->fit(train.X, train.y, 3);
    EXPECT_GE(accuracy(test.y, model->predict(test.X)), 0.95) << kind;
  }
}

// ---------------------------------------------------------------------------------------------
// Logistic regression

// At the optimum of  mean BCE + ||w||^2 / (2 C n)  the gradient vanishes:
//   (1/n) sum (p_i - y_i) x_i + w / (C n) = 0,   (1/n) sum (p_i - y_i) = 0.
TEST(LearnLogReg, ReachesStationaryPointOfSklearnObjective) {
  const Data train = blobs(200, 2, 1.0, 101, 3);  // overlapping: finite optimum
  ModelOptions o = options_for("logreg");
  o.logreg.C = 0.5;
  o.logreg.tol = 1e-9;
  auto model = make_model("logreg", o);
  model->fit(train.X, train.y, 2);
  const auto p = model->parameters();  // w (3 x 1), then b
  ASSERT_EQ(p.size(), 4u);
  EXPECT_GT(model->info().iterations, 0);
  const double n = 200;
  std::vector<double> grad(4, 0.0);
  for (index_t i = 0; i < train.X.rows(); ++i) {
    double z = p[3];
    for (index_t f = 0; f < 3; ++f) z += p[f] * train.X(i, f);
    const double r = 1 / (1 + std::exp(-z)) - train.y[i];
    for (index_t f = 0; f < 3; ++f) grad[f] += r * train.X(i, f) / n;
    grad[3] += r / n;
  }
  for (int f = 0; f < 3; ++f) grad[f] += p[f] / (o.logreg.C * n);
  for (double g : grad) EXPECT_NEAR(g, 0.0, 1e-7);
  // The penalty is active: weights differ from a fit with much weaker regularisation.
  o.logreg.C = 1e4;
  auto weak = make_model("logreg", o);
  weak->fit(train.X, train.y, 2);
  EXPECT_GT(std::fabs(weak->parameters()[0]), std::fabs(p[0]) * 1.01);
}

// ---------------------------------------------------------------------------------------------
// SVM

TEST(LearnSvm, GammaScaleMatchesHandComputation) {
  // Entries 0..5: mean 2.5, population variance 17.5 / 6; d = 2: gamma = 1 / (2 * 17.5 / 6).
  Matrix<double> X(3, 2, {0, 2, 4, 1, 3, 5});
  EXPECT_DOUBLE_EQ(gamma_scale(X), 6.0 / 35.0);
  EXPECT_DOUBLE_EQ(gamma_scale(Matrix<double>(2, 2, {3, 3, 3, 3})), 1.0);

  const Data train = blobs(120, 3, 4.0, 111, 4);
  auto model = make_model("svm", options_for("svm"));
  model->fit(train.X, train.y, 3);
  EXPECT_DOUBLE_EQ(model->info().gamma, gamma_scale(train.X));
  EXPECT_GT(model->info().support_vectors, 0);
  ModelOptions o = options_for("svm");
  o.svm.gamma = 0.25;
  auto fixed = make_model("svm", o);
  fixed->fit(train.X, train.y, 3);
  EXPECT_EQ(fixed->info().gamma, 0.25);
}

TEST(LearnSvm, ProbabilityColumnsFollowClassIndexNotLibsvmOrder) {
  // LIBSVM orders classes by first appearance; put class 2 first and class 0 last.
  Data train = blobs(150, 3, 6.0, 121);
  for (auto& v : train.y) v = 2 - v;
  const Data test = blobs(90, 3, 6.0, 122);
  std::vector<double> test_y(test.y);
  for (auto& v : test_y) v = 2 - v;
  auto model = make_model("svm", options_for("svm"));
  model->fit(train.X, train.y, 3);
  const auto p = model->predict_proba(test.X);
  std::vector<double> arg(static_cast<size_t>(p.rows()));
  for (index_t i = 0; i < p.rows(); ++i)
    for (index_t c = 1; c < 3; ++c)
      if (p(i, c) > p(i, static_cast<index_t>(arg[i]))) arg[i] = static_cast<double>(c);
  EXPECT_GE(accuracy(test_y, arg), 0.95);
}

TEST(LearnSvm, ProbabilitySeedControlsLibsvmCrossValidation) {
  const Data train = blobs(150, 3, 2.0, 131), test = blobs(50, 3, 2.0, 132);
  auto a = make_model("svm", options_for("svm", 1));
  auto b = make_model("svm", options_for("svm", 2));
  a->fit(train.X, train.y, 3);
  b->fit(train.X, train.y, 3);
  // Same decision function (the SVM itself does not depend on the seed)...
  EXPECT_EQ(a->predict(test.X), b->predict(test.X));
  // ...but different folds for the Platt scaling.
  EXPECT_NE(a->predict_proba(test.X).values(), b->predict_proba(test.X).values());
}

TEST(LearnSvm, LearnsRegression) {
  const Data train = regression_toy(300, 141), test = regression_toy(200, 142);
  auto model = make_model("svm", options_for("svm"));
  model->fit(train.X, train.y, 0);
  EXPECT_GE(r_squared(test.y, model->predict(test.X)), 0.9);
}

// ---------------------------------------------------------------------------------------------
// kNN

TEST(LearnKnn, MatchesBruteForceAcrossBlocks) {
  // 1100 training samples span three distance blocks; 53 queries leave a partial group of 4.
  Rng rng(151);
  Matrix<double> X(1100, 7), Q(53, 7);
  for (auto* m : {&X, &Q})
    for (index_t j = 0; j < m->cols(); ++j)
      for (index_t i = 0; i < m->rows(); ++i) (*m)(i, j) = rng.normal();
  std::vector<double> y(1100);
  std::iota(y.begin(), y.end(), 0.0);  // regression target = training index
  ModelOptions o;
  o.knn.k = 5;
  auto model = make_model("knn", o);
  model->fit(X, y, 0);
  const auto pred = model->predict(Q);
  for (index_t q = 0; q < Q.rows(); ++q) {
    std::vector<std::pair<double, index_t>> dist;
    for (index_t i = 0; i < X.rows(); ++i) {
      double s = 0;
      for (index_t f = 0; f < 7; ++f) s += (Q(q, f) - X(i, f)) * (Q(q, f) - X(i, f));
      dist.emplace_back(s, i);
    }
    std::sort(dist.begin(), dist.end());
    double mean = 0;
    for (int r = 0; r < 5; ++r) mean += static_cast<double>(dist[r].second) / 5;
    EXPECT_NEAR(pred[q], mean, 1e-9) << "query " << q;
  }
}

TEST(LearnKnn, RegressionIsNeighbourMean) {
  Matrix<double> X(10, 1);
  std::vector<double> y(10);
  for (int i = 0; i < 10; ++i) {
    X(i, 0) = i;
    y[i] = i * i;
  }
  auto model = make_model("knn");
  model->fit(X, y, 0);
  // Nearest five to 4.2: 4, 5, 3, 6, 2 -> (16 + 25 + 9 + 36 + 4) / 5.
  EXPECT_DOUBLE_EQ(model->predict(Matrix<double>(1, 1, {4.2}))[0], 18.0);
}

TEST(LearnKnn, VoteTieGoesToNearestNeighbourAndProbabilitiesAreFractions) {
  // Neighbours of 0.1 in order: x=0 (class 1), 1 (class 0), 2 (class 0), 3 (class 1):
  // two votes each; the nearest neighbour's class 1 wins (scikit-learn would pick class 0).
  Matrix<double> X(4, 1, {0, 1, 2, 3});
  ModelOptions o;
  o.knn.k = 4;
  auto model = make_model("knn", o);
  model->fit(X, {1, 0, 0, 1}, 3);
  EXPECT_EQ(model->predict(Matrix<double>(1, 1, {0.1}))[0], 1.0);
  EXPECT_EQ(model->predict(Matrix<double>(1, 1, {2.9}))[0], 1.0);
  const auto p = model->predict_proba(Matrix<double>(1, 1, {0.1}));
  EXPECT_EQ(p.values(), (std::vector<double>{0.5, 0.5, 0.0}));
  // With k = 3 there is a strict majority: 0.1 -> {1, 0, 0} -> class 0.
  o.knn.k = 3;
  auto three = make_model("knn", o);
  three->fit(X, {1, 0, 0, 1}, 2);
  EXPECT_EQ(three->predict(Matrix<double>(1, 1, {0.1}))[0], 0.0);
}

TEST(LearnKnn, ThreadCountDoesNotChangeResults) {
  const Data train = blobs(700, 3, 1.0, 161, 5), test = blobs(101, 3, 1.0, 162, 5);
  ModelOptions one, two;
  one.threads = 1;
  two.threads = 2;
  auto a = make_model("knn", one), b = make_model("knn", two);
  a->fit(train.X, train.y, 3);
  b->fit(train.X, train.y, 3);
  EXPECT_EQ(a->predict_proba(test.X).values(), b->predict_proba(test.X).values());
  EXPECT_EQ(a->predict(test.X), b->predict(test.X));
}

}  // namespace
}  // namespace dcalign::learn
