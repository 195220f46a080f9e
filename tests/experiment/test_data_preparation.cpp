// Paper 004's data preparation in the experiment runner (section 4.2): the per-trial
// (stratified) subsample, one-hot coding without the first level, Heart disease's ca as a
// category, and the emulation of the duplicated 1025-row Heart disease file. Runs on files
// written here, so nothing depends on the shared datasets.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "data/file_util.hpp"
#include "dcalign/data.hpp"
#include "dcalign/experiment.hpp"
#include "experiment/common.hpp"
#include "experiment/config_files.hpp"

namespace dcalign {
namespace {

using testing::expect_config_error;
using testing::load_toml;
using testing::TempDir;
using testing::write_bytes;
using testing::write_config;

// A processed.cleveland.data of n complete rows in the file's format: every categorical
// column takes all its Cleveland levels (cp 1-4, restecg 0-2, slope 1-3, ca 0-3, thal 3/6/7);
// num > 0 (disease) on every third row.
std::string heart_file(index_t n) {
  const char* thal[] = {"3.0", "6.0", "7.0"};
  std::string text;
  for (index_t i = 0; i < n; ++i) {
    text += std::to_string(30 + i) + ".0," + std::to_string(i % 2) + ".0," +
            std::to_string(1 + i % 4) + ".0," + std::to_string(120 + i % 7) + ".0," +
            std::to_string(200 + (13 * i) % 50) + ".0," + std::to_string((i / 2) % 2) + ".0," +
            std::to_string(i % 3) + ".0," + std::to_string(150 + (7 * i) % 30) + ".0," +
            std::to_string((i / 3) % 2) + ".0," + std::to_string(i % 5) + ".5," +
            std::to_string(1 + (i / 4) % 3) + ".0," + std::to_string((i / 5) % 4) + ".0," +
            thal[(i / 7) % 3] + "," + (i % 3 == 0 ? "2" : "0") + "\n";
  }
  return text;
}

const std::string kSmallLayout = "users = 2\nsamples_per_user = 10\ntest_samples = 10\ndim = 3\n";

// An NRI-DC experiment file on the Heart disease file in `dir`: the layout's keys and `extra`.
std::string heart_toml(const TempDir& dir, const std::string& extra,
                       const std::string& layout = kSmallLayout) {
  return "name = \"prep\"\nprotocol = \"nri-dc\"\ndataset = \"heart-disease\"\n"
         "data_dir = \"" +
         dir.str() + "\"\nverify_checksums = false\n" + layout +
         "anchor_rows = 50\nanchor = \"normal\"\nmethods = [\"central\", \"imakura\"]\n"
         "models = [\"logreg\"]\nmetrics = [\"accuracy\"]\ntrials = 1\nseed = 1\n" +
         extra;
}

// run() on the file's config must throw InvalidInput containing every fragment (and the file's
// path, unless names_file is false), and must not have started a trial.
void expect_run_error(const std::string& toml, const std::vector<std::string>& fragments,
                      bool names_file = true) {
  const std::string path = write_config(toml, "prep_bad");
  const experiment::Config c = experiment::load_config(path);
  std::vector<std::string> progress;
  try {
    experiment::run(c, [&](const std::string& m) { progress.push_back(m); });
    ADD_FAILURE() << "no exception for:\n" << toml;
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    if (names_file) {
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
    }
    for (const auto& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' missing in: " << msg;
  }
  for (const auto& m : progress) EXPECT_EQ(m.rfind("trial ", 0), std::string::npos) << m;
}

TEST(ExperimentDataPrep, KeysAreReadWithTheirDefaults) {
  const std::string d = "dataset = \"heart-disease\"\nprotocol = \"nri-dc\"\n";
  auto c = load_toml(d);
  EXPECT_EQ(c.subsample, 0);
  EXPECT_TRUE(c.subsample_stratified);
  EXPECT_EQ(c.onehot, "full");
  EXPECT_EQ(c.heart_ca, "continuous");
  EXPECT_EQ(c.emulate_duplicates, 0);
  c = load_toml(
      d +
      "users = 18\nsamples_per_user = 50\nsubsample = 1000\n"
      "subsample_stratified = false\nonehot = \"drop-first\"\nheart_ca = \"categorical\"\n"
      "emulate_duplicates = 1025\n");
  EXPECT_EQ(c.subsample, 1000);
  EXPECT_FALSE(c.subsample_stratified);
  EXPECT_EQ(c.onehot, "drop-first");
  EXPECT_EQ(c.heart_ca, "categorical");
  EXPECT_EQ(c.emulate_duplicates, 1025);
}

TEST(ExperimentDataPrep, TestSplitKeyIsReadAndChecked) {
  const std::string d = "dataset = \"synthetic\"\n";
  EXPECT_EQ(load_toml(d).test_split, "official");
  EXPECT_EQ(load_toml(d + "test_split = \"pooled\"\ntest_samples = 100\n").test_split, "pooled");
  expect_config_error(d + "test_split = \"random\"\n",
                      {"'test_split'", "\"official\" or \"pooled\""});
  expect_config_error(d + "test_split = \"pooled\"\n",
                      {"'test_split' = \"pooled\"", "needs test_samples >= 1"});
  // A Config built in code is checked the same way.
  experiment::Config c = load_toml(d);
  c.source.clear();
  c.test_split = "pooled";
  testing::expect_run_error(c, "'test_split' = \"pooled\" needs test_samples >= 1");
}

TEST(ExperimentDataPrep, BadKeysFailInTheFileNamingTheKey) {
  const std::string d = "dataset = \"heart-disease\"\nprotocol = \"nri-dc\"\n";
  expect_config_error(d + "subsample = -1\n", {"'subsample'", "-1", "out of range"});
  expect_config_error(d + "subsample = 1.5\n", {"'subsample'", "an integer"});
  // Fewer rows than the users hold: users x samples_per_user = 13 x 50.
  expect_config_error(d + "users = 13\nsamples_per_user = 50\nsubsample = 600\n",
                      {"'subsample' = 600 is too small", "650"});
  expect_config_error(d + "subsample_stratified = \"yes\"\n",
                      {"'subsample_stratified'", "true or false"});
  expect_config_error(d + "onehot = \"drop_first\"\n", {"'onehot'", "\"full\" or \"drop-first\""});
  expect_config_error(d + "onehot = true\n", {"'onehot'", "a string"});
  expect_config_error(d + "heart_ca = \"onehot\"\n",
                      {"'heart_ca'", "\"continuous\" or \"categorical\""});
  expect_config_error("dataset = \"pima-diabetes\"\nheart_ca = \"categorical\"\n",
                      {"'heart_ca'", "heart-disease"});
  expect_config_error(d + "emulate_duplicates = -5\n", {"'emulate_duplicates'", "out of range"});
  expect_config_error(
      d + "users = 2\nsamples_per_user = 10\nemulate_duplicates = 400\n" + "subsample = 401\n",
      {"'subsample' = 401 exceeds the emulate_duplicates = 400"});
  expect_config_error(d + "subsample_rows = 100\n", {"unknown key 'subsample_rows'"});
}

TEST(ExperimentDataPrep, SizeErrorsNameTheFileAndKeyBeforeAnyTrial) {
  TempDir dir;
  write_bytes(dir.file("heart-disease/processed.cleveland.data"), heart_file(40));
  // More rows than the file has.
  expect_run_error(heart_toml(dir, "subsample = 41\n"),
                   {"key 'subsample' = 41 exceeds the 40 rows of 'heart-disease'"});
  // The users' 2 x 10 rows fit, but not with the 10 test rows drawn from the subsample.
  expect_run_error(
      heart_toml(dir, "subsample = 29\n"),
      {"key 'subsample' = 29 is too small", "users x samples_per_user + test_samples = 30"});
  expect_run_error(heart_toml(dir, "emulate_duplicates = 1000000000000\n"),
                   {"key 'emulate_duplicates' = 1000000000000 rows x 22 features exceed 2^31"});
  expect_run_error(heart_toml(dir, "emulate_duplicates = 39\n"),
                   {"key 'emulate_duplicates' = 39 is below the 40 rows of 'heart-disease'"});
  expect_run_error(heart_toml(dir, "emulate_duplicates = 100\nsubsample = 100\n",
                              "users = 9\nsamples_per_user = 10\ntest_samples = 20\ndim = 3\n"),
                   {"key 'subsample' = 100 is too small", "= 110"});
  // The repeated pool is where the test rows come from: a set with an official split has no
  // such pool.
  expect_run_error("name = \"prep\"\ndataset = \"synthetic\"\ndim = 3\nemulate_duplicates = 7000\n",
                   {"key 'emulate_duplicates'", "official test split"});
  // Pooling needs an official split to pool; Heart disease has none.
  expect_run_error(heart_toml(dir, "test_split = \"pooled\"\n"),
                   {"key 'test_split' = \"pooled\" needs a dataset with an official test split",
                    "'heart-disease' has none"});
  // Pooled, the test rows may outnumber the official test set (synthetic: 6000 + 2000 rows),
  // but not leave too few training rows for the users: 8000 - 7950 = 50.
  expect_run_error(
      "name = \"prep\"\ndataset = \"synthetic\"\ndim = 3\ntest_split = \"pooled\"\n"
      "test_samples = 7950\n",
      {"1000 exceed the 50 training samples", "left after test_samples"}, false);
  // Configs built in code are checked as well, and say so without a file.
  experiment::Config c = load_toml(heart_toml(dir, ""));
  c.source.clear();
  c.subsample = -3;
  testing::expect_run_error(c, "experiment: key 'subsample' = -3 must be >= 0");
  c.subsample = 0;
  c.onehot = "first";
  EXPECT_THROW(experiment::run(c), InvalidInput);
}

// onehot and heart_ca reach the loader: 004's coding of the written file has m = 20 features
// (5 numeric, 3 binary, cp 3, restecg 2, slope 2, ca 3, thal 2), the default coding 22.
TEST(ExperimentDataPrep, HeartCodingKeysReachTheLoader) {
  TempDir dir;
  write_bytes(dir.file("heart-disease/processed.cleveland.data"), heart_file(40));
  const std::string layout = "users = 2\nsamples_per_user = 30\ntest_samples = 10\n";
  expect_run_error(heart_toml(dir, "onehot = \"drop-first\"\nheart_ca = \"categorical\"\n",
                              layout + "dim = 21\n"),
                   {"dim l = 21 exceeds the 20 features"}, false);
  expect_run_error(heart_toml(dir, "", layout + "dim = 23\n"),
                   {"dim l = 23 exceeds the 22 features"}, false);
}

// A pool of n rows whose column 0 is the row's identity; class 1 on the rows with 3 i mod n
// below n_pos (scattered, 3 and n coprime).
data::Dataset id_pool(index_t n, index_t n_pos) {
  data::Dataset d;
  d.name = "ids";
  d.num_classes = 2;
  d.X = Matrix<double>(n, 2);
  for (index_t i = 0; i < n; ++i) {
    d.X(i, 0) = static_cast<double>(i);
    d.X(i, 1) = 1.0;
    d.y.push_back((3 * i) % n < n_pos ? 1.0 : 0.0);
  }
  return d;
}

data::Dataset no_rows(const data::Dataset& d) {
  data::Dataset e = d;
  e.X = Matrix<double>(0, d.features());
  e.y.clear();
  return e;
}

// The identities (column 0) of every training and test row of a trial, and of the test rows.
std::multiset<double> ids(const std::vector<Matrix<double>>& parts) {
  std::multiset<double> out;
  for (const auto& M : parts)
    for (index_t i = 0; i < M.rows(); ++i) out.insert(M(i, 0));
  return out;
}

TEST(ExperimentDataPrep, SubsampleIsTheTrialsPoolStratifiedAndSeeded) {
  const data::Dataset pool = id_pool(200, 60);  // 140 / 60
  experiment::Config c;
  c.users = 3;
  c.samples_per_user = 20;
  c.subsample = 100;  // exactly the 3 x 20 training rows and the 40 test rows
  c.seed = 5;
  const index_t n_test = 40;
  auto used = [&](index_t trial) {
    const auto sp = experiment::draw_split(c, pool, no_rows(pool), n_test, trial);
    std::multiset<double> all = ids(sp.X);
    const auto test = ids(sp.Y);
    all.insert(test.begin(), test.end());
    return all;
  };
  auto class_counts = [&](const std::multiset<double>& rows) {
    std::vector<index_t> counts(2, 0);
    for (double id : rows) ++counts[static_cast<size_t>(pool.y[static_cast<size_t>(id)])];
    return counts;
  };
  const auto t0 = used(0);
  ASSERT_EQ(t0.size(), 100u);
  EXPECT_EQ(std::set<double>(t0.begin(), t0.end()).size(), 100u);  // no row twice
  EXPECT_EQ(class_counts(t0), (std::vector<index_t>{70, 30}));     // 140 : 60 kept
  EXPECT_EQ(used(0), t0);                                          // same seed, same rows
  std::set<std::multiset<double>> per_trial;
  for (index_t t = 0; t < 6; ++t) {
    const auto rows = used(t);
    EXPECT_EQ(class_counts(rows), (std::vector<index_t>{70, 30})) << t;
    per_trial.insert(rows);
  }
  EXPECT_EQ(per_trial.size(), 6u);  // every trial its own subsample
  c.seed = 6;
  EXPECT_NE(used(0), t0);
  // Unstratified: the class counts follow the draw.
  c.subsample_stratified = false;
  std::set<std::vector<index_t>> counts;
  for (index_t t = 0; t < 10; ++t) counts.insert(class_counts(used(t)));
  EXPECT_GT(counts.size(), 1u);
}

// pool_splits: the training rows, then the official test rows, with their labels; the test set
// left has no rows. Drawn from that pool, a trial's test rows come from both parts and never
// overlap its training rows; with the official split they are the test part alone.
TEST(ExperimentDataPrep, PooledTestSplitDrawsTestRowsFromBothParts) {
  const data::Dataset all = id_pool(300, 90);
  std::vector<index_t> first(200), last(100);
  for (index_t i = 0; i < 300; ++i) (i < 200 ? first[i] : last[i - 200]) = i;
  data::TrainTest official{data::take(all, first), data::take(all, last)};
  official.train.sample_ids.assign(200, "train");
  official.test.sample_ids.assign(100, "test");
  const data::TrainTest pooled = data::pool_splits(official);
  ASSERT_EQ(pooled.train.samples(), 300);
  ASSERT_EQ(pooled.train.features(), 2);
  EXPECT_EQ(pooled.test.samples(), 0);
  EXPECT_EQ(pooled.test.features(), 2);
  EXPECT_EQ(pooled.train.num_classes, 2);
  for (index_t i = 0; i < 300; ++i) {
    EXPECT_EQ(pooled.train.X(i, 0), static_cast<double>(i));
    EXPECT_EQ(pooled.train.X(i, 1), 1.0);
    EXPECT_EQ(pooled.train.y[i], all.y[i]);
    EXPECT_EQ(pooled.train.sample_ids[i], i < 200 ? "train" : "test");
  }
  experiment::Config c;
  c.users = 3;
  c.samples_per_user = 50;
  c.seed = 9;
  for (index_t trial = 0; trial < 3; ++trial) {
    const auto sp = experiment::draw_split(c, pooled.train, pooled.test, 100, trial);
    const auto train = ids(sp.X), test = ids(sp.Y);
    ASSERT_EQ(train.size(), 150u);
    ASSERT_EQ(test.size(), 100u);
    EXPECT_EQ(std::set<double>(test.begin(), test.end()).size(), 100u);
    for (double t : test) EXPECT_EQ(train.count(t), 0u) << t;
    // 100 of 300 rows: the chance that none (or all) come from the 200 training rows is
    // below 1e-30, and that the users' 150 rows miss the last 100 below 1e-20.
    EXPECT_GT(std::count_if(test.begin(), test.end(), [](double t) { return t < 200; }), 0);
    EXPECT_GT(std::count_if(test.begin(), test.end(), [](double t) { return t >= 200; }), 0);
    EXPECT_GT(std::count_if(train.begin(), train.end(), [](double t) { return t >= 200; }), 0);
    const auto sp_off = experiment::draw_split(c, official.train, official.test, 100, trial);
    for (double t : ids(sp_off.Y)) EXPECT_GE(t, 200);
    for (double t : ids(sp_off.X)) EXPECT_LT(t, 200);
  }
  // Nothing to pool, or parts that do not fit together.
  EXPECT_THROW(data::pool_splits({official.train, no_rows(official.train)}), InvalidInput);
  data::TrainTest odd = official;
  odd.test.X = Matrix<double>(100, 3);
  EXPECT_THROW(data::pool_splits(odd), InvalidInput);
  odd = official;
  odd.test.num_classes = 3;
  EXPECT_THROW(data::pool_splits(odd), InvalidInput);
}

// The synthetic set has 2000 official test rows: 3000 test rows are too many for them, and fine
// for the pool of 8000, where the run announces the pooling.
TEST(ExperimentDataPrep, PooledRunDrawsMoreTestRowsThanTheOfficialSplitHas) {
  const std::string base =
      "name = \"prep\"\ndataset = \"synthetic\"\nusers = 3\nsamples_per_user = 50\ndim = 5\n"
      "test_samples = 3000\nmethods = [\"central\", \"odc\"]\nmodels = [\"knn\"]\n"
      "conditions = [\"SameSpan-Orth\"]\nmetrics = [\"accuracy\"]\ntrials = 1\nseed = 3\n";
  expect_run_error(base, {"test_samples", "3000"}, false);
  std::vector<std::string> progress;
  const auto res = experiment::run(load_toml(base + "test_split = \"pooled\"\n"),
                                   [&](const std::string& m) { progress.push_back(m); });
  ASSERT_EQ(res.records.size(), 2u);
  for (const auto& r : res.records) EXPECT_GT(r.value, 0.2) << r.method;  // 10 classes
  bool announced = false;
  for (const auto& m : progress)
    announced |=
        m.find("the 6000 training and 2000 official test rows pooled") != std::string::npos;
  EXPECT_TRUE(announced);
}

// With the emulated duplicates, test rows have copies among the training rows; without, never.
TEST(ExperimentDataPrep, DuplicatedPoolPutsCopiesOfTestRowsInTraining) {
  const data::Dataset original = id_pool(50, 20);
  const data::Dataset repeated = data::repeat_rows(original, 200);
  experiment::Config c;
  c.users = 3;
  c.samples_per_user = 30;
  c.subsample = 150;
  c.seed = 9;
  auto shared_ids = [&](const data::Dataset& pool, index_t trial) {
    const auto sp = experiment::draw_split(c, pool, no_rows(pool), 30, trial);
    const auto train = ids(sp.X), test = ids(sp.Y);
    index_t shared = 0;
    for (double id : std::set<double>(test.begin(), test.end())) shared += train.count(id) > 0;
    return shared;
  };
  index_t shared = 0;
  for (index_t t = 0; t < 3; ++t) shared += shared_ids(repeated, t);
  EXPECT_GT(shared, 30);  // about 9 in 10 of the 3 x 30 test rows; 0 without copies
  c.subsample = 50;
  c.samples_per_user = 6;
  for (index_t t = 0; t < 3; ++t) EXPECT_EQ(shared_ids(original, t), 0) << t;
}

// The paper's layout asks for more rows than the file has; the emulation makes it run, and the
// outputs say that it is an emulation.
TEST(ExperimentDataPrep, EmulatedDuplicatesRunThePaperLayoutOnFewRows) {
  TempDir dir;
  write_bytes(dir.file("heart-disease/processed.cleveland.data"), heart_file(40));
  const std::string layout = "users = 4\nsamples_per_user = 20\ntest_samples = 30\ndim = 3\n";
  expect_run_error(heart_toml(dir, "", layout),
                   {"4 users x 20 samples = 80 exceed the 10 training samples"}, false);
  const std::string path = write_config(
      heart_toml(dir, "emulate_duplicates = 120\nsubsample = 110\n", layout), "prep_ok");
  std::vector<std::string> progress;
  const auto res = experiment::run(experiment::load_config(path),
                                   [&](const std::string& m) { progress.push_back(m); });
  EXPECT_FALSE(res.records.empty());
  bool announced = false;
  for (const auto& m : progress)
    announced |= m.find("EMULATION") != std::string::npos &&
                 m.find("row k = row k mod 40") != std::string::npos;
  EXPECT_TRUE(announced);
  const std::string md = experiment::summary_table(res);
  EXPECT_NE(md.find("EMULATED duplicates"), std::string::npos) << md;
  EXPECT_NE(md.find("stratified subsample of 110 rows"), std::string::npos) << md;
}

}  // namespace
}  // namespace dcalign
