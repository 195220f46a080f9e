// NRI-DC (paper 004, Algorithm 1) in the experiment runner: what each party gets and returns,
// the permutation's (lack of) effect, the constant predictor, the summary statistics, the
// configuration errors and the per-trial test split.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "dcalign/experiment.hpp"
#include "dcalign/random.hpp"
#include "dcalign/user.hpp"
#include "experiment/common.hpp"
#include "experiment/config_files.hpp"
#include "experiment/nri_dc.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;
using experiment::nri::Release;

// Two Gaussian classes in m features: the class shifts the first three coordinates.
struct Data {
  Matrix<double> X;
  std::vector<double> y;
};
Data two_classes(index_t n, index_t m, std::uint64_t seed) {
  Rng rng(seed);
  Data d{Matrix<double>(n, m), std::vector<double>(static_cast<size_t>(n))};
  for (index_t i = 0; i < n; ++i) {
    const double cls = static_cast<double>(i % 2);
    d.y[static_cast<size_t>(i)] = cls;
    for (index_t j = 0; j < m; ++j) d.X(i, j) = rng.normal() + (j < 3 ? 2.0 * cls : 0.0);
  }
  return d;
}

experiment::nri::WorkerOptions worker_options(bool permute) {
  experiment::nri::WorkerOptions o;
  o.dim = 6;
  o.delta = 0.05;
  o.center = true;
  o.permute = permute;
  return o;
}

std::vector<std::vector<double>> rows_with_labels(const Release& r) {
  std::vector<std::vector<double>> rows;
  for (index_t i = 0; i < r.data.rows(); ++i) {
    std::vector<double> row;
    for (index_t q = 0; q < r.data.cols(); ++q) row.push_back(r.data(i, q));
    row.push_back(r.labels[static_cast<size_t>(i)]);
    rows.push_back(row);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

TEST(NriDc, WorkerReleaseShapesAndPermutation) {
  const Data d = two_classes(20, 8, 1);
  const Matrix<double> A = make_anchor<double>(30, 8, AnchorKind::normal, 2);
  const Release shuffled = experiment::nri::worker_release(d.X, d.y, A, worker_options(true), 7);
  const Release plain = experiment::nri::worker_release(d.X, d.y, A, worker_options(false), 7);
  EXPECT_EQ(shuffled.data.rows(), 20);
  EXPECT_EQ(shuffled.data.cols(), 6);
  EXPECT_EQ(shuffled.labels.size(), 20u);
  EXPECT_EQ(shuffled.anchor.rows(), 30);
  EXPECT_EQ(shuffled.anchor.cols(), 6);
  // P_i reorders the rows of (X~_i, Y_i) together and nothing else: the same multiset of rows,
  // the same anchor (E_i and P_i come from separate streams), but another order.
  EXPECT_EQ(rows_with_labels(shuffled), rows_with_labels(plain));
  ASSERT_EQ(shuffled.anchor.size(), plain.anchor.size());
  for (index_t k = 0; k < plain.anchor.size(); ++k)
    EXPECT_EQ(shuffled.anchor.data()[k], plain.anchor.data()[k]);
  EXPECT_NE(shuffled.labels, plain.labels);
  EXPECT_EQ(plain.labels, d.y);
  // A different seed draws a different E_i, hence (slightly) different releases.
  const Release other = experiment::nri::worker_release(d.X, d.y, A, worker_options(false), 8);
  EXPECT_NE(other.anchor(0, 0), plain.anchor(0, 0));
  // With delta = 0 the basis is the clean data's PCA, and both the data and the anchor are
  // shifted by the data's mean before projecting (scikit-learn's PCA.transform).
  auto o = worker_options(false);
  o.delta = 0;
  const Release exact = experiment::nri::worker_release(d.X, d.y, A, o, 7);
  const Matrix<double> V = top_right_singular_vectors(d.X, 6, true);
  std::vector<double> mu(8, 0.0);
  for (index_t j = 0; j < 8; ++j)
    for (index_t i = 0; i < 20; ++i) mu[static_cast<size_t>(j)] += d.X(i, j) / 20;
  for (index_t q = 0; q < 6; ++q) {
    for (index_t i = 0; i < 20; ++i) {
      double v = 0;
      for (index_t j = 0; j < 8; ++j) v += (d.X(i, j) - mu[static_cast<size_t>(j)]) * V(j, q);
      EXPECT_NEAR(exact.data(i, q), v, 1e-12);
    }
    for (index_t i = 0; i < 30; ++i) {
      double v = 0;
      for (index_t j = 0; j < 8; ++j) v += (A(i, j) - mu[static_cast<size_t>(j)]) * V(j, q);
      EXPECT_NEAR(exact.anchor(i, q), v, 1e-12);
    }
  }
}

std::vector<Release> releases(bool permute, index_t workers = 4) {
  const Matrix<double> A = make_anchor<double>(200, 8, AnchorKind::normal, 3);
  std::vector<Release> out;
  for (index_t i = 0; i < workers; ++i) {
    const Data d = two_classes(40, 8, 100 + static_cast<std::uint64_t>(i));
    out.push_back(experiment::nri::worker_release(d.X, d.y, A, worker_options(permute),
                                                  200 + static_cast<std::uint64_t>(i)));
  }
  return out;
}

experiment::nri::MasterOptions master_options(const std::string& model, Method method) {
  experiment::nri::MasterOptions o;
  o.align.method = method;
  o.align.evaluate = false;
  o.model = model;
  o.model_options.threads = 1;
  o.num_classes = 2;
  return o;
}

// The master gets the releases only and returns one vector of r anchor labels per worker.
TEST(NriDc, MasterReturnsOnlyAnchorLabelsPerWorker) {
  auto backend = make_backend(Device::cpu);
  const auto rel = releases(true);
  for (Method method : {Method::imakura, Method::gopp, Method::odc}) {
    const auto labels = experiment::nri::master(rel, master_options("logreg", method), *backend);
    ASSERT_EQ(labels.size(), rel.size());
    for (const auto& l : labels) {
      ASSERT_EQ(l.size(), 200u);
      for (double v : l) EXPECT_TRUE(v == 0.0 || v == 1.0);
    }
  }
}

// With kNN as h, the permutation changes nothing the master returns: kNN's fit keeps the
// training set, and its predictions depend on the set of (row, label) pairs alone (the order
// would only break ties of equal distances, which continuous data do not have), while G_i comes
// from the anchors, which P_i does not touch. (logreg's L-BFGS sums its gradient in row order,
// so its labels could differ in a last-bit tie.)
TEST(NriDc, PermutationDoesNotChangeTheAnchorLabels) {
  auto backend = make_backend(Device::cpu);
  const auto with =
      experiment::nri::master(releases(true), master_options("knn", Method::imakura), *backend);
  const auto without =
      experiment::nri::master(releases(false), master_options("knn", Method::imakura), *backend);
  EXPECT_EQ(with, without);
  // Not trivially: the labels are not all one class.
  const std::set<double> classes(with[0].begin(), with[0].end());
  EXPECT_EQ(classes.size(), 2u);
}

TEST(NriDc, SingleClassAnchorLabelsGiveTheConstantPredictor) {
  const Data test = two_classes(50, 8, 9);
  const Matrix<double> A = make_anchor<double>(100, 8, AnchorKind::normal, 4);
  learn::ModelOptions mo;
  mo.threads = 1;
  const auto res = experiment::nri::worker_finish(A, std::vector<double>(100, 1.0), test.X, test.y,
                                                  "logreg", mo, 2, {"roc_auc", "accuracy"});
  EXPECT_TRUE(res.constant);
  EXPECT_EQ(res.scores.at("roc_auc"), 0.5);
  EXPECT_EQ(res.scores.at("accuracy"), 0.5);  // half the test rows are class 1
  // Two classes: a real t_i, which separates these classes well.
  std::vector<double> labels(100);
  for (index_t i = 0; i < 100; ++i) labels[static_cast<size_t>(i)] = A(i, 0) > 0 ? 1.0 : 0.0;
  const auto fitted =
      experiment::nri::worker_finish(A, labels, test.X, test.y, "logreg", mo, 2, {"roc_auc"});
  EXPECT_FALSE(fitted.constant);
  EXPECT_GT(fitted.scores.at("roc_auc"), 0.8);
}

TEST(NriDc, DescribeMatchesHandComputedValues) {
  // 1, 2, 3, 4: positions 0.75, 1.5, 2.25 of (n - 1) = 3; std^2 = (2.25 + .25 + .25 + 2.25) / 3.
  auto d = experiment::describe({4, 1, 3, 2});
  EXPECT_EQ(d.count, 4);
  EXPECT_DOUBLE_EQ(d.mean, 2.5);
  EXPECT_DOUBLE_EQ(d.std, std::sqrt(5.0 / 3.0));
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.q25, 1.75);
  EXPECT_DOUBLE_EQ(d.q50, 2.5);
  EXPECT_DOUBLE_EQ(d.q75, 3.25);
  EXPECT_DOUBLE_EQ(d.max, 4);
  // 0.1 ... 0.9: the quartiles fall on order statistics; std^2 = 0.4 / 4.
  d = experiment::describe({0.5, 0.9, 0.1, 0.3, 0.7});
  EXPECT_DOUBLE_EQ(d.q25, 0.3);
  EXPECT_DOUBLE_EQ(d.q50, 0.5);
  EXPECT_DOUBLE_EQ(d.q75, 0.7);
  EXPECT_NEAR(d.std, std::sqrt(0.1), 1e-15);
  // Position 0.9 * 4 = 3.6 between 4 and 10: 4 + 0.6 * 6.
  EXPECT_DOUBLE_EQ(experiment::quantile_sorted({1, 2, 3, 4, 10}, 0.9), 7.6);
  d = experiment::describe({0.7});
  EXPECT_TRUE(std::isnan(d.std));
  EXPECT_EQ(d.q25, 0.7);
  EXPECT_EQ(d.q75, 0.7);
  EXPECT_THROW(experiment::describe({}), InvalidInput);
  EXPECT_THROW(experiment::quantile_sorted({1.0}, 1.5), InvalidInput);
}

experiment::Config small_nri() {
  experiment::Config c;
  c.name = "nri_smoke";
  c.protocol = "nri-dc";
  c.dataset = "synthetic";  // ARTIFICIAL Gaussian classes, 64 features, official test split
  c.users = 4;
  c.samples_per_user = 40;
  c.test_samples = 300;
  c.anchor_rows = 300;
  c.anchor = "normal";
  c.dim = 10;
  c.methods = {"central", "local", "imakura", "gopp"};
  c.models = {"knn"};
  c.metrics = {"roc_auc"};
  c.trials = 2;
  c.seed = 3;
  c.threads = 1;
  return c;
}

bool is_baseline(const std::string& m) { return m == "central" || m == "local"; }

TEST(NriDc, RunRecordsMeanAucAndConstantWorkers) {
  const auto res = experiment::run(small_nri());
  std::map<std::string, int> auc, constant, timed;
  for (const auto& r : res.records) {
    EXPECT_EQ(r.condition, "-");
    if (r.metric == "roc_auc") {
      ++auc[r.method];
      // Ten separable classes; chance is 0.5. The methods lose more than the baselines: t_i
      // learns from a standard normal anchor, far from where these data lie.
      EXPECT_GT(r.value, is_baseline(r.method) ? 0.9 : 0.55) << r.method;
      EXPECT_LE(r.value, 1.0);
    } else if (r.metric == "align_seconds") {
      ++timed[r.method];
      EXPECT_GT(r.value, 0) << r.method;
      EXPECT_LT(r.value, 60) << r.method;
    } else {
      EXPECT_EQ(r.metric, "constant_workers");
      ++constant[r.method];
      EXPECT_GE(r.value, 0);
      EXPECT_LE(r.value, 4);
    }
  }
  // One alignment per trial, method and model; none for the baselines.
  EXPECT_EQ(timed["imakura"], 2);
  EXPECT_EQ(timed["gopp"], 2);
  EXPECT_EQ(timed.count("central") + timed.count("local"), 0u);
  for (const char* m : {"central", "local", "imakura", "gopp"}) EXPECT_EQ(auc[m], 2) << m;
  EXPECT_EQ(constant["imakura"], 2);
  EXPECT_EQ(constant["gopp"], 2);
  EXPECT_EQ(constant.count("central"), 0u);
  const std::string md = experiment::summary_table(res);
  for (const char* s : {"| 25% |", "| 75% |", "| std |", "mean ± 95% CI", "constant t_i",
                        "| central | local | imakura | gopp |", "of 8 |",
                        "time to compute all G_i (milliseconds", "| imakura | gopp |"})
    EXPECT_NE(md.find(s), std::string::npos) << s << " missing in\n" << md;
  // Same seed, same numbers.
  const auto again = experiment::run(small_nri());
  ASSERT_EQ(again.records.size(), res.records.size());
  for (size_t k = 0; k < res.records.size(); ++k)
    if (res.records[k].metric != "align_seconds") {  // a wall-clock time
      EXPECT_EQ(again.records[k].value, res.records[k].value);
    }
}

using testing::expect_config_error;
using testing::load_toml;

template <typename F>
void expect_message(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    for (const auto& s : fragments)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  }
}

TEST(NriDc, ConfigErrorsNameTheKeyBeforeAnyWork) {
  const std::string d = "dataset = \"synthetic\"\nprotocol = \"nri-dc\"\n";
  expect_config_error(d + "nri_delta = -0.1\n", {"'nri_delta'", "[0, inf)"});
  expect_config_error(d + "nri_delta = nan\n", {"'nri_delta'", "finite"});
  expect_config_error("dataset = \"synthetic\"\nprotocol = \"nri\"\n",
                      {"'protocol'", "\"nri-dc\""});
  expect_config_error(d + "conditions = [\"DiffSpan\"]\n", {"'conditions'"});
  expect_config_error("dataset = \"synthetic\"\ntest_holder = \"shared\"\n",
                      {"'test_holder'", "nri-dc"});
  expect_config_error(d + "kawakami_form = \"svd\"\n", {"kawakami_form 'svd' is unknown"});
  expect_config_error(d + "mlp_early_stopping = 1\n", {"'mlp_early_stopping'"});
  expect_config_error(d + "rdp_eta = -1e-3\n",
                      {"rdp_eta -0.001 is out of range", "a finite number >= 0"});
  expect_config_error(d + "gopp_tolerance = inf\n",
                      {"gopp_tolerance inf is out of range", "finite"});
  // Per-protocol defaults: NRI-DC centres (scikit-learn's PCA) and shares the test set.
  auto c = load_toml(d);
  EXPECT_TRUE(c.centered());
  EXPECT_EQ(c.holder(), "shared");
  EXPECT_EQ(c.nri_delta, 0.05);
  EXPECT_TRUE(c.nri_permute);
  // (Keys of a model or method are read only where the file lists it.)
  c = load_toml(d + "center = false\ntest_holder = \"own\"\nnri_permute = false\n" +
                "models = [\"mlp\"]\nmethods = [\"kawakami\"]\n" +
                "mlp_early_stopping = false\nkawakami_form = \"eigen\"\n");
  EXPECT_FALSE(c.centered());
  EXPECT_EQ(c.holder(), "own");
  EXPECT_FALSE(c.nri_permute);
  EXPECT_FALSE(c.model_options.mlp.early_stopping);
  EXPECT_EQ(c.kawakami_form, "eigen");
  EXPECT_FALSE(c.rdp_eta.has_value());  // the library's defaults
  EXPECT_FALSE(c.gopp_tolerance.has_value());
  c = load_toml(d + "methods = [\"rdp-ls\", \"gopp\"]\nrdp_eta = 0.5\ngopp_tolerance = 0\n");
  EXPECT_EQ(c.rdp_eta.value_or(-1), 0.5);
  EXPECT_EQ(c.gopp_tolerance.value_or(-1), 0.0);
  c = load_toml("dataset = \"synthetic\"\n");
  EXPECT_FALSE(c.centered());
  EXPECT_EQ(c.holder(), "own");
  // Configs built in code are checked by run() before any work.
  auto bad = small_nri();
  bad.dim = 65;  // m~ > m = 64
  expect_message([&] { experiment::run(bad); }, {"dim", "exceeds the 64 features"});
  bad = small_nri();
  bad.models = {"boosting"};
  expect_message([&] { experiment::run(bad); }, {"unknown model 'boosting'", "'models'"});
  bad = small_nri();
  bad.nri_delta = -1;
  expect_message([&] { experiment::run(bad); }, {"'nri_delta'"});
  bad = small_nri();
  bad.protocol = "dc";
  bad.test_holder = "shared";
  expect_message([&] { experiment::run(bad); }, {"'test_holder'"});
}

// Without an official test split, every trial draws its own test set from its seed.
TEST(NriDc, TestSplitIsDrawnPerTrialFromTheSeed) {
  data::Dataset all;
  all.num_classes = 2;
  all.X = Matrix<double>(200, 3);
  for (index_t i = 0; i < 200; ++i) {
    all.X(i, 0) = static_cast<double>(i);  // the row's identity
    all.y.push_back(static_cast<double>(i % 2));
  }
  data::Dataset no_test = all;
  no_test.X = Matrix<double>(0, 3);
  no_test.y.clear();
  experiment::Config c;
  c.users = 3;
  c.samples_per_user = 20;
  c.seed = 11;
  auto test_ids = [](const experiment::Split& sp) {
    std::set<double> ids;
    for (const auto& Y : sp.Y)
      for (index_t i = 0; i < Y.rows(); ++i) ids.insert(Y(i, 0));
    return ids;
  };
  auto train_ids = [](const experiment::Split& sp) {
    std::set<double> ids;
    for (const auto& X : sp.X)
      for (index_t i = 0; i < X.rows(); ++i) ids.insert(X(i, 0));
    return ids;
  };
  const auto t0 = experiment::draw_split(c, all, no_test, 50, 0);
  const auto t0_again = experiment::draw_split(c, all, no_test, 50, 0);
  const auto t1 = experiment::draw_split(c, all, no_test, 50, 1);
  EXPECT_EQ(test_ids(t0).size(), 50u);
  EXPECT_EQ(test_ids(t0), test_ids(t0_again));
  EXPECT_EQ(train_ids(t0), train_ids(t0_again));
  EXPECT_NE(test_ids(t0), test_ids(t1));
  // Test rows never train.
  for (double id : test_ids(t0)) EXPECT_EQ(train_ids(t0).count(id), 0u) << id;
  EXPECT_EQ(train_ids(t0).size(), 60u);
  // Another run seed, other test sets.
  c.seed = 12;
  EXPECT_NE(test_ids(experiment::draw_split(c, all, no_test, 50, 0)), test_ids(t0));
}

}  // namespace
}  // namespace dcalign
