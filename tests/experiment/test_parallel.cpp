// Trials and models side by side (src/experiment/scheduler.hpp) and the checkpoint
// (src/experiment/checkpoint.hpp): the records of every protocol are bit for bit those of the
// serial run at 1, 2 and 4 workers, in the same order; a resumed run reads its finished trials
// back and ends with the uninterrupted run's records; another config or other data is refused,
// naming the difference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "dcalign/experiment.hpp"
#include "experiment/checkpoint.hpp"
#include "experiment/scheduler.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;
using experiment::Config;
using experiment::Result;

// A small run on the artificial dataset (no files needed): every kind of task.
Config base() {
  Config c;
  c.name = "parallel";
  c.dataset = "synthetic";
  c.users = 4;
  c.samples_per_user = 50;
  c.test_samples = 200;
  c.anchor_rows = 120;
  c.dim = 8;
  c.conditions = {SpanCondition::same_span_orth, SpanCondition::diff_span};
  c.methods = {"central", "local", "imakura", "kawakami", "odc"};
  c.models = {"knn", "svm", "mlp"};
  c.model_options.mlp.hidden_layers = {16};
  c.model_options.mlp.max_epochs = 5;
  c.trials = 3;
  c.seed = 11;
  return c;
}

Config protocol(const std::string& which) {
  Config c = base();
  if (which == "nri-dc") {
    c.protocol = "nri-dc";
    c.anchor = "normal";
    c.methods = {"central", "local", "imakura", "odc"};
    c.models = {"knn"};
    c.metrics = {"roc_auc"};
    c.conditions = {SpanCondition::same_span_orth};
  } else if (which == "fedavg") {
    c.methods = {"central", "odc", "fedavg"};
    c.models = {"mlp"};
    c.fedavg_configurations = {"1E16B", "2E16B"};
    c.fedavg_rounds = 3;
  } else if (which == "privacy") {
    c.methods = {"local", "odc"};
    c.models = {"knn"};
    c.privacy = {"collusion", "dr"};
    c.dp_target = "released";
  }
  return c;
}

// Everything but the timings (the seconds, and the metrics "*_seconds"), in order; doubles
// compared by their bits.
void expect_same_records(const Result& a, const Result& b, const std::string& what) {
  ASSERT_EQ(a.records.size(), b.records.size()) << what;
  for (size_t k = 0; k < a.records.size(); ++k) {
    const auto &x = a.records[k], &y = b.records[k];
    EXPECT_TRUE(x.trial == y.trial && x.condition == y.condition && x.method == y.method &&
                x.model == y.model && x.metric == y.metric && x.point == y.point)
        << what << ": record " << k << " is " << y.method << "/" << y.model << "/" << y.metric
        << ", expected " << x.method << "/" << x.model << "/" << x.metric;
    const bool timing = x.metric.size() > 8 && x.metric.substr(x.metric.size() - 8) == "_seconds";
    if (!timing) {
      EXPECT_EQ(std::memcmp(&x.value, &y.value, sizeof(double)), 0)
          << what << ": record " << k << " (" << x.method << " " << x.model << " " << x.metric
          << ") " << y.value << " against " << x.value;
    }
  }
  ASSERT_EQ(a.rounds.size(), b.rounds.size()) << what;
  for (size_t k = 0; k < a.rounds.size(); ++k) {
    const auto &x = a.rounds[k], &y = b.rounds[k];
    EXPECT_EQ(x.method, y.method) << what;
    EXPECT_EQ(x.round, y.round) << what;
    for (auto [u, v] : {std::pair{x.train_loss, y.train_loss},
                        {x.test_value, y.test_value},
                        {x.uplink_bytes, y.uplink_bytes}})
      EXPECT_EQ(std::memcmp(&u, &v, sizeof(double)), 0) << what << ": round " << k;
  }
}

class EveryProtocol : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryProtocol, RecordsAreTheSerialRunsAtAnyWorkerCount) {
  Config c = protocol(GetParam());
  c.threads = 1;
  const Result serial = experiment::run(c);
  ASSERT_FALSE(serial.records.empty());
  EXPECT_EQ(serial.workers, 1);
  for (int workers : {2, 4}) {
    c.threads = workers;
    const Result r = experiment::run(c);
    EXPECT_EQ(r.workers, workers);
    expect_same_records(serial, r, GetParam() + " at " + std::to_string(workers) + " workers");
  }
}

INSTANTIATE_TEST_SUITE_P(Experiment, EveryProtocol,
                         ::testing::Values("dc", "nri-dc", "fedavg", "privacy"));

TEST(ExperimentParallel, SweepPointsRunSideBySideInTheSerialOrder) {
  Config c = base();
  c.models = {"knn"};
  c.sweep = {{"dim", {"5", "10"}}, {"anchor_rows", {"40", "120"}}};
  c.threads = 1;
  const Result serial = experiment::run(c);
  c.threads = 3;
  const Result parallel = experiment::run(c);
  expect_same_records(serial, parallel, "sweep at 3 workers");
  // Every point's records are contiguous, in the points' order.
  std::vector<std::string> order;
  for (const auto& r : parallel.records)
    if (order.empty() || order.back() != r.point) order.push_back(r.point);
  EXPECT_EQ(order.size(), 4u);
}

TEST(ExperimentParallel, ProgressCountsEveryTrialOnce) {
  Config c = base();
  c.models = {"knn"};
  c.sweep = {{"dim", {"5", "10"}}};
  c.threads = 2;
  experiment::RunOptions o;
  std::vector<experiment::ProgressReport> seen;
  o.on_trial = [&](const experiment::ProgressReport& p) { seen.push_back(p); };
  experiment::run(c, o);
  ASSERT_EQ(seen.size(), 6u);
  for (size_t k = 0; k < seen.size(); ++k) {
    EXPECT_EQ(seen[k].done, k + 1);
    EXPECT_EQ(seen[k].total, 6u);
    EXPECT_EQ(seen[k].points, 2u);
    EXPECT_GE(seen[k].remaining, 0);
  }
  EXPECT_DOUBLE_EQ(seen.back().remaining, 0);
}

TEST(ExperimentParallel, AFailingTaskFailsTheRunWithItsError) {
  Config c = base();
  c.threads = 2;
  c.privacy = {"dr"};
  c.privacy_defence = true;
  c.privacy_dr_epsilon = 1;  // every row has r(x) < 1: all dropped
  try {
    experiment::run(c);
    FAIL() << "expected the defence's error";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("privacy_defence"), std::string::npos) << e.what();
  }
}

TEST(ExperimentCheckpoint, TrialFilesRoundTripEveryDoubleExactly) {
  experiment::detail::UnitResult u;
  u.point = 2;
  u.trial = 7;
  u.records = {{7, "SameSpan", "odc", "mlp", "accuracy", 0.1 + 0.2, 1e-300, ""},
               {7, "-", "fedavg-1E8B", "mlp", "rmse", NAN, INFINITY, ""},
               {7, "-", "x", "y", "z", -INFINITY, 5e-324, ""}};
  experiment::RoundRecord rr;
  rr.trial = 7;
  rr.method = "fedavg-1E8B";
  rr.round = 3;
  rr.train_loss = 1.0 / 3;
  rr.train_accuracy = NAN;
  u.rounds = {rr};
  const auto back = experiment::detail::parse_unit(experiment::detail::unit_json(u, "f"), "f", "x");
  ASSERT_EQ(back.records.size(), 3u);
  EXPECT_EQ(back.point, 2u);
  for (size_t k = 0; k < 3; ++k) {
    const double a = u.records[k].value, b = back.records[k].value;
    EXPECT_TRUE(std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)));
    EXPECT_EQ(back.records[k].trial, 7);
  }
  EXPECT_EQ(back.records[1].seconds, INFINITY);
  EXPECT_EQ(back.records[2].seconds, 5e-324);
  ASSERT_EQ(back.rounds.size(), 1u);
  EXPECT_EQ(back.rounds[0].train_loss, 1.0 / 3);
  EXPECT_TRUE(std::isnan(back.rounds[0].train_accuracy));
  // Another run's file, or a damaged one, is refused naming it.
  EXPECT_THROW(experiment::detail::parse_unit(experiment::detail::unit_json(u, "f"), "g", "x"),
               InvalidInput);
  EXPECT_THROW(experiment::detail::parse_unit("{\"format_version\": 1", "f", "x"), InvalidInput);
}

struct TempDir {
  fs::path path;
  TempDir() {
    path =
        fs::temp_directory_path() /
        ("dcalign-checkpoint-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

size_t trial_files(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().rfind("point", 0) == 0;
  return n;
}

TEST(ExperimentCheckpoint, AResumedRunReadsItsTrialsBackAndEndsWithTheSameRecords) {
  TempDir tmp;
  Config c = base();
  c.models = {"knn", "mlp"};
  c.sweep = {{"dim", {"5", "10"}}};
  c.threads = 2;
  const Result whole = experiment::run(c);
  experiment::RunOptions o;
  o.checkpoint_dir = tmp.path.string();
  // A first run of 2 trials per point leaves 4 trial files; the same config with 3 trials
  // resumes them and runs the 2 others.
  Config first = c;
  first.trials = 2;
  experiment::run(first, o);
  EXPECT_EQ(trial_files(tmp.path), 4u);
  EXPECT_TRUE(fs::exists(tmp.path / "manifest.json"));
  // Without --resume, a checkpoint with finished trials is refused, not overwritten.
  try {
    experiment::run(c, o);
    FAIL() << "a fresh run over finished trials must be refused";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("--resume"), std::string::npos) << e.what();
  }
  o.resume = true;
  size_t reports = 0;
  o.on_trial = [&](const experiment::ProgressReport& p) {
    ++reports;
    EXPECT_EQ(p.resumed, 4u);
  };
  const Result resumed = experiment::run(c, o);
  EXPECT_EQ(resumed.resumed_trials, 4u);
  EXPECT_EQ(reports, 2u);
  expect_same_records(whole, resumed, "resumed");
  EXPECT_EQ(trial_files(tmp.path), 6u);
  experiment::remove_checkpoint(o.checkpoint_dir);
  EXPECT_FALSE(fs::exists(tmp.path));
}

TEST(ExperimentCheckpoint, ResumingAnotherConfigIsRefusedNamingTheKey) {
  TempDir tmp;
  Config c = base();
  c.models = {"knn"};
  c.trials = 1;
  c.threads = 1;
  experiment::RunOptions o;
  o.checkpoint_dir = tmp.path.string();
  experiment::run(c, o);
  o.resume = true;
  Config other = c;
  other.anchor_rows = 121;
  try {
    experiment::run(other, o);
    FAIL() << "another config must be refused";
  } catch (const InvalidInput& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("anchor_rows: was 120, now 121"), std::string::npos) << m;
  }
  other = c;
  other.model_options.mlp.learning_rate = 0.5;
  EXPECT_THROW(experiment::run(other, o), InvalidInput);
  // The thread count and the trial count are not part of it.
  other = c;
  other.threads = 2;
  other.trials = 2;
  EXPECT_EQ(experiment::run(other, o).resumed_trials, 1u);
  // --restart discards the finished trials.
  o.resume = false;
  o.restart = true;
  EXPECT_EQ(experiment::run(c, o).resumed_trials, 0u);
}

TEST(ExperimentCheckpoint, ResumingOnOtherDataIsRefusedNamingThePoint) {
  TempDir tmp;
  fs::create_directories(tmp.path / "data" / "pima-diabetes");
  // A small CSV set of our own under a data directory of our own: Pima's layout (no header),
  // 60 rows.
  const fs::path src = tmp.path / "data" / "pima-diabetes" / "pima-indians-diabetes.csv";
  const auto write_set = [&](double first) {
    std::ofstream f(src);
    for (int i = 0; i < 60; ++i)
      f << (i == 0 ? first : i % 5) << "," << 80 + i << "," << 60 + i % 7 << "," << 20 + i % 3
        << "," << 10 * (i % 4) << "," << 25.5 + i % 9 << ",0." << 100 + i << "," << 21 + i % 30
        << "," << i % 2 << "\n";
  };
  write_set(1);
  Config c = base();
  c.dataset = "pima-diabetes";
  c.data_dir = (tmp.path / "data").string();
  c.verify_checksums = false;
  c.users = 2;
  c.samples_per_user = 15;
  c.test_samples = 20;
  c.anchor_rows = 30;
  c.dim = 4;
  c.conditions = {SpanCondition::diff_span};
  c.methods = {"odc"};
  c.models = {"knn"};
  c.trials = 1;
  experiment::RunOptions o;
  o.checkpoint_dir = (tmp.path / "ck").string();
  try {
    experiment::run(c, o);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "the Pima loader did not take the test's file: " << e.what();
  }
  write_set(3);  // one value changed
  o.resume = true;
  try {
    experiment::run(c, o);
    FAIL() << "other data must be refused";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("the data of point"), std::string::npos) << e.what();
  }
}

TEST(ExperimentScheduler, TasksRunByKeyAndTheFirstErrorWins) {
  experiment::detail::TaskPool pool(1);
  std::vector<int> order;
  std::mutex m;
  // One worker: once the first task runs, the rest run in key order, not submission order.
  pool.submit(0, 0, [&] {
    pool.submit(5, 0, [&] {
      std::lock_guard<std::mutex> l(m);
      order.push_back(5);
    });
    pool.submit(1, 2, [&] {
      std::lock_guard<std::mutex> l(m);
      order.push_back(12);
    });
    pool.submit(1, 1, [&] {
      std::lock_guard<std::mutex> l(m);
      order.push_back(11);
    });
  });
  pool.wait();
  EXPECT_EQ(order, (std::vector<int>{11, 12, 5}));
  experiment::detail::TaskPool two(2);
  two.submit(0, 0, [] { throw InvalidInput("first"); });
  EXPECT_THROW(two.wait(), InvalidInput);
}

}  // namespace
}  // namespace dcalign
