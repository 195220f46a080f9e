// Paper 001 section 8's paired design: redraw = "alignment" keeps every trial's data, bases and
// anchor and redraws only O or R; methods name their variant ("odc:identity", "odc:haar",
// "imakura:identity", "imakura:uniform"). kNN is invariant to orthogonal maps, so ODC with a
// Haar O scores exactly as with O = I (the paper's +0.00 for ODC under the SVM), while Imakura-DC
// with a random R does not. Also the analyst-side standardisation of the aligned data.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "dcalign/experiment.hpp"
#include "dcalign/random.hpp"
#include "experiment/common.hpp"
#include "experiment/config_files.hpp"

namespace dcalign {
namespace {

experiment::Config paired() {
  experiment::Config c;
  c.name = "paired";
  c.dataset = "synthetic";
  c.users = 4;
  c.samples_per_user = 80;
  c.test_samples = 400;
  c.anchor_rows = 200;
  c.dim = 12;
  c.conditions = {SpanCondition::same_span_orth, SpanCondition::diff_span};
  c.methods = {"central", "odc:identity", "odc:haar", "imakura:identity", "imakura:uniform"};
  c.models = {"knn"};
  c.trials = 4;
  c.seed = 21;
  c.threads = 1;
  c.redraw = "alignment";
  return c;
}

TEST(ExperimentPairedDesign, OnlyTheRandomFactorChangesFromTrialToTrial) {
  const auto res = experiment::run(paired());
  // (condition, method) -> accuracy per trial
  std::map<std::pair<std::string, std::string>, std::vector<double>> acc;
  for (const auto& r : res.records)
    if (r.metric == "accuracy") acc[{r.condition, r.method}].push_back(r.value);
  ASSERT_EQ(acc.size(), 1u + 2u * 4u);
  for (const auto& [key, values] : acc) ASSERT_EQ(values.size(), 4u) << key.second;
  const auto constant = [](const std::vector<double>& v) {
    return std::set<double>(v.begin(), v.end()).size() == 1;
  };
  EXPECT_TRUE(constant(acc[{"-", "central"}]));
  for (const std::string cond : {"SameSpan-Orth", "DiffSpan"}) {
    EXPECT_TRUE(constant(acc[{cond, "odc:identity"}])) << cond;
    EXPECT_TRUE(constant(acc[{cond, "imakura:identity"}])) << cond;
    // A Haar O rotates every user's aligned data alike: kNN's distances do not change.
    const auto& haar = acc[{cond, "odc:haar"}];
    const auto& identity = acc[{cond, "odc:identity"}];
    EXPECT_EQ(haar, identity) << cond;
    // A random R is not orthogonal: the scores move with it.
    EXPECT_FALSE(constant(acc[{cond, "imakura:uniform"}])) << cond;
  }
  // With every draw redone ("all"), the identity variants vary with the data.
  auto all = paired();
  all.redraw = "all";
  all.methods = {"odc:identity"};
  std::vector<double> v;
  for (const auto& r : experiment::run(all).records)
    if (r.metric == "accuracy" && r.condition == "SameSpan-Orth") v.push_back(r.value);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_FALSE(constant(v));
}

TEST(ExperimentPairedDesign, BadVariantsAndRedrawFail) {
  auto c = paired();
  c.methods = {"odc:uniform"};
  EXPECT_THROW(experiment::run(c), InvalidInput);
  c.methods = {"gopp:haar"};
  EXPECT_THROW(experiment::run(c), InvalidInput);
  c.methods = {"odc", "odc"};
  EXPECT_THROW(experiment::run(c), InvalidInput);
  c = paired();
  c.redraw = "data";
  EXPECT_THROW(experiment::run(c), InvalidInput);
  testing::expect_config_error("dataset = \"synthetic\"\nredraw = \"trial\"\n", {"redraw"});
  const auto ok = testing::load_toml(
      "dataset = \"synthetic\"\nredraw = \"alignment\"\nstandardize_aligned = true\n"
      "standardize = false\n"
      "methods = [\"odc:identity\", \"imakura:uniform\"]\n");
  EXPECT_EQ(ok.redraw, "alignment");
  EXPECT_TRUE(ok.standardize_aligned);
  EXPECT_FALSE(ok.standardize);
}

TEST(ExperimentStandardize, TrainStatisticsAppliedToBoth) {
  Rng rng(3);
  Matrix<double> train = random_normal<double>(50, 3, rng),
                 test = random_normal<double>(20, 3, rng);
  for (index_t i = 0; i < 50; ++i) {
    train(i, 0) = 0.05 * train(i, 0) + 2.0;  // small and shifted, as Imakura-DC's features
    train(i, 2) = 7.0;                       // constant
  }
  const Matrix<double> train0 = train, test0 = test;
  experiment::standardize_aligned(train, test);
  for (index_t j = 0; j < 3; ++j) {
    double mean = 0, mean0 = 0, sq = 0;
    for (index_t i = 0; i < 50; ++i) mean += train(i, j) / 50, mean0 += train0(i, j) / 50;
    for (index_t i = 0; i < 50; ++i) sq += (train0(i, j) - mean0) * (train0(i, j) - mean0) / 50;
    const double sd = j == 2 ? 1.0 : std::sqrt(sq);  // a constant column keeps sd 1
    EXPECT_NEAR(mean, 0.0, 1e-12) << j;
    for (index_t i = 0; i < 20; ++i)
      EXPECT_NEAR(test(i, j), (test0(i, j) - mean0) / sd, 1e-12) << j;
    if (j < 2) {
      double var = 0;
      for (index_t i = 0; i < 50; ++i) var += train(i, j) * train(i, j) / 50;
      EXPECT_NEAR(var, 1.0, 1e-12) << j;
    }
  }
  // In a run: the switch changes Imakura-DC's kNN scores (the features are rescaled per column)
  // and leaves Central alone.
  auto c = paired();
  c.redraw = "all";
  c.trials = 2;
  c.conditions = {SpanCondition::diff_span};
  c.methods = {"central", "imakura"};
  const auto off = experiment::run(c);
  c.standardize_aligned = true;
  const auto on = experiment::run(c);
  ASSERT_EQ(off.records.size(), on.records.size());
  bool changed = false;
  for (size_t k = 0; k < on.records.size(); ++k) {
    if (on.records[k].method == "central") {
      EXPECT_EQ(on.records[k].value, off.records[k].value);
    }
    if (on.records[k].method == "imakura" && on.records[k].value != off.records[k].value)
      changed = true;
  }
  EXPECT_TRUE(changed);
}

}  // namespace
}  // namespace dcalign
