// The DC protocol runner: bad configurations fail before any work, a small MNIST run reaches
// the accuracy the paper's protocol implies, and the same seed gives the same numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "dataset_guard.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/data.hpp"
#include "dcalign/experiment.hpp"
#include "dcalign/learn.hpp"
#include "experiment/config_files.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;

bool have_mnist() {
  return fs::exists(fs::path(data::resolve_data_dir("")) / "mnist" / "train-images-idx3-ubyte.gz");
}

experiment::Config small_mnist() {
  experiment::Config c;
  c.name = "smoke";
  c.dataset = "mnist";
  c.users = 20;
  c.samples_per_user = 100;
  c.test_samples = 2000;
  c.anchor_rows = 500;
  c.dim = 50;
  c.conditions = {SpanCondition::same_span_orth};
  c.methods = {"odc"};
  c.models = {"svm"};
  c.trials = 1;
  c.seed = 5;
  return c;
}

template <typename F>
void expect_fails_fast(F&& f, const std::string& fragment) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
  // "Before any work starts": no training happened (a fit takes far longer than loading).
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

TEST(Experiment, BadConfigsFailBeforeWork) {
  auto c = small_mnist();
  c.dataset = "synthetic";  // needs no files
  c.methods = {"odc", "procrustes"};
  expect_fails_fast([&] { experiment::run(c); }, "unknown method 'procrustes'");
  c = small_mnist();
  c.dataset = "synthetic";
  c.dim = 65;
  expect_fails_fast([&] { experiment::run(c); }, "exceeds the 64 features");
  c = small_mnist();
  c.dataset = "synthetic";
  c.users = 100;
  expect_fails_fast([&] { experiment::run(c); }, "exceed the 6000 training samples");
  // Sizes that overflow 64 bits are named, not wrapped (which would be
  // undefined behaviour and could pass the comparison), and absurd anchors are refused before
  // they are allocated.
  c.users = index_t{1} << 40;
  c.samples_per_user = index_t{1} << 40;
  expect_fails_fast([&] { experiment::run(c); },
                    "users x samples_per_user: 1099511627776 x 1099511627776 does not fit");
  c = small_mnist();
  c.dataset = "synthetic";
  c.anchor_rows = index_t{1} << 40;
  expect_fails_fast([&] { experiment::run(c); }, "each must be at most 2^31");
  c = small_mnist();
  c.models = {"boosting"};
  expect_fails_fast([&] { experiment::run(c); }, "unknown model 'boosting'");
  c = small_mnist();
  c.dataset = "imagenet";
  expect_fails_fast([&] { experiment::run(c); }, "imagenet");
  c = small_mnist();
  const auto empty = fs::temp_directory_path() / "dcalign_no_data";
  fs::create_directories(empty);
  c.data_dir = empty.string();
  expect_fails_fast([&] { experiment::run(c); }, "mnist");
}

// --device cuda without a GPU (or, with one, against a CPU-only LibTorch for the MLP) fails
// before the dataset is read: here the data directory is empty, and the error is the device's.
TEST(Experiment, CudaWithoutItFailsBeforeTheData) {
  if (dcalign::cuda_available() && learn::cuda_available()) GTEST_SKIP() << "CUDA is usable here";
  auto c = small_mnist();
  c.device = "cuda";
  c.models = {"mlp"};
  const auto empty = fs::temp_directory_path() / "dcalign_no_data_cuda";
  fs::create_directories(empty);
  c.data_dir = empty.string();
  try {
    experiment::run(c);
    ADD_FAILURE() << "device cuda accepted";
  } catch (const BackendError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(m.find("CUDA") != std::string::npos) << m;
    EXPECT_EQ(m.find("mnist"), std::string::npos) << m;
  }
}

TEST(Experiment, ConfigFileErrorsNameFileAndKey) {
  const auto path = (fs::temp_directory_path() / "dcalign_bad.toml").string();
  std::ofstream(path) << "dataset = \"mnist\"\nuserz = 3\n";
  try {
    experiment::load_config(path);
    ADD_FAILURE();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("userz"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  std::ofstream(path) << "dataset = \"mnist\"\nusers = \"many\"\n";
  EXPECT_THROW(experiment::load_config(path), InvalidInput);
  std::ofstream(path) << "dataset = \"mnist\"\nconditions = [\"SameSpan-Orth\", \"Weird\"]\n";
  EXPECT_THROW(experiment::load_config(path), InvalidInput);
  std::ofstream(path) << "dataset = \"mnist\"\nodc_rotation = \"skewed\"\n";
  try {
    experiment::load_config(path);
    ADD_FAILURE();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "odc_rotation 'skewed' is unknown: expected one of: haar, identity"),
              std::string::npos)
        << e.what();
  }
  std::ofstream(path) << "dataset = \"mnist\"\nimakura_right = \"zero\"\n";
  EXPECT_THROW(experiment::load_config(path), InvalidInput);
  std::ofstream(path) << "dataset = \"mnist\"\ntest_holder = \"everyone\"\n";
  EXPECT_THROW(experiment::load_config(path), InvalidInput);
  std::ofstream(path) << "dataset = \"mnist\"\nodc_rotation = \"identity\"\n";
  EXPECT_EQ(experiment::load_config(path).odc_rotation, "identity");
  std::ofstream(path) << "dataset = [unterminated\n";
  EXPECT_THROW(experiment::load_config(path), InvalidInput);
  // Every committed config parses (at least five), in experiments/ and its folders
  // (experiments/dp_000/).
  int parsed = 0;
  for (const auto& entry : fs::recursive_directory_iterator(std::string(DCALIGN_TEST_DATA_DIR) +
                                                            "/../../experiments")) {
    if (entry.path().extension() != ".toml") continue;
    const auto cfg = experiment::load_config(entry.path().string());
    EXPECT_FALSE(cfg.dataset.empty()) << entry.path();
    ++parsed;
  }
  EXPECT_GE(parsed, 5);
}

// Loads `toml` from a file and expects InvalidInput whose message has every fragment and the
// file's path.
using testing::expect_config_error;
using testing::load_toml;

TEST(Experiment, IntegersThatDoNotFitTheirFieldAreRejected) {
  // The models that use the keys below (a key for a model not in the list is refused).
  const std::string d = "dataset = \"mnist\"\nmodels = [\"svm\", \"mlp\", \"knn\"]\n";
  // int fields: a 64-bit value must not wrap.
  expect_config_error(d + "knn_k = 4294967297\n", {"'knn_k'", "4294967297", "1 to 2147483647"});
  expect_config_error(d + "mlp_max_epochs = 2147483648\n", {"'mlp_max_epochs'", "2147483647"});
  expect_config_error(d + "mlp_hidden = -5\n", {"'mlp_hidden'", "-5", "from 1"});
  expect_config_error(d + "mlp_batch_size = 0\n", {"'mlp_batch_size'", "from 1"});
  expect_config_error(d + "threads = 4294967296\n", {"threads ", "is out of range: expected 0 to"});
  expect_config_error(d + "threads = -1\n", {"threads ", "is out of range: expected 0 to"});
  // Counts: no negatives, no zeros where at least one is needed.
  expect_config_error(d + "users = -3\n", {"'users'", "-3", "from 1 to"});
  expect_config_error(d + "users = 0\n", {"'users'", "from 1"});
  expect_config_error(d + "samples_per_user = 0\n", {"'samples_per_user'"});
  expect_config_error(d + "anchor_rows = -1\n", {"'anchor_rows'"});
  expect_config_error(d + "trials = 0\n", {"'trials'", "from 1"});
  expect_config_error(d + "test_samples = -1\n", {"'test_samples'", "from 0"});
  expect_config_error(d + "dim = -50\n", {"'dim'", "from 0"});
  expect_config_error(d + "seed = -1\n", {"'seed'", "from 0 to 9223372036854775807"});
  expect_config_error(d + "users = 2.5\n", {"'users'", "an integer"});
  // The bounds themselves are accepted.
  const auto c = load_toml(d + "knn_k = 2147483647\nseed = 9223372036854775807\ndim = 0\n" +
                           "dim_fraction = 1.0\ntest_samples = 0\nthreads = 0\n");
  EXPECT_EQ(c.model_options.knn.k, 2147483647);
  EXPECT_EQ(c.seed, 9223372036854775807ull);
}

TEST(Experiment, RealsMustBeFiniteAndInRange) {
  const std::string d = "dataset = \"mnist\"\nmodels = [\"svm\", \"mlp\"]\n";
  for (const char* v : {"nan", "inf", "-inf"}) {
    for (const char* key :
         {"dirichlet_alpha", "dim_fraction", "mlp_learning_rate", "mlp_alpha", "svm_C"})
      expect_config_error(d + key + " = " + v + "\n", {std::string("'") + key + "'", "finite"});
  }
  expect_config_error(d + "dirichlet_alpha = 0\n", {"'dirichlet_alpha'", "(0, inf)"});
  expect_config_error(d + "dim_fraction = 1.5\n", {"'dim_fraction'", "[0, 1]"});
  expect_config_error(d + "dim_fraction = -0.1\n", {"'dim_fraction'", "[0, 1]"});
  expect_config_error(d + "mlp_learning_rate = 0.0\n", {"'mlp_learning_rate'", "(0, inf)"});
  expect_config_error(d + "mlp_alpha = -1e-4\n", {"'mlp_alpha'", "[0, inf)"});
  expect_config_error(d + "svm_C = -1\n", {"'svm_C'", "(0, inf)"});
  expect_config_error(d + "svm_C = \"big\"\n", {"'svm_C'", "a finite number"});
  // Integers are accepted for reals.
  EXPECT_EQ(load_toml(d + "svm_C = 10\nmlp_alpha = 0\n").model_options.svm.C, 10.0);
  // Also integers no double holds exactly (rounded; found by fuzz_toml, where they escaped as
  // std::bad_optional_access), and they are still range-checked.
  EXPECT_EQ(load_toml(d + "svm_C = 4611668018427387904\n").model_options.svm.C,
            4611668018427387904.0);
  EXPECT_EQ(
      load_toml(d + "mlp_learning_rate = 9223372036854775807\n").model_options.mlp.learning_rate,
      9223372036854775808.0);
  expect_config_error(d + "dim_fraction = 9007199254740993\n", {"'dim_fraction'", "[0, 1]"});
}

TEST(Experiment, ForestKeysAreReadAndChecked) {
  const std::string d = "dataset = \"mnist\"\n";
  expect_config_error(d + "forest_trees = 0\n", {"'forest_trees'", "from 1"});
  expect_config_error(d + "forest_max_depth = -1\n", {"'forest_max_depth'", "from 0"});
  expect_config_error(d + "forest_subsample = 0\n", {"'forest_subsample'", "(0, 1]"});
  expect_config_error(d + "forest_max_features = 1.5\n", {"'forest_max_features'", "(0, 1]"});
  expect_config_error(d + "forest_tree_method = \"approx\"\n",
                      {"'forest_tree_method'", "\"exact\" or \"hist\""});
  const auto c = load_toml(d +
                           "models = [\"forest\"]\nforest_trees = 50\nforest_max_depth = 8\n"
                           "forest_subsample = 1\nforest_max_features = 0.5\n"
                           "forest_tree_method = \"hist\"\n");
  const auto& f = c.model_options.forest;
  EXPECT_EQ(c.models, std::vector<std::string>{"forest"});
  EXPECT_EQ(f.n_estimators, 50);
  EXPECT_EQ(f.max_depth, 8);
  EXPECT_EQ(f.subsample, 1.0);
  EXPECT_EQ(f.max_features, 0.5);
  EXPECT_EQ(f.tree_method, "hist");
}

TEST(Experiment, EmptyRequiredListIsAnError) {
  const std::string d = "dataset = \"mnist\"\n";
  for (const char* key : {"conditions", "methods", "models", "metrics"})
    expect_config_error(d + key + " = []\n", {std::string("'") + key + "'", "non-empty"});
}

TEST(Experiment, NameMustBeAPlainFileName) {
  const std::string d = "dataset = \"mnist\"\n";
  for (const char* bad :
       {"../../etc/x", "a/b", "..", ".hidden", "", "-rf", "a b", "a\\\\b", "x\\u0001y"})
    expect_config_error(d + "name = \"" + bad + "\"\n", {"'name'", "single plain file name"});
  expect_config_error(d + "name = \"" + std::string(129, 'a') + "\"\n", {"'name'", "129"});
  EXPECT_EQ(load_toml(d + "name = \"mnist_table7-v2.1+x\"\n").name, "mnist_table7-v2.1+x");
  // A Config built in code is checked before any work, and again before writing.
  auto c = small_mnist();
  c.dataset = "synthetic";
  c.name = "../escape";
  expect_fails_fast([&] { experiment::run(c); }, "single plain file name");
  experiment::Result r;
  r.config = c;
  const auto dir = fs::temp_directory_path() / "dcalign_name_out";
  fs::create_directories(dir);
  EXPECT_THROW(experiment::write_outputs(r, dir.string()), InvalidInput);
  EXPECT_FALSE(fs::exists(dir.parent_path() / "escape.json"));
}

// The run's JSON document (result_json, <name>.json): indented, except that every record and
// statistics row takes one line; it parses back to the same records.
TEST(Experiment, ResultJsonHasOneLinePerRowAndParsesBack) {
  auto c = small_mnist();
  c.dataset = "synthetic";
  c.users = 4;
  c.dim = 8;
  c.methods = {"central", "odc", "imakura"};
  c.models = {"knn"};
  c.trials = 3;
  c.conditions = {SpanCondition::diff_span};
  experiment::StatisticsSpec t;
  t.test = "paired-t";
  t.a = "odc";
  t.b = "imakura";
  c.statistics = {t};
  const auto r = experiment::run(c);
  ASSERT_FALSE(r.records.empty());
  ASSERT_FALSE(r.statistics.empty());
  const std::string text = experiment::result_json(r);
  std::istringstream lines(text);
  std::string line;
  size_t record_lines = 0, statistics_lines = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("    {\"trial\":", 0) == 0) ++record_lines;
    if (line.rfind("    {\"test\":", 0) == 0) ++statistics_lines;
  }
  EXPECT_EQ(record_lines, r.records.size()) << text;
  EXPECT_EQ(statistics_lines, r.statistics.size()) << text;
  const auto j = nlohmann::json::parse(text);
  ASSERT_EQ(j["records"].size(), r.records.size());
  for (size_t k = 0; k < r.records.size(); ++k) {
    EXPECT_EQ(j["records"][k]["method"], r.records[k].method);
    EXPECT_EQ(j["records"][k]["value"].get<double>(), r.records[k].value);  // exact round trip
  }
  EXPECT_EQ(j["statistics"][0]["p"].get<double>(), r.statistics[0].p);
  EXPECT_EQ(j["config"]["users"], 4);
}

TEST(Experiment, MnistSmokeOdcSameSpanOrthAbove90Percent) {
  DCALIGN_REQUIRE_DATASET(!have_mnist(), "MNIST not found under " << data::resolve_data_dir(""));
  const auto res = experiment::run(small_mnist());
  ASSERT_EQ(res.records.size(), 1u);
  EXPECT_EQ(res.records[0].method, "odc");
  EXPECT_GE(res.records[0].value, 0.90);
}

TEST(Experiment, SameSeedSameNumbers) {
  auto c = small_mnist();
  c.dataset = "synthetic";
  c.users = 5;
  c.dim = 10;
  c.methods = {"central", "local", "imakura", "odc"};
  c.models = {"knn", "mlp", "forest"};
  c.model_options.forest.n_estimators = 10;  // a small forest keeps the test fast
  c.conditions = {SpanCondition::diff_span};
  const auto r1 = experiment::run(c), r2 = experiment::run(c);
  ASSERT_EQ(r1.records.size(), r2.records.size());
  for (size_t k = 0; k < r1.records.size(); ++k)
    EXPECT_EQ(r1.records[k].value, r2.records[k].value);
  const std::string table = experiment::summary_table(r1);
  EXPECT_NE(table.find("Central"), std::string::npos);
  EXPECT_NE(table.find("DiffSpan"), std::string::npos);
}

// align_timing adds the analyst's alignment time per trial, condition and method (003 Table
// II's TIME row), and the summary's time table; off, there are no such records.
TEST(Experiment, AlignTimingRecordsOneTimePerAlignment) {
  auto c = small_mnist();
  c.dataset = "synthetic";
  c.users = 4;
  c.dim = 8;
  c.trials = 2;
  c.methods = {"central", "imakura", "odc"};
  c.models = {"knn", "logreg"};
  c.conditions = {SpanCondition::same_span_orth, SpanCondition::diff_span};
  const auto off = experiment::run(c);
  for (const auto& r : off.records) EXPECT_NE(r.metric, "align_seconds");
  c.align_timing = true;
  const auto on = experiment::run(c);
  std::map<std::tuple<index_t, std::string, std::string>, int> seen;
  for (const auto& r : on.records)
    if (r.metric == "align_seconds") {
      EXPECT_EQ(r.model, "-");
      EXPECT_TRUE(r.value > 0 && r.value < 60) << r.value;
      ++seen[{r.trial, r.condition, r.method}];
    }
  // 2 trials x 2 conditions x 2 aligning methods, once each (not once per model).
  EXPECT_EQ(seen.size(), 8u);
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1) << std::get<2>(key);
  EXPECT_EQ(on.records.size(), off.records.size() + 8);
  const std::string md = experiment::summary_table(on);
  EXPECT_NE(md.find("time to compute all G_i (milliseconds"), std::string::npos) << md;
  EXPECT_EQ(experiment::summary_table(off).find("time to compute all G_i"), std::string::npos);
}

// Under SameSpan-Orth, ODC maps every user's data into the same basis (Theorem: G_i = E_i^T O
// up to rounding), so scoring each user's test share with its own F_i G_i or the whole test set
// with user 1's F_1 G_1 gives the same predictions sample by sample, hence the same accuracy.
TEST(Experiment, TestHolderDoesNotMatterUnderSameSpanOrthForOdc) {
  auto c = small_mnist();
  c.dataset = "synthetic";
  c.users = 6;
  c.dim = 10;
  c.test_samples = 600;
  c.methods = {"local", "odc"};
  c.models = {"knn"};
  const auto own = experiment::run(c);
  c.test_holder = "first";
  const auto first = experiment::run(c);
  ASSERT_EQ(own.records.size(), 2u);
  ASSERT_EQ(first.records.size(), 2u);
  EXPECT_EQ(own.records[1].method, "odc");
  EXPECT_NEAR(own.records[1].value, first.records[1].value, 1.5 / 600.0);
  // Local: the mean over six users' models against user 1's model alone; a different number.
  EXPECT_EQ(first.records[0].method, "local");
  EXPECT_NE(own.records[0].value, first.records[0].value);
}

}  // namespace
}  // namespace dcalign
