// Vertical partitions (paper 001 Table 8): "vertical" (disjoint rows, half of the users on each
// feature block) and "vertical-joined" (pairs of users on the same rows). The joined pairs with
// whole blocks are, by construction, horizontal users with the block-diagonal basis
// blkdiag(F_k, F_{k+c/2}): with orthogonal square bases, Imakura-DC's and ODC's aligned data are
// then the horizontal run's up to an orthogonal map, so kNN scores the same. Bad settings fail
// before any training.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "dcalign/experiment.hpp"
#include "experiment/config_files.hpp"

namespace dcalign {
namespace {

experiment::Config synthetic(const std::string& partition, index_t users, index_t dim) {
  experiment::Config c;
  c.name = "vertical";
  c.dataset = "synthetic";  // 64 features, each its own attribute: blocks of 32 and 32
  c.partition = partition;
  c.users = users;
  c.samples_per_user = 100;
  c.test_samples = 400;
  c.anchor_rows = 200;
  c.dim = dim;
  c.conditions = {SpanCondition::diff_span_orth};
  c.methods = {"central", "local", "imakura", "odc"};
  c.models = {"knn"};
  c.trials = 2;
  c.seed = 11;
  c.threads = 1;
  return c;
}

using Key = std::tuple<index_t, std::string, std::string>;  // trial, condition, method
std::map<Key, double> accuracy(const experiment::Result& r) {
  std::map<Key, double> out;
  for (const auto& rec : r.records)
    if (rec.metric == "accuracy") out[{rec.trial, rec.condition, rec.method}] = rec.value;
  return out;
}

TEST(ExperimentVertical, JoinedPairsWithWholeBlocksAreHorizontalUsers) {
  // 4 users, l = 32 per block (the whole block) vs the 2 pairs as horizontal users, l = 64.
  const auto joined = accuracy(experiment::run(synthetic("vertical-joined", 4, 32)));
  const auto horizontal = accuracy(experiment::run(synthetic("iid", 2, 64)));
  for (index_t t = 0; t < 2; ++t) {
    for (const std::string m : {"imakura", "odc"}) {
      const Key k{t, "DiffSpan-Orth", m};
      ASSERT_TRUE(joined.count(k) && horizontal.count(k)) << m;
      EXPECT_EQ(joined.at(k), horizontal.at(k)) << m << ", trial " << t;
      EXPECT_GT(joined.at(k), 0.5) << m;  // 10 classes: far above chance
    }
    // Central pools the same rows with all features in both runs.
    EXPECT_EQ(joined.at({t, "-", "central"}), horizontal.at({t, "-", "central"}));
    // Local: a user alone on half of the features of its rows.
    EXPECT_LT(joined.at({t, "-", "local"}), joined.at({t, "-", "central"}));
  }
}

TEST(ExperimentVertical, DisjointRowsAlignAllUsers) {
  const auto res = experiment::run(synthetic("vertical", 4, 16));
  const auto acc = accuracy(res);
  for (index_t t = 0; t < 2; ++t) {
    for (const std::string m : {"imakura", "odc"})
      EXPECT_GT(acc.at({t, "DiffSpan-Orth", m}), 0.3) << m;
    EXPECT_GT(acc.at({t, "-", "central"}), acc.at({t, "-", "local"}));
  }
  // Central is the horizontal run's (the same rows with all features).
  const auto horizontal = accuracy(experiment::run(synthetic("iid", 4, 16)));
  EXPECT_EQ(acc.at({0, "-", "central"}), horizontal.at({0, "-", "central"}));
  // SameSpan shares the span of each block's first user; it runs and aligns too.
  auto same = synthetic("vertical", 4, 16);
  same.conditions = {SpanCondition::same_span_orth, SpanCondition::same_span};
  same.trials = 1;
  const auto s = accuracy(experiment::run(same));
  EXPECT_GT(s.at({0, "SameSpan-Orth", "odc"}), 0.3);
  EXPECT_GT(s.at({0, "SameSpan", "imakura"}), 0.3);
  // "first": user 1 holds the whole test set (its block of it).
  auto first = synthetic("vertical-joined", 4, 16);
  first.test_holder = "first";
  first.trials = 1;
  const auto f = accuracy(experiment::run(first));
  EXPECT_GT(f.at({0, "DiffSpan-Orth", "imakura"}), 0.3);
  EXPECT_GT(f.at({0, "-", "local"}), 0.1);
}

TEST(ExperimentVertical, BadSettingsFailBeforeTraining) {
  auto expect_error = [](const experiment::Config& c, const std::string& fragment) {
    testing::expect_run_error(c, fragment);
  };
  expect_error(synthetic("vertical", 3, 8), "needs an even number of users");
  expect_error(synthetic("vertical-joined", 1, 8), "needs an even number of users");
  expect_error(synthetic("vertical", 4, 40), "exceeds the 32 features of a vertical block");
  auto fed = synthetic("vertical", 4, 8);
  fed.methods = {"central", "fedavg"};
  expect_error(fed, "cannot run FedAvg");
  auto priv = synthetic("vertical", 4, 8);
  priv.privacy = {"collusion"};
  expect_error(priv, "cannot run the privacy measurements");
  auto nri = synthetic("vertical", 4, 8);
  nri.protocol = "nri-dc";
  expect_error(nri, "needs protocol \"dc\"");
  // Each pair needs its rows: 2 pairs x 100 rows must fit, not 4 x 100.
  auto rows = synthetic("vertical-joined", 118, 8);  // 59 pairs x 100 <= 6000, 118 x 100 > 6000
  rows.methods = {"central"};
  rows.test_samples = 200;
  rows.trials = 1;
  EXPECT_NO_THROW(experiment::run(rows));
}

}  // namespace
}  // namespace dcalign
