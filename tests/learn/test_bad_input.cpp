// Invalid arguments are rejected with dcalign::InvalidInput whose message says what was wrong,
// where, and what was expected.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dcalign/learn.hpp"

namespace dcalign::learn {
namespace {

// Runs f, requires InvalidInput, and checks that the message contains every fragment.
template <typename F>
void expect_invalid(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected InvalidInput mentioning " << fragments[0];
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// Ten 2-d samples of two classes; enough for k = 5 and an early-stopping split.
Matrix<double> small_X() {
  return Matrix<double>(10, 2, {0, 1, 2, 3, 4, 10, 11, 12, 13, 14,  //
                                0, 1, 0, 1, 0, 10, 11, 10, 11, 10});
}
const std::vector<double> kSmallY{0, 0, 0, 0, 0, 1, 1, 1, 1, 1};

class LearnBadInput : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Model> model() const {
    ModelOptions o;
    o.threads = 1;
    o.svm.probability = true;
    return make_model(GetParam(), o);
  }
};

TEST_P(LearnBadInput, FitArguments) {
  const std::string fit = GetParam() + ".fit";
  auto m = model();
  const Matrix<double> X = small_X();
  expect_invalid([&] { m->fit(X, std::vector<double>(9, 0.0), 2); },
                 {fit, "y has 9 entries", "X has 10 rows"});
  expect_invalid([&] { m->fit(Matrix<double>(0, 2), {}, 2); }, {fit, "0 x 2"});
  Matrix<double> nan_X = X;
  nan_X(3, 1) = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { m->fit(nan_X, kSmallY, 2); }, {fit, "X(3, 1)", "nan", "finite"});
  Matrix<double> inf_X = X;
  inf_X(0, 0) = -std::numeric_limits<double>::infinity();
  expect_invalid([&] { m->fit(inf_X, kSmallY, 2); }, {fit, "X(0, 0)", "-inf"});
  expect_invalid([&] { m->fit(X, kSmallY, 1); }, {fit, "num_classes = 1", "at least 2"});
  expect_invalid([&] { m->fit(X, kSmallY, -3); }, {fit, "num_classes = -3"});
  auto y = kSmallY;
  y[7] = 2;
  expect_invalid([&] { m->fit(X, y, 2); }, {fit, "y[7] = 2", "class index in 0..1"});
  y[7] = -1;
  expect_invalid([&] { m->fit(X, y, 2); }, {fit, "y[7] = -1"});
  y[7] = 0.5;
  expect_invalid([&] { m->fit(X, y, 2); }, {fit, "y[7] = 0.5"});
  y[7] = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { m->fit(X, y, 2); }, {fit, "y[7]"});
  if (GetParam() != "logreg") expect_invalid([&] { m->fit(X, y, 0); }, {fit, "y[7]", "finite"});
  EXPECT_FALSE(m->fitted());
}

TEST_P(LearnBadInput, PredictArguments) {
  const std::string name = GetParam();
  auto m = model();
  const Matrix<double> X = small_X();
  expect_invalid([&] { m->predict(X); }, {name + ".predict", "before fit"});
  expect_invalid([&] { m->predict_proba(X); }, {name + ".predict_proba", "before fit"});
  m->fit(X, kSmallY, 2);
  expect_invalid([&] { m->predict(Matrix<double>(2, 3)); },
                 {name + ".predict", "3 features", "expected 2"});
  expect_invalid([&] { m->predict_proba(Matrix<double>(2, 1)); },
                 {name + ".predict_proba", "1 features", "expected 2"});
  Matrix<double> nan_X(1, 2);
  nan_X(0, 1) = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { m->predict(nan_X); }, {name + ".predict", "X(0, 1)"});
  // Zero rows are fine.
  EXPECT_TRUE(m->predict(Matrix<double>(0, 2)).empty());
  EXPECT_EQ(m->predict_proba(Matrix<double>(0, 2)).cols(), 2);
}

TEST_P(LearnBadInput, RegressionModelHasNoProbabilities) {
  auto m = model();
  if (GetParam() == "logreg") {
    expect_invalid([&] { m->fit(small_X(), kSmallY, 0); }, {"logreg.fit", "regression"});
    return;
  }
  m->fit(small_X(), kSmallY, 0);
  expect_invalid([&] { m->predict_proba(small_X()); },
                 {GetParam() + ".predict_proba", "regression"});
}

INSTANTIATE_TEST_SUITE_P(Learn, LearnBadInput,
                         ::testing::Values("mlp", "logreg", "svm", "knn", "forest"),
                         [](const auto& info) { return info.param; });

TEST(LearnBadInputOptions, FactoryRejectsUnknownModelsAndBadOptions) {
  expect_invalid([] { make_model("boosting"); }, {"boosting", "mlp, logreg, svm, knn, forest"});
  ModelOptions o;
  o.knn.k = 0;
  expect_invalid([&] { make_model("knn", o); }, {"knn.k = 0"});
  o = ModelOptions();
  o.mlp.batch_size = 0;
  expect_invalid([&] { make_model("mlp", o); }, {"mlp.batch_size = 0"});
  o = ModelOptions();
  o.mlp.hidden_layers = {256, 0};
  expect_invalid([&] { make_model("mlp", o); }, {"hidden_layers[1] = 0"});
  o = ModelOptions();
  o.mlp.validation_fraction = 1.0;
  expect_invalid([&] { make_model("mlp", o); }, {"validation_fraction"});
  o = ModelOptions();
  o.logreg.C = 0;
  expect_invalid([&] { make_model("logreg", o); }, {"logreg.C"});
  o = ModelOptions();
  o.threads = -1;
  expect_invalid([&] { make_model("svm", o); }, {"threads = -1"});
  o = ModelOptions();
  o.forest.n_estimators = 0;
  expect_invalid([&] { make_model("forest", o); }, {"forest.n_estimators = 0"});
  o = ModelOptions();
  o.forest.max_depth = -1;
  expect_invalid([&] { make_model("forest", o); }, {"forest.max_depth = -1"});
  o = ModelOptions();
  o.forest.subsample = 0;
  expect_invalid([&] { make_model("forest", o); }, {"forest.subsample = 0", "(0, 1]"});
  o.forest.subsample = 1.5;
  expect_invalid([&] { make_model("forest", o); }, {"forest.subsample = 1.5"});
  o = ModelOptions();
  o.forest.max_features = 2;
  expect_invalid([&] { make_model("forest", o); }, {"forest.max_features = 2"});
  o.forest.max_features = std::nan("");
  expect_invalid([&] { make_model("forest", o); }, {"forest.max_features = nan"});
  o = ModelOptions();
  o.forest.tree_method = "approx";
  expect_invalid([&] { make_model("forest", o); }, {"forest.tree_method = \"approx\"", "hist"});
  o = ModelOptions();
  o.device = "tpu";
  expect_invalid([&] { make_model("mlp", o); }, {"tpu", "cpu"});
}

TEST(LearnBadInputOptions, ModelSpecificFitFailures) {
  ModelOptions o;
  o.svm.C = -1;
  expect_invalid([&] { make_model("svm", o)->fit(small_X(), kSmallY, 2); },
                 {"svm.fit", "LIBSVM rejected", "C <= 0"});
  o = ModelOptions();
  o.svm.cache_mb = 0;
  expect_invalid([&] { make_model("svm", o)->fit(small_X(), kSmallY, 2); },
                 {"svm.fit", "cache_size"});
  expect_invalid([&] { make_model("svm")->fit(small_X(), std::vector<double>(10, 1.0), 3); },
                 {"svm.fit", "class 1", "two classes"});
  auto no_proba = make_model("svm");
  no_proba->fit(small_X(), kSmallY, 2);
  expect_invalid([&] { no_proba->predict_proba(small_X()); },
                 {"svm.predict_proba", "probability = true"});
  expect_invalid(
      [&] {
        make_model("knn")->fit(Matrix<double>(3, 2), {0, 1, 0}, 2);
      },
      {"knn.fit", "k = 5", "got 3"});
  expect_invalid([&] { make_model("mlp")->fit(Matrix<double>(1, 2), {0}, 2); },
                 {"mlp.fit", "1 samples", "validation split"});
  // XGBoost stores features in single precision: larger values are refused, not turned into
  // infinities.
  Matrix<double> huge = small_X();
  huge(4, 1) = -1e300;
  auto forest = make_model("forest");
  expect_invalid([&] { forest->fit(huge, kSmallY, 2); },
                 {"forest.fit", "X(4, 1)", "e+300", "single precision"});
  std::vector<double> huge_y(10, 1.0);
  huge_y[6] = 1e39;
  expect_invalid([&] { forest->fit(small_X(), huge_y, 0); },
                 {"forest.fit", "y[6]", "single precision"});
  forest->fit(small_X(), kSmallY, 2);
  expect_invalid([&] { forest->predict(huge); }, {"forest.predict", "X(4, 1)"});
}

TEST(LearnBadInputMetrics, MetricsRejectBadArguments) {
  expect_invalid([] { accuracy({0, 1}, {0}); }, {"accuracy", "2 true values", "1 predictions"});
  expect_invalid([] { accuracy({}, {}); }, {"accuracy", "no samples"});
  expect_invalid([] { rmse({1.0}, {std::nan("")}); }, {"rmse", "y_pred[0]"});
  expect_invalid([] { roc_auc({1, 1, 1}, {0.1, 0.2, 0.3}); }, {"roc_auc", "only class 1"});
  expect_invalid([] { roc_auc({0, 2, 1}, {0.1, 0.2, 0.3}); }, {"roc_auc", "y_true[1] = 2"});
  expect_invalid([] { roc_auc({0, 1}, {0.1, std::nan("")}); }, {"roc_auc", "score[1]"});
  expect_invalid(
      [] {
        average_precision({0, 0}, {0.1, 0.2});
      },
      {"average_precision", "no positive"});
  expect_invalid(
      [] {
        roc_auc_ovr({0, 1, 3}, Matrix<double>(3, 3));
      },
      {"roc_auc", "y_true[2] = 3", "0..2"});
  expect_invalid([] { roc_auc_ovr({0, 1}, Matrix<double>(2, 1)); }, {"roc_auc", "1 columns"});
  // A class missing from y_true leaves its one-vs-rest AUC undefined.
  expect_invalid([] { roc_auc_ovr({0, 1, 0}, Matrix<double>(3, 3)); }, {"class 2 vs rest"});
  expect_invalid([] { summarize({}); }, {"summarize", "no values"});
  expect_invalid([] { summarize({1, 2}, 1.0); }, {"summarize", "level = 1"});
  expect_invalid([] { student_t_quantile(1.0, 5); }, {"student_t_quantile", "p = 1"});
  expect_invalid([] { student_t_quantile(0.5, 0); }, {"student_t_quantile", "dof = 0"});
  expect_invalid([] { incomplete_beta(1.5, 1, 1); }, {"incomplete_beta", "x = 1.5"});
  expect_invalid([] { gamma_scale(Matrix<double>(0, 3)); }, {"gamma_scale", "non-empty"});
}

}  // namespace
}  // namespace dcalign::learn
