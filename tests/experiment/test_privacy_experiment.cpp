// Privacy measurements in the experiment runner (Config::privacy): the keys and their errors
// when the file is read and in run() before any work, the collusion and epsilon-DR records
// (exact recovery at l = m, rising error as l falls, DP noise), the summary and the JSON, and
// that a run without them is unchanged; the same under NRI-DC (the affine attack on centred,
// permuted releases); the down-sampling defence applied (privacy_defence): the rows it drops on
// constructed data, under both protocols, and the error naming a user it would empty.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dcalign/experiment.hpp"
#include "dcalign/privacy_attacks.hpp"
#include "dcalign/random.hpp"
#include "experiment/config_files.hpp"
#include "experiment/nri_dc.hpp"
#include "experiment/records.hpp"

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
                      {"'privacy'", "\"collusion\" or \"dr\"", "membership"});
  expect_config_error(kBase + "privacy = [\"dr\", \"dr\"]\n", {"'privacy'", "twice"});
  expect_config_error(kBase + "privacy = \"dr\"\n", {"'privacy'", "an array of strings"});
  expect_config_error(kBase + "privacy = [1]\n", {"'privacy'", "an array of strings"});
  expect_config_error(kBase + "users = 1\nprivacy = [\"collusion\"]\n",
                      {"'privacy'", "users >= 2"});
  for (const char* eps : {"0", "-0.5", "1.5", "nan", "inf"})
    expect_config_error(kBase + "privacy = [\"dr\"]\nprivacy_dr_epsilon = " + eps + "\n",
                        {"'privacy_dr_epsilon'", "(0, 1]"});
  // A threshold without "dr" would change nothing: refused, not ignored.
  expect_config_error(kBase + "privacy = [\"collusion\"]\nprivacy_dr_epsilon = 0.2\n",
                      {"'privacy_dr_epsilon'", "unless privacy lists \"dr\""});
  expect_config_error(kBase + "privacy_dr_epsilon = 0.2\n", {"'privacy_dr_epsilon'"});
  // The defence: a boolean, and only with "dr" (its ratios and threshold).
  expect_config_error(kBase + "privacy = [\"dr\"]\nprivacy_defence = \"yes\"\n",
                      {"'privacy_defence'", "true or false"});
  expect_config_error(kBase + "privacy = [\"dr\"]\nprivacy_defence = 1\n",
                      {"'privacy_defence'", "true or false"});
  expect_config_error(kBase + "privacy = [\"collusion\"]\nprivacy_defence = true\n",
                      {"'privacy_defence'", "needs \"dr\" in privacy"});
  expect_config_error(kBase + "privacy_defence = true\n",
                      {"'privacy_defence'", "needs \"dr\" in privacy"});
}

TEST(ExperimentPrivacy, NriDcAndTheDefenceAreReadFromTheFile) {
  const auto nri = load_toml(kBase + "protocol = \"nri-dc\"\nprivacy = [\"collusion\", \"dr\"]\n");
  EXPECT_EQ(nri.protocol, "nri-dc");
  EXPECT_TRUE(nri.measures("collusion"));
  EXPECT_FALSE(nri.privacy_defence);
  EXPECT_FALSE(load_toml(kBase + "privacy = [\"dr\"]\n").privacy_defence);
  EXPECT_FALSE(load_toml(kBase + "privacy = [\"dr\"]\nprivacy_defence = false\n").privacy_defence);
  EXPECT_TRUE(load_toml(kBase + "privacy = [\"dr\"]\nprivacy_defence = true\n").privacy_defence);
  EXPECT_TRUE(load_toml(kBase + "protocol = \"nri-dc\"\nprivacy = [\"dr\"]\n"
                                "privacy_defence = true\nprivacy_dr_epsilon = 0.3\n")
                  .privacy_defence);
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
  return testing::record_value(r, cond, "privacy", metric);
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
  c.privacy = {"collusion"};
  c.privacy_defence = true;
  expect_fast(c, "'privacy_defence' = true needs \"dr\" in privacy");
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
  EXPECT_NE(json.find("\"metric\":\"dr_min_ratio\""), std::string::npos);  // a record row
  fs::remove_all(dir);
}

// NRI-DC on the artificial dataset (m = 64): 4 workers of 100 rows, each releasing its centred
// PCA of m~ = dim columns and its permuted rows; worker 1 and the master run the affine attack.
experiment::Config small_nri(index_t dim) {
  auto c = small(dim);
  c.name = "privacy_nri";
  c.protocol = "nri-dc";
  c.anchor = "normal";
  c.anchor_rows = 150;  // >= m + 1: [A, 1] has full column rank
  return c;
}

TEST(ExperimentPrivacy, NriDcCollusionIsExactAtLEqualsMAndRisesAsLFalls) {
  const auto full = experiment::run(small_nri(64));
  EXPECT_LT(value(full, "collusion_error", "-"), 1e-10);
  EXPECT_LT(value(full, "collusion_row_error", "-"), 1e-10);
  // The attacker undoes P_j too: every reconstructed row's nearest true row is its own.
  EXPECT_EQ(value(full, "collusion_identified", "-"), 1.0);
  EXPECT_LT(value(full, "dr_min_ratio", "-"), 1e-10);
  EXPECT_EQ(value(full, "dr_fraction_below", "-"), 1.0);
  for (const auto& rec : full.records)
    if (rec.method == "privacy") {
      EXPECT_EQ(rec.condition, "-");
    }
  double previous = value(full, "collusion_error", "-");
  for (index_t l : {40, 16, 4}) {
    const auto r = experiment::run(small_nri(l));
    const double e = value(r, "collusion_error", "-");
    EXPECT_GT(e, previous) << "l = " << l;
    previous = e;
    EXPECT_GT(value(r, "dr_min_ratio", "-"), 0) << "l = " << l;
    const double identified = value(r, "collusion_identified", "-");
    EXPECT_GE(identified, 0.0);
    EXPECT_LE(identified, 1.0);
  }
  EXPECT_GT(previous, 0.05);
  // Without centring the release is linear and so is the attack: exact again at l = m.
  auto linear = small_nri(64);
  linear.center = false;
  EXPECT_LT(value(experiment::run(linear), "collusion_error", "-"), 1e-10);
  const std::string table = experiment::summary_table(full);
  EXPECT_NE(table.find("affine attack"), std::string::npos) << table;
  EXPECT_NE(table.find("| - | "), std::string::npos) << table;
  EXPECT_NE(table.find("collusion_identified"), std::string::npos) << table;
}

// A worker's secrets, as the evaluator reads them: released row k is (X[origin[k]] - mu) F with
// label y[origin[k]]; with the defence, origin holds exactly the rows with r(x) >= epsilon.
TEST(ExperimentPrivacy, NriWorkerRevealsWhatItReleasedAndTheDefenceKeepsTheRowsAboveEpsilon) {
  const index_t n = 30, m = 6;
  Rng rng(17);
  const Matrix<double> X = random_uniform<double>(n, m, rng);
  const Matrix<double> A = random_normal<double>(10, m, rng);
  std::vector<double> y;
  for (index_t i = 0; i < n; ++i) y.push_back(static_cast<double>(i % 3));
  experiment::nri::WorkerOptions wo;
  wo.dim = 3;
  const auto check = [&](const experiment::nri::Release& r, const experiment::nri::Secrets& z) {
    ASSERT_EQ(r.data.rows(), static_cast<index_t>(z.origin.size()));
    ASSERT_EQ(z.mean.size(), static_cast<size_t>(m));
    for (size_t k = 0; k < z.origin.size(); ++k) {
      EXPECT_EQ(r.labels[k], y[static_cast<size_t>(z.origin[k])]);
      for (index_t q = 0; q < wo.dim; ++q) {
        double v = 0, a = 0;
        for (index_t j = 0; j < m; ++j) {
          v += (X(z.origin[k], j) - z.mean[static_cast<size_t>(j)]) * z.basis(j, q);
          a +=
              (A(static_cast<index_t>(k % 10), j) - z.mean[static_cast<size_t>(j)]) * z.basis(j, q);
        }
        EXPECT_NEAR(r.data(static_cast<index_t>(k), q), v, 1e-12);
        EXPECT_NEAR(r.anchor(static_cast<index_t>(k % 10), q), a, 1e-12);
      }
    }
  };
  experiment::nri::Secrets all;
  const auto r_all = experiment::nri::worker_release(X, y, A, wo, 99, &all);
  check(r_all, all);
  std::vector<index_t> sorted = all.origin;
  std::sort(sorted.begin(), sorted.end());
  for (index_t i = 0; i < n; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_NE(sorted, all.origin);  // permuted
  // Revealing changes nothing in the release.
  const auto r_plain = experiment::nri::worker_release(X, y, A, wo, 99);
  EXPECT_EQ(r_plain.labels, r_all.labels);
  ASSERT_EQ(r_plain.data.size(), r_all.data.size());
  EXPECT_TRUE(std::equal(r_plain.data.data(), r_plain.data.data() + r_plain.data.size(),
                         r_all.data.data()));
  // The defence at the median ratio keeps exactly the rows at or above it.
  const std::vector<double> ratios = dr_ratios(X, all.basis);
  std::vector<double> order = ratios;
  std::sort(order.begin(), order.end());
  wo.defence_epsilon = order[static_cast<size_t>(n / 2)];
  experiment::nri::Secrets some;
  const auto r_some = experiment::nri::worker_release(X, y, A, wo, 99, &some);
  check(r_some, some);
  sorted = some.origin;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, dr_downsample(ratios, wo.defence_epsilon));
  EXPECT_EQ(sorted.size(), static_cast<size_t>(n - n / 2));
  for (double bad : {-0.1, std::nan("")}) {
    wo.defence_epsilon = bad;
    EXPECT_THROW(experiment::nri::worker_release(X, y, A, wo, 99), InvalidInput);
  }
}

// An Adult file with 6 continuous columns and one level per categorical field (gone with
// onehot = "drop-first"), 60 training rows: 24 lie in span(e_1, e_2) (age, fnlwgt large, and
// 0.01 in hours-per-week), 36 have age 1, fnlwgt 0 and values 1-5 in the four other columns.
// With dim = 2 every user's top two right singular vectors are (nearly) span(e_1, e_2), so the
// first kind has r(x) about 1e-4 and the second about 0.98: at epsilon = 0.5 the defence drops
// exactly the 24 in-span rows, whichever users hold them.
struct AdultDir {
  fs::path dir;
  AdultDir() {
    dir = fs::temp_directory_path() /
          ("dcalign_defence_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir / "adult");
    const auto row = [](double age, double fnlwgt, double edu, double gain, double loss,
                        double hours, bool high) {
      std::ostringstream os;
      os << age << ", State-gov, " << fnlwgt << ", Bachelors, " << edu
         << ", Never-married, Adm-clerical, Not-in-family, White, Male, " << gain << ", " << loss
         << ", " << hours << ", United-States, " << (high ? ">50K" : "<=50K");
      return os.str();
    };
    std::ofstream train(dir / "adult" / "adult.data");
    for (int k = 0; k < 60; ++k) {
      const bool in_span = k % 5 < 2;  // 24 of 60
      if (in_span)
        train << row(20 + (37 * k) % 70, 20 + (53 * k + 11) % 70, 0, 0, 0, 0.01, k % 2) << "\n";
      else
        train << row(1, 0, 1 + k % 5, 1 + (3 * k) % 5, 1 + (7 * k) % 4, 1 + k % 3, k % 2) << "\n";
    }
    std::ofstream test(dir / "adult" / "adult.test");
    test << "|1x3 Cross validator\n";
    for (int k = 0; k < 6; ++k) test << row(30, 40, 1, 1, 1, 1, k % 2) << ".\n";
  }
  ~AdultDir() { fs::remove_all(dir); }
};

experiment::Config defended(const AdultDir& d) {
  experiment::Config c;
  c.name = "privacy_defence";
  c.dataset = "adult";
  c.data_dir = d.dir.string();
  c.verify_checksums = false;  // rows written here, not the official file
  c.onehot = "drop-first";
  c.standardize = false;
  c.users = 3;
  c.samples_per_user = 20;  // every training row
  c.anchor_rows = 20;
  c.dim = 2;
  c.conditions = {SpanCondition::diff_span_orth};
  c.methods = {"imakura"};  // trains on the rows kept, with their labels
  c.models = {"knn"};
  c.metrics = {"accuracy"};
  c.trials = 1;
  c.seed = 7;
  c.privacy = {"collusion", "dr"};
  c.privacy_dr_epsilon = 0.5;
  c.privacy_defence = true;
  return c;
}

TEST(ExperimentPrivacy, TheDefenceDropsTheRowsInsideTheSpanAndTheRunGoesOn) {
  const AdultDir d;
  for (const char* protocol : {"dc", "nri-dc"}) {
    auto c = defended(d);
    c.protocol = protocol;
    const bool nri = c.protocol == "nri-dc";
    const std::string cond = nri ? "-" : "DiffSpan-Orth";
    const auto r = experiment::run(c);
    EXPECT_EQ(value(r, "dr_dropped_rows", cond), 24.0) << protocol;
    EXPECT_DOUBLE_EQ(value(r, "dr_dropped_fraction", cond), 0.4) << protocol;
    EXPECT_DOUBLE_EQ(value(r, "dr_fraction_below", cond), 0.4) << protocol;
    // What is left is what the attacker cannot recover: every released row has r >= 0.5.
    EXPECT_GT(value(r, "collusion_row_error", cond), 0.5) << protocol;
    bool trained = false;
    for (const auto& rec : r.records)
      trained |= rec.method == "imakura" && rec.metric == "accuracy";
    EXPECT_TRUE(trained) << protocol;
    // Without the defence the in-span rows are released and recovered: the error is small.
    c.privacy_defence = false;
    const auto open = experiment::run(c);
    EXPECT_LT(value(open, "collusion_error", cond), 0.2) << protocol;
    for (const auto& rec : open.records) EXPECT_NE(rec.metric, "dr_dropped_rows");
    if (!nri) {
      const std::string table = experiment::summary_table(r);
      EXPECT_NE(table.find("dr_dropped_fraction"), std::string::npos) << table;
    }
  }
}

TEST(ExperimentPrivacy, TheDefenceFailsNamingTheUserItWouldEmpty) {
  const AdultDir d;
  // At epsilon = 1 every row (r < 1) is dropped: user 1 is the first left with nothing.
  auto c = defended(d);
  c.privacy_dr_epsilon = 1;
  testing::expect_run_error(c, "drops every row of user 1 of 3 in trial 1", 60);
  try {
    experiment::run(c);
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("'privacy_defence'"), std::string::npos) << e.what();
  }
  c.protocol = "nri-dc";
  testing::expect_run_error(c, "stops worker 1 of 3 in trial 1", 60);
}

}  // namespace
}  // namespace dcalign
