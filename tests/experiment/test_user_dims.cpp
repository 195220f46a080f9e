// Users with different latent dimensions in the experiment runner (Config::dim_per_user, paper
// 002 eq. 1): the keys and their refusals, the l_i drawn or assigned in order, that one value
// for everyone reproduces the run with dim, and that the ragged alignment is usable downstream.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "dcalign/experiment.hpp"
#include "experiment/config_files.hpp"
#include "experiment/records.hpp"

namespace dcalign {
namespace {

using testing::expect_config_error;
using testing::expect_run_error;
using testing::load_toml;

const std::string kBase =
    "dataset = \"mnist\"\nusers = 3\nmethods = [\"central\", \"imakura\", \"kawakami\"]\n"
    "dim = 20\n";

// The synthetic stand-in (64 features, 10 classes, no files): users of 100 rows, kNN.
experiment::Config small(index_t users) {
  experiment::Config c;
  c.name = "user_dims";
  c.dataset = "synthetic";
  c.users = users;
  c.samples_per_user = 100;
  c.test_samples = 600;
  c.anchor_rows = 200;
  c.dim = 6;
  c.conditions = {SpanCondition::diff_span_orth};
  c.methods = {"central", "local", "imakura", "kawakami"};
  c.models = {"knn"};
  c.trials = 1;
  c.seed = 23;
  return c;
}

// The baselines' records carry condition "-".
double value(const experiment::Result& r, const std::string& method,
             const std::string& metric = "accuracy", index_t trial = 0,
             const std::string& cond = "DiffSpan-Orth") {
  return testing::record_value(r, method == "central" || method == "local" ? "-" : cond, method,
                               metric, trial);
}

TEST(ExperimentUserDims, KeysAreReadAndKeptOutOfTheDefault) {
  const auto off = load_toml(kBase);
  EXPECT_TRUE(off.dim_per_user.empty());
  EXPECT_EQ(off.dim_assignment, "draw");
  const auto on = load_toml(kBase + "dim_per_user = [20, 30, 50]\n");
  EXPECT_EQ(on.dim_per_user, (std::vector<index_t>{20, 30, 50}));
  const auto listed =
      load_toml(kBase + "dim_per_user = [20, 30, 50]\ndim_assignment = \"in-order\"\n");
  EXPECT_EQ(listed.dim_assignment, "in-order");
}

TEST(ExperimentUserDims, EveryMisuseIsRefusedNamingTheKey) {
  const std::string on = kBase + "dim_per_user = [20, 30, 50]\n";
  expect_config_error(kBase + "dim_assignment = \"draw\"\n",
                      {"'dim_assignment'", "unless dim_per_user"});
  expect_config_error(on + "dim_assignment = \"cycle\"\n",
                      {"'dim_assignment'", "\"draw\" or \"in-order\""});
  expect_config_error(kBase + "dim_per_user = []\n", {"'dim_per_user'", "non-empty array"});
  expect_config_error(kBase + "dim_per_user = [20, 0]\n", {"'dim_per_user'", "holds 0"});
  expect_config_error(kBase + "dim_per_user = [20, 30]\ndim_assignment = \"in-order\"\n",
                      {"'dim_per_user'", "has 2 values", "one per user (users = 3)"});
  const std::string head = "dataset = \"mnist\"\nusers = 3\ndim_per_user = [20, 30, 50]\n";
  const std::string no_dim = head + "methods = [\"imakura\"]\n";
  // ODC, GOPP, OPP and RDP need one l: named, with what would work.
  for (const char* m : {"odc", "odc:identity", "gopp", "opp", "rdp-ls"})
    expect_config_error(head + "methods = [\"imakura\", \"" + m + "\"]\n",
                        {"'methods'", std::string("\"") + m + "\"", "one l for every user",
                         "\"imakura\" and \"kawakami\""});
  expect_config_error(no_dim + "protocol = \"nri-dc\"\n", {"'dim_per_user'", "protocol \"dc\""});
  expect_config_error(no_dim + "partition = \"vertical\"\n", {"'dim_per_user'", "\"vertical\""});
  expect_config_error(on + "privacy = [\"collusion\"]\n",
                      {"'dim_per_user'", "privacy measurements"});
  expect_config_error(on + "uplink = \"int8\"\n", {"'dim_per_user'", "uplink = \"int8\""});
  // The common dim: at most a, and within reach of the smallest possible sum of the l_i.
  expect_config_error(no_dim + "dim = 61\n", {"'dim'", "3 x 20 = 60"});
  expect_config_error(no_dim + "dim = 0\ndim_fraction = 0.1\n", {"'dim'", "common dimension"});
  expect_config_error(no_dim + "anchor_rows = 10\ndim = 11\n", {"'dim'", "anchor_rows = 10"});
}

TEST(ExperimentUserDims, BoundsThatNeedTheDataFailBeforeAnyTraining) {
  auto c = small(3);
  c.dim_per_user = {6, 65};  // the synthetic set has 64 features
  expect_run_error(c, "'dim_per_user' holds l_i = 65, more than the 64 features");
  c = small(3);
  c.dim_per_user = {6, 60};
  c.samples_per_user = 50;
  expect_run_error(c, "dim_per_user's l_i = 60 exceeds samples_per_user = 50");
  c = small(3);
  c.dim_per_user = {6, 60};
  c.anchor_rows = 40;
  expect_run_error(c, "more than anchor_rows = 40");
  c = small(3);
  c.dim_per_user = {6};
  c.methods = {"odc"};
  expect_run_error(c, "needs one l for every user");
}

// One value for everyone: the users' bases, the draws and the models are those of the run with
// dim alone, and align_ragged equals align at equal l_i, so every score is the same.
TEST(ExperimentUserDims, OneValueForEveryoneIsTheRunWithDim) {
  for (SpanCondition cond : {SpanCondition::diff_span_orth, SpanCondition::same_span}) {
    auto plain = small(4);
    plain.conditions = {cond};
    auto one = plain;
    one.dim_per_user = {6};
    const auto a = experiment::run(plain), b = experiment::run(one);
    const std::string cs = to_string(cond);
    for (const char* m : {"central", "local", "imakura", "kawakami"})
      EXPECT_NEAR(value(a, m, "accuracy", 0, cs), value(b, m, "accuracy", 0, cs), 1e-12)
          << m << " under " << cs;
    EXPECT_EQ(value(b, "dims", "user_dim_mean", 0, cs), 6);
  }
}

// "draw": every l_i is one of the values, several values occur among 12 users, the draw is
// fixed by the seed, trials draw anew, and redraw = "alignment" keeps trial 1's.
TEST(ExperimentUserDims, DrawnDimensionsComeFromTheListAndTheSeed) {
  auto c = small(12);
  c.dim_per_user = {4, 6, 10};
  c.dim = 4;
  c.methods = {"imakura"};
  c.trials = 3;
  const auto r = experiment::run(c), again = experiment::run(c);
  std::set<double> means;
  for (index_t t = 0; t < 3; ++t) {
    const double lo = value(r, "dims", "user_dim_min", t), hi = value(r, "dims", "user_dim_max", t);
    const double mean = value(r, "dims", "user_dim_mean", t);
    EXPECT_GE(lo, 4);
    EXPECT_LE(hi, 10);
    EXPECT_LT(lo, hi) << "12 users drew a single value in trial " << t + 1;
    // A mean of 12 values from {4, 6, 10} is a multiple of 1/6.
    EXPECT_NEAR(mean * 6, std::round(mean * 6), 1e-9);
    means.insert(mean);
    EXPECT_EQ(mean, value(again, "dims", "user_dim_mean", t));
    EXPECT_EQ(value(r, "imakura", "accuracy", t), value(again, "imakura", "accuracy", t));
  }
  EXPECT_GT(means.size(), 1u) << "every trial drew the same l_i";
  c.redraw = "alignment";
  const auto paired = experiment::run(c);
  for (index_t t = 1; t < 3; ++t)
    EXPECT_EQ(value(paired, "dims", "user_dim_mean", t), value(paired, "dims", "user_dim_mean", 0));
}

// "in-order": user i has the i-th value (min, max and mean are the list's). The ragged alignment
// serves the model: DC with users of l_i = 4..12 is far above chance (0.1 on 10 classes) and
// within reach of Central on the same rows, under every condition, nested SameSpan included.
TEST(ExperimentUserDims, InOrderDimensionsAlignAndTrain) {
  auto c = small(4);
  c.dim_per_user = {12, 4, 8, 6};
  c.dim_assignment = "in-order";
  c.dim = 8;
  c.conditions = {SpanCondition::same_span_orth, SpanCondition::same_span,
                  SpanCondition::diff_span_orth, SpanCondition::diff_span};
  c.align_timing = true;
  const auto r = experiment::run(c);
  const double central = value(r, "central");
  for (const char* cond : {"SameSpan-Orth", "SameSpan", "DiffSpan-Orth", "DiffSpan"}) {
    EXPECT_EQ(value(r, "dims", "user_dim_min", 0, cond), 4);
    EXPECT_EQ(value(r, "dims", "user_dim_max", 0, cond), 12);
    EXPECT_EQ(value(r, "dims", "user_dim_mean", 0, cond), 7.5);
    for (const char* m : {"imakura", "kawakami"}) {
      const double acc = value(r, m, "accuracy", 0, cond);
      EXPECT_GT(acc, 0.5) << m << " under " << cond;
      EXPECT_GT(acc, central - 0.3) << m << " under " << cond;
      EXPECT_GE(value(r, m, "align_seconds", 0, cond), 0) << m;
    }
  }
}

}  // namespace
}  // namespace dcalign
