// Saved models (Model::save, load_model): every kind of make_model round-trips bit for bit in
// classification and regression, with and without standardised targets; malformed directories
// are IoErrors naming the file and the key; the destination rules of the atomic save.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "dcalign/learn.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/random.hpp"
#include "learn/model_io.hpp"
#include "learn/toy_data.hpp"
#include "temp_dir.hpp"

namespace dcalign::learn {
namespace {

namespace fs = std::filesystem;
using testing::blobs;
using testing::Data;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
void spit(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

// y = 100 + 50 (x0 - x1^2) + noise: far from unit scale, so that standardize_target matters.
Data regression(index_t n, std::uint64_t seed, index_t d = 4) {
  Rng rng(seed);
  Data data{Matrix<double>(n, d), std::vector<double>(static_cast<size_t>(n))};
  for (index_t i = 0; i < n; ++i) {
    for (index_t j = 0; j < d; ++j) data.X(i, j) = rng.normal();
    data.y[static_cast<size_t>(i)] =
        100 + 50 * (data.X(i, 0) - data.X(i, 1) * data.X(i, 1)) + 0.1 * rng.normal();
  }
  return data;
}

std::vector<std::uint64_t> bits(const std::vector<double>& v) {
  std::vector<std::uint64_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(double));
  return out;
}
std::vector<std::uint64_t> bits(const Matrix<double>& m) {
  return bits(std::vector<double>(m.data(), m.data() + m.size()));
}

class TempDir : public dcalign::testing::TempDir {
 public:
  TempDir() : dcalign::testing::TempDir("dcalign_model_io") {}
};

template <typename F>
void expect_io(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    const std::string msg = e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "'" << frag << "' missing in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an IoError: " << e.what();
  }
}

void edit_json(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(slurp(dir + "/model.json"));
  edit(j);
  spit(dir + "/model.json", j.dump(2));
}

// ---- the round trip

struct Case {
  std::string label, kind;
  int classes;  ///< 0: regression
  bool scale = false;
  bool absent = false;  ///< class 1 absent from the training labels
  std::function<void(ModelOptions&)> tweak = {};
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.label; }

ModelOptions small_options(const Case& c) {
  ModelOptions o;
  o.seed = 7;
  o.threads = 1;
  o.standardize_target = c.scale;
  o.mlp.hidden_layers = {16, 8};
  o.mlp.max_epochs = 25;
  o.svm.probability = true;
  o.forest.n_estimators = 8;
  o.knn.k = 3;
  if (c.tweak) c.tweak(o);
  return o;
}

Data training_data(const Case& c, std::uint64_t seed, index_t n) {
  if (c.classes == 0) return regression(n, seed);
  Data d = blobs(n, c.classes, 2.0, seed, 4);
  if (c.absent)
    for (double& y : d.y)
      if (y == 1) y = 0;
  return d;
}

void expect_same_fit_info(const FitInfo& a, const FitInfo& b) {
  EXPECT_EQ(a.iterations, b.iterations);
  EXPECT_EQ(bits(a.loss_curve), bits(b.loss_curve));
  EXPECT_EQ(bits(a.validation_scores), bits(b.validation_scores));
  EXPECT_EQ(std::isnan(a.best_validation_score), std::isnan(b.best_validation_score));
  if (!std::isnan(a.best_validation_score)) {
    EXPECT_EQ(a.best_validation_score, b.best_validation_score);
  }
  EXPECT_EQ(std::isnan(a.gamma), std::isnan(b.gamma));
  if (!std::isnan(a.gamma)) {
    EXPECT_EQ(a.gamma, b.gamma);
  }
  EXPECT_EQ(a.support_vectors, b.support_vectors);
}

// Both throw, or both give the same bits.
void expect_same_proba(const Model& a, const Model& b, const Matrix<double>& X) {
  Matrix<double> pa, pb;
  bool threw_a = false, threw_b = false;
  try {
    pa = a.predict_proba(X);
  } catch (const InvalidInput&) {
    threw_a = true;
  }
  try {
    pb = b.predict_proba(X);
  } catch (const InvalidInput&) {
    threw_b = true;
  }
  EXPECT_EQ(threw_a, threw_b);
  if (!threw_a && !threw_b) {
    EXPECT_EQ(pa.rows(), pb.rows());
    EXPECT_EQ(pa.cols(), pb.cols());
    EXPECT_EQ(bits(pa), bits(pb));
  }
}

class RoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(RoundTrip, PredictsBitForBit) {
  const Case& c = GetParam();
  TempDir tmp;
  const Data train = training_data(c, 11, 120);
  const Data fresh = training_data(c, 12, 60);
  auto model = make_model(c.kind, small_options(c));
  model->fit(train.X, train.y, c.classes);
  const std::string dir = tmp.file("model");
  model->save(dir);
  const auto loaded = load_model(dir);
  ASSERT_TRUE(loaded->fitted());
  EXPECT_EQ(loaded->name(), c.kind);
  EXPECT_EQ(loaded->num_classes(), c.classes);
  EXPECT_EQ(loaded->num_features(), train.X.cols());
  EXPECT_EQ(bits(loaded->predict(fresh.X)), bits(model->predict(fresh.X)));
  expect_same_proba(*model, *loaded, fresh.X);
  EXPECT_EQ(bits(loaded->parameters()), bits(model->parameters()));
  expect_same_fit_info(model->info(), loaded->info());
  // The wrapper's moments are saved in regression (predictions in the targets' units).
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/model.json"))["target_scaling"].is_object(),
            c.scale && c.classes == 0);
  // Saving the loaded model writes the same files, byte for byte.
  const std::string again = tmp.file("again");
  loaded->save(again);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename());
  for (const auto& f : files) EXPECT_EQ(slurp(dir + "/" + f), slurp(again + "/" + f)) << f;
  EXPECT_EQ(std::distance(fs::directory_iterator(again), fs::directory_iterator()),
            static_cast<std::ptrdiff_t>(files.size()));
  // And leaves no temporary behind.
  EXPECT_EQ(tmp.entries(), (std::vector<std::string>{"again", "model"}));
}

INSTANTIATE_TEST_SUITE_P(
    EveryKind, RoundTrip,
    ::testing::Values(
        Case{"mlp_binary", "mlp", 2}, Case{"mlp_three", "mlp", 3}, Case{"mlp_regression", "mlp", 0},
        Case{"mlp_scaled", "mlp", 0, true},
        Case{"mlp_float64", "mlp", 3, false, false,
             [](ModelOptions& o) {
               o.mlp.float64 = true;
               o.mlp.early_stopping = false;
             }},
        Case{"mlp_scaled_classifier", "mlp", 3, true}, Case{"logreg_binary", "logreg", 2},
        Case{"logreg_three", "logreg", 3}, Case{"svm_binary", "svm", 2},
        Case{"svm_three", "svm", 3}, Case{"svm_absent_class", "svm", 3, false, true},
        Case{"svm_no_probability", "svm", 3, false, false,
             [](ModelOptions& o) { o.svm.probability = false; }},
        Case{"svm_regression", "svm", 0}, Case{"svm_scaled", "svm", 0, true},
        Case{"knn_three", "knn", 3}, Case{"knn_regression", "knn", 0},
        Case{"knn_scaled", "knn", 0, true}, Case{"forest_binary", "forest", 2},
        Case{"forest_three", "forest", 3}, Case{"forest_absent_class", "forest", 3, false, true},
        Case{"forest_hist", "forest", 3, false, false,
             [](ModelOptions& o) { o.forest.tree_method = "hist"; }},
        Case{"forest_regression", "forest", 0}, Case{"forest_scaled", "forest", 0, true},
        Case{"linear", "linear", 0}, Case{"linear_scaled", "linear", 0, true}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.label; });

// FedAvg's central model (and its target-scaling wrapper) saves like a fitted MLP.
TEST(ModelIo, FedAvgModelRoundTrips) {
  TempDir tmp;
  const Data a = regression(40, 1), b = regression(50, 2), fresh = regression(30, 3);
  ModelOptions o;
  o.seed = 3;
  o.threads = 1;
  o.standardize_target = true;
  o.mlp.hidden_layers = {8};
  FedAvgOptions fo;
  fo.rounds = 3;
  const auto model = fit_fedavg({a.X, b.X}, {a.y, b.y}, 0, o, fo);
  model->save(tmp.file("m"));
  const auto loaded = load_model(tmp.file("m"));
  EXPECT_EQ(bits(loaded->predict(fresh.X)), bits(model->predict(fresh.X)));
  expect_same_fit_info(model->info(), loaded->info());
}

TEST(ModelIo, UnfittedModelIsNotSaved) {
  TempDir tmp;
  auto model = make_model("knn");
  EXPECT_THROW(model->save(tmp.file("m")), InvalidInput);
  EXPECT_TRUE(tmp.entries().empty());
}

// ---- the destination

TEST(ModelIo, ReplacesOnlyAModel) {
  TempDir tmp;
  const Data d = blobs(60, 2, 2.0, 5, 3);
  auto knn = make_model("knn");
  knn->fit(d.X, d.y, 2);
  auto forest = make_model("forest", [] {
    ModelOptions o;
    o.forest.n_estimators = 4;
    return o;
  }());
  forest->fit(d.X, d.y, 2);
  // A model replaces a model, of another kind too: none of the old files stays.
  const std::string dir = tmp.file("m");
  knn->save(dir);
  forest->save(dir + "/");
  EXPECT_EQ(load_model(dir)->name(), "forest");
  EXPECT_FALSE(fs::exists(dir + "/train.npy"));
  // A directory that is not a model, a file, a model with a foreign file: refused, untouched.
  fs::create_directory(tmp.file("mine"));
  spit(tmp.file("mine/precious.txt"), "keep me");
  expect_io([&] { knn->save(tmp.file("mine")); },
            {"mine", "not a dcalign model directory", "precious.txt"});
  EXPECT_EQ(slurp(tmp.file("mine/precious.txt")), "keep me");
  spit(tmp.file("file.txt"), "keep me too");
  expect_io([&] { knn->save(tmp.file("file.txt")); }, {"file.txt", "not a directory"});
  EXPECT_EQ(slurp(tmp.file("file.txt")), "keep me too");
  spit(dir + "/notes.txt", "mine");
  expect_io([&] { knn->save(dir); }, {"notes.txt", "not part of a model"});
  EXPECT_EQ(load_model(dir)->name(), "forest");
  fs::remove(dir + "/notes.txt");
  // An aligner's model directory is another format: not replaced either.
  fs::create_directory(tmp.file("aligner"));
  spit(tmp.file("aligner/model.json"), R"({"format": "dcalign-aligner", "format_version": 1})");
  expect_io([&] { knn->save(tmp.file("aligner")); }, {"not a dcalign model directory"});
  expect_io([&] { knn->save(tmp.file("no/such/parent/m")); }, {"does not exist"});
  EXPECT_EQ(tmp.entries(), (std::vector<std::string>{"aligner", "file.txt", "m", "mine"}));
}

// ---- malformed directories

class BadModel : public ::testing::Test {
 protected:
  // A small MLP, a forest, an SVM and a k-NN classifier, saved.
  std::string saved(const std::string& kind, int classes = 3) {
    Case c{kind, kind, classes};
    const Data d = training_data(c, 21, 90);
    auto m = make_model(kind, small_options(c));
    m->fit(d.X, d.y, classes);
    const std::string dir = tmp_.file(kind);
    m->save(dir);
    return dir;
  }
  TempDir tmp_;
};

TEST_F(BadModel, MissingDirectoryOrFile) {
  expect_io([&] { load_model(tmp_.file("nope")); }, {"nope", "no such directory"});
  spit(tmp_.file("file"), "x");
  expect_io([&] { load_model(tmp_.file("file")); }, {"file", "not a directory"});
  const std::string dir = saved("mlp");
  fs::remove(dir + "/b1.npy");
  expect_io([&] { load_model(dir); }, {"b1.npy", "parameter 'b1'", "parameters[3]"});
  fs::remove(dir + "/model.json");
  expect_io([&] { load_model(dir); }, {"model.json", "does not exist"});
}

TEST_F(BadModel, TruncatedFiles) {
  const std::string dir = saved("mlp");
  const std::string w0 = slurp(dir + "/W0.npy");
  spit(dir + "/W0.npy", w0.substr(0, w0.size() - 5));
  expect_io([&] { load_model(dir); }, {"W0.npy"});
  spit(dir + "/W0.npy", w0.substr(0, 40));
  expect_io([&] { load_model(dir); }, {"W0.npy"});
  spit(dir + "/W0.npy", w0);
  const std::string text = slurp(dir + "/model.json");
  spit(dir + "/model.json", text.substr(0, text.size() / 2));
  expect_io([&] { load_model(dir); }, {"model.json", "not valid JSON"});
}

// Every truncation of model.json and of a parameter file is an IoError, never a crash or a
// model (each file is checked whole).
TEST_F(BadModel, EveryTruncationIsAnIoError) {
  for (const char* kind : {"svm", "knn"}) {
    const std::string dir = saved(kind);
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string file = e.path().string(), whole = slurp(file);
      const size_t step = std::max<size_t>(1, whole.size() / 97);
      for (size_t n = 0; n < whole.size(); n += step) {
        spit(file, whole.substr(0, n));
        expect_io([&] { load_model(dir); }, {e.path().filename().string()});
      }
      spit(file, whole);
    }
    EXPECT_EQ(load_model(dir)->name(), kind);
  }
}

TEST_F(BadModel, EditedModelJson) {
  const std::string dir = saved("mlp");
  const std::string original = slurp(dir + "/model.json");
  const auto reset = [&] { spit(dir + "/model.json", original); };
  edit_json(dir, [](nlohmann::json& j) { j["kind"] = "magic"; });
  expect_io([&] { load_model(dir); }, {"model.json", "'kind'", "magic", "expected one of"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["kind"] = "logreg"; });  // an MLP's options
  expect_io([&] { load_model(dir); }, {"model.json", "'options'", "unexpected key"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["kind"] = "linear"; });
  expect_io([&] { load_model(dir); }, {"model.json", "'num_classes'", "only regression"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["format_version"] = 2; });
  expect_io([&] { load_model(dir); }, {"model.json", "format version 2", "reads format version 1"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["extra"] = 1; });
  expect_io([&] { load_model(dir); }, {"model.json", "unexpected key 'extra'"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["options"]["learning_rate"] = 0.1; });
  expect_io([&] { load_model(dir); }, {"model.json", "'options'", "learning_rate"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["fit_info"].erase("gamma"); });
  expect_io([&] { load_model(dir); }, {"model.json", "'fit_info'", "gamma"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["options"]["threads"] = -1; });
  expect_io([&] { load_model(dir); }, {"model.json", "options.threads"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["options"]["hidden_layers"] = {16, 9}; });
  expect_io([&] { load_model(dir); }, {"W1.npy", "expected 16 x 9"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["num_features"] = 5; });
  expect_io([&] { load_model(dir); }, {"W0.npy", "expected 5 x 16"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["num_classes"] = 4; });
  expect_io([&] { load_model(dir); }, {"W2.npy", "expected 8 x 4"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["target_scaling"] = {{"mean", 1}, {"sd", 2}}; });
  expect_io([&] { load_model(dir); }, {"model.json", "'target_scaling'", "classifier"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["format"] = "dcalign-aligner"; });
  expect_io([&] { load_model(dir); }, {"model.json", "not a dcalign model"});
  reset();
  EXPECT_EQ(load_model(dir)->name(), "mlp");
}

TEST_F(BadModel, ParametersThatDisagreeWithModelJson) {
  const std::string dir = saved("mlp");
  const std::string original = slurp(dir + "/model.json");
  const auto reset = [&] { spit(dir + "/model.json", original); };
  edit_json(dir, [](nlohmann::json& j) { j["parameters"][0]["shape"] = {5, 16}; });
  expect_io([&] { load_model(dir); }, {"W0.npy", "parameters[0].shape", "(4, 16)"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["parameters"][0]["dtype"] = "float64"; });
  expect_io([&] { load_model(dir); }, {"W0.npy", "parameters[0].dtype", "float32"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["parameters"][0]["file"] = "../W0.npy"; });
  expect_io([&] { load_model(dir); }, {"model.json", "parameters[0].file"});
  reset();
  edit_json(dir, [](nlohmann::json& j) { j["parameters"].erase(1); });  // b0
  expect_io([&] { load_model(dir); }, {"model.json", "lacks the parameter 'b0'"});
  reset();
  fs::copy_file(dir + "/b0.npy", dir + "/b9.npy");
  edit_json(dir, [](nlohmann::json& j) {
    auto extra = j["parameters"][1];
    extra["name"] = "b9";
    extra["file"] = "b9.npy";
    j["parameters"].push_back(extra);
  });
  expect_io([&] { load_model(dir); }, {"model.json", "'b9'", "kind 'mlp' does not have"});
  reset();
  EXPECT_EQ(load_model(dir)->name(), "mlp");
}

TEST_F(BadModel, NonFiniteParameter) {
  const std::string dir = saved("mlp");
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Matrix<float> w = read_npy_matrix<float>(dir + "/W1.npy");
    w(2, 3) = bad;
    write_npy(dir + "/W1.npy", w.view());
    expect_io([&] { load_model(dir); },
              {"W1.npy", "parameter 'W1'", "non-finite", "row 2, column 3"});
  }
  const std::string lin = tmp_.file("linear");
  {
    const Data d = regression(30, 4);
    auto m = make_model("linear");
    m->fit(d.X, d.y, 0);
    m->save(lin);
  }
  write_npy(lin + "/intercept.npy",
            Matrix<double>(1, 1, {std::numeric_limits<double>::quiet_NaN()}).view());
  expect_io([&] { load_model(lin); }, {"intercept.npy", "non-finite"});
}

using detail::fnv1a64;

TEST_F(BadModel, DamagedBooster) {
  const std::string dir = saved("forest");
  const std::string json = slurp(dir + "/model.json"), booster = slurp(dir + "/booster.json");
  std::string flipped = booster;
  flipped[flipped.size() / 2] ^= 0x20;
  spit(dir + "/booster.json", flipped);
  expect_io([&] { load_model(dir); }, {"booster.json", "checksum", "native_files[0].fnv1a64"});
  spit(dir + "/booster.json", booster.substr(0, 100));
  expect_io([&] { load_model(dir); }, {"booster.json", "bytes"});
  // Truncated with model.json to match: XGBoost itself refuses it.
  const std::string cut = booster.substr(0, booster.size() / 2);
  spit(dir + "/booster.json", cut);
  edit_json(dir, [&](nlohmann::json& j) {
    j["native_files"][0]["bytes"] = cut.size();
    j["native_files"][0]["fnv1a64"] = fnv1a64(cut);
  });
  expect_io([&] { load_model(dir); }, {"booster.json", "not valid JSON"});
  // A booster of another forest: a regression forest's objective under a classifier's header.
  spit(dir + "/model.json", json);
  {
    Case c{"r", "forest", 0};
    const Data d = training_data(c, 3, 50);
    auto m = make_model("forest", small_options(c));
    m->fit(d.X, d.y, 0);
    m->save(tmp_.file("regression"));
  }
  const std::string reg = slurp(tmp_.file("regression") + "/booster.json");
  spit(dir + "/booster.json", reg);
  edit_json(dir, [&](nlohmann::json& j) {
    j["native_files"][0]["bytes"] = reg.size();
    j["native_files"][0]["fnv1a64"] = fnv1a64(reg);
  });
  expect_io([&] { load_model(dir); }, {"booster.json", "num_class", "expected 4 and 3"});
}

// XGBoost's own readers trust their input (a truncated UBJSON model crashes XGBoost 1.7): every
// truncation and damaged byte of the booster, with model.json's size and checksum made to
// match, must be an IoError or a model that predicts, never a crash.
TEST_F(BadModel, EveryDamagedBoosterIsAnIoErrorOrAModel) {
  const std::string dir = saved("forest");
  const std::string booster = slurp(dir + "/booster.json");
  const Data fresh = blobs(10, 3, 2.0, 8, 4);
  const auto attempt = [&](const std::string& bytes) {
    spit(dir + "/booster.json", bytes);
    edit_json(dir, [&](nlohmann::json& j) {
      j["native_files"][0]["bytes"] = bytes.size();
      j["native_files"][0]["fnv1a64"] = fnv1a64(bytes);
    });
    try {
      const auto m = load_model(dir);
      EXPECT_EQ(m->predict_proba(fresh.X).rows(), 10);
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("booster.json"), std::string::npos) << e.what();
    }
  };
  for (size_t n = 0; n < booster.size(); n += 1 + booster.size() / 300)
    attempt(booster.substr(0, n));
  Rng rng(3);
  const std::string bytes = "0123456789-[]{},:\"e.x";
  for (int t = 0; t < 500; ++t) {
    std::string damaged = booster;
    damaged[rng.below(damaged.size())] = bytes[rng.below(bytes.size())];
    attempt(damaged);
  }
}

TEST_F(BadModel, InconsistentSvmAndKnnArrays) {
  const std::string svm = saved("svm");
  Matrix<double> nsv = read_npy_matrix<double>(svm + "/n_sv.npy");
  nsv(0, 0) += 1;
  write_npy(svm + "/n_sv.npy", nsv.view());
  expect_io([&] { load_model(svm); }, {"n_sv.npy", "sums to"});
  nsv(0, 0) -= 1;
  write_npy(svm + "/n_sv.npy", nsv.view());
  Matrix<double> labels = read_npy_matrix<double>(svm + "/labels.npy");
  labels(0, 1) = labels(0, 0);
  write_npy(svm + "/labels.npy", labels.view());
  expect_io([&] { load_model(svm); }, {"labels.npy", "distinct class indices"});

  const std::string knn = saved("knn");
  Matrix<double> y = read_npy_matrix<double>(knn + "/targets.npy");
  y(5, 0) = 7;
  write_npy(knn + "/targets.npy", y.view());
  expect_io([&] { load_model(knn); }, {"targets.npy", "row 5", "class index in 0..2"});
}

}  // namespace
}  // namespace dcalign::learn
