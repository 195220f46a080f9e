// Privacy measurements in the experiment runner (Config::privacy): the keys and their errors
// when the file is read and in run() before any work, the collusion and epsilon-DR records
// (exact recovery at l = m, rising error as l falls, DP noise), the summary and the JSON, and
// that a run without them is unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "dcalign/experiment.hpp"
#include "experiment/config_files.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;
using testing::expect_config_error;
using testing::load_toml;

const std::string kBase = "dataset = \"mnist\"\n";

TEST(ExperimentPrivacy, KeysAreReadWithTheirDefaults) {
  const auto off = load_toml(kBase);
  EXPECT_TRUE(off.privacy.empty());
  EXPECT_EQ(off.privacy_dr_epsilon, 0.1);
  EXPECT_TRUE(load_toml(kBase + "privacy = []\n").privacy.empty());
  const auto on =
      load_toml(kBase + "privacy = [\"dr\", \"collusion\"]\nprivacy_dr_epsilon = 0.25\n");
  EXPECT_EQ(on.privacy, (std::vector<std::string>{"dr", "collusion"}));
  EXPECT_TRUE(on.measures("collusion"));
  EXPECT_TRUE(on.measures("dr"));
  EXPECT_EQ(on.privacy_dr_epsilon, 0.25);
  EXPECT_EQ(load_toml(kBase + "privacy = [\"dr\"]\nprivacy_dr_epsilon = 1\n").privacy_dr_epsilon,
            1.0);
}

TEST(ExperimentPrivacy, BadKeysFailWhenTheFileIsReadNamingTheKey) {
  expect_config_error(kBase + "privacy = [\"membership\"]\n",
                      {"'privacy'", "\"collusion\" and \"dr\"", "membership"});
  expect_config_error(kBase + "privacy = [\"dr\", \"dr\"]\n", {"'privacy'", "twice"});
  expect_config_error(kBase + "privacy = \"dr\"\n", {"'privacy'", "an array of strings"});
  expect_config_error(kBase + "privacy = [1]\n", {"'privacy'", "an array of strings"});
  expect_config_error(kBase + "protocol = \"nri-dc\"\nprivacy = [\"dr\"]\n",
                      {"'privacy'", "protocol other than \"dc\""});
  expect_config_error(kBase + "users = 1\nprivacy = [\"collusion\"]\n",
                      {"'privacy'", "users >= 2"});
  for (const char* eps : {"0", "-0.5", "1.5", "nan", "inf"})
    expect_config_error(kBase + "privacy = [\"dr\"]\nprivacy_dr_epsilon = " + eps + "\n",
                        {"'privacy_dr_epsilon'", "(0, 1]"});
  // A threshold without "dr" would change nothing: refused, not ignored.
  expect_config_error(kBase + "privacy = [\"collusion\"]\nprivacy_dr_epsilon = 0.2\n",
                      {"'privacy_dr_epsilon'", "unless privacy lists \"dr\""});
  expect_config_error(kBase + "privacy_dr_epsilon = 0.2\n", {"'privacy_dr_epsilon'"});
}

// A small run on the artificial dataset (no files needed; m = 64): 4 users of 100 rows, kNN.
experiment::Config small(index_t dim) {
  experiment::Config c;
  c.name = "privacy_smoke";
  c.dataset = "synthetic";
  c.users = 4;
  c.samples_per_user = 100;
  c.test_samples = 200;
  c.anchor_rows = 150;
  c.dim = dim;
  c.conditions = {SpanCondition::diff_span_orth};
  c.methods = {"local"};
  c.models = {"knn"};
  c.trials = 1;
  c.seed = 5;
  c.privacy = {"collusion", "dr"};
  return c;
}

double value(const experiment::Result& r, const std::string& metric,
             const std::string& cond = "DiffSpan-Orth") {
  for (const auto& rec : r.records)
    if (rec.condition == cond && rec.method == "privacy" && rec.metric == metric) return rec.value;
  ADD_FAILURE() << "no record " << cond << " privacy " << metric;
  return NAN;
}

TEST(ExperimentPrivacy, ProgrammaticBadValuesFailBeforeAnyWork) {
  const auto expect_fast = [](const experiment::Config& c, const std::string& fragment) {
    testing::expect_run_error(c, fragment);
  };
  // Each fails in the checks that run() makes before it loads (or draws) any data.
  auto bad = [] { return small(10); };
  auto c = bad();
  c.privacy = {"collusion", "membership"};
  expect_fast(c, "'privacy' names \"membership\"");
  c = bad();
  c.privacy = {"collusion", "collusion"};
  expect_fast(c, "'privacy' names \"collusion\" twice");
  for (double eps : {0.0, -1.0, 2.0, std::nan("")}) {
    c = bad();
    c.privacy_dr_epsilon = eps;
    expect_fast(c, "'privacy_dr_epsilon' = ");
  }
  c = bad();
  c.users = 1;
  expect_fast(c, "needs users >= 2");
  c = bad();
  c.protocol = "nri-dc";
  expect_fast(c, "needs protocol \"dc\"");
}

TEST(ExperimentPrivacy, CollusionIsExactAtLEqualsMAndRisesAsLFalls) {
  const auto full = experiment::run(small(64));  // l = m = 64, a = 150 >= m
  EXPECT_LT(value(full, "collusion_error"), 1e-10);
  EXPECT_LT(value(full, "collusion_row_error"), 1e-10);
  EXPECT_LT(value(full, "dr_min_ratio"), 1e-10);
  EXPECT_EQ(value(full, "dr_fraction_below"), 1.0);  // every row is recovered: r = 0 < 0.1
  double previous = value(full, "collusion_error");
  for (index_t l : {40, 16, 4}) {
    const auto r = experiment::run(small(l));
    const double e = value(r, "collusion_error");
    EXPECT_GT(e, previous) << "l = " << l;
    previous = e;
    const double lo = value(r, "dr_min_ratio"), med = value(r, "dr_median_ratio");
    EXPECT_GT(lo, 0) << "l = " << l;
    EXPECT_LE(lo, med);
    EXPECT_LE(med, 1.0);
    const double below = value(r, "dr_fraction_below");
    EXPECT_GE(below, 0.0);
    EXPECT_LE(below, 1.0);
  }
  EXPECT_GT(previous, 0.05);
  // The threshold decides the fraction: none below the smallest ratio, all below 1.
  auto c = small(16);
  const auto base = experiment::run(c);
  c.privacy_dr_epsilon = value(base, "dr_min_ratio");
  EXPECT_EQ(value(experiment::run(c), "dr_fraction_below"), 0.0);
  c.privacy_dr_epsilon = 1;
  EXPECT_EQ(value(experiment::run(c), "dr_fraction_below"), 1.0);
}

TEST(ExperimentPrivacy, DpNoiseOnTheReleasedDataRaisesTheCollusionError) {
  auto c = small(64);
  c.dp_target = "released";
  const auto noisy = experiment::run(c);
  EXPECT_GT(value(noisy, "collusion_error"), 0.01);
  // The epsilon-DR ratio is a property of F_i and the rows, not of the noise.
  EXPECT_LT(value(noisy, "dr_min_ratio"), 1e-10);
  c.dp_epsilon = 1;
  EXPECT_GT(value(experiment::run(c), "collusion_error"), value(noisy, "collusion_error"));
}

TEST(ExperimentPrivacy, OffLeavesTheRunUnchangedAndOnAddsOnlyItsRecords) {
  auto c = small(10);
  c.conditions = {SpanCondition::same_span_orth, SpanCondition::diff_span};
  c.methods = {"central", "local", "odc"};
  c.dp_target = "raw";  // the measurements must compare with the rows before this noise
  auto off = c;
  off.privacy.clear();
  const auto r_off = experiment::run(off), r_on = experiment::run(c);
  std::vector<experiment::Record> rest;
  for (const auto& rec : r_on.records)
    if (rec.method != "privacy") rest.push_back(rec);
  ASSERT_EQ(rest.size(), r_off.records.size());
  for (size_t k = 0; k < rest.size(); ++k) {
    EXPECT_EQ(rest[k].metric, r_off.records[k].metric);
    EXPECT_EQ(rest[k].value, r_off.records[k].value);
  }
  for (const auto& rec : r_off.records) EXPECT_NE(rec.method, "privacy");
  EXPECT_EQ(experiment::summary_table(r_off).find("Privacy"), std::string::npos);
  const std::string table = experiment::summary_table(r_on);
  EXPECT_NE(table.find("### Privacy"), std::string::npos) << table;
  EXPECT_NE(table.find("| DiffSpan | "), std::string::npos) << table;
  EXPECT_NE(table.find("collusion_error"), std::string::npos) << table;
  EXPECT_GT(value(r_on, "collusion_error", "SameSpan-Orth"), 0);
  EXPECT_GT(value(r_on, "collusion_error", "DiffSpan"), 0);
  const auto dir = fs::temp_directory_path() / ("dcalign_privacy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  experiment::write_outputs(r_on, dir.string());
  std::ifstream f(dir / "privacy_smoke.json");
  const std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(json.find("\"privacy_dr_epsilon\": 0.1"), std::string::npos);
  EXPECT_NE(json.find("\"metric\": \"dr_min_ratio\""), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dcalign
