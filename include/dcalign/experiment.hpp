#pragma once
// The whole Data Collaboration protocol (paper 001, Algorithm 1 and section 7) as a repeatable
// experiment: dataset, user partition, secret bases under a condition of eq. 92, released
// representations, alignment, downstream model on the stacked aligned data, evaluation on the
// users' test data mapped with their own F_i G_i (eq. 9); Central and Local baselines; trials
// with mean and 95% confidence intervals.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dcalign/learn.hpp"
#include "dcalign/user.hpp"

namespace dcalign::experiment {

struct Config {
  std::string name = "experiment";
  std::string source;    ///< the TOML file it was read from (for the record)
  std::string dataset;   ///< a name from data::dataset_names()
  std::string data_dir;  ///< empty: $DCALIGN_DATA, else the compiled default
  bool verify_checksums = false;
  std::string partition = "iid";  ///< iid | label-skew | dirichlet
  double dirichlet_alpha = 0.5;
  index_t users = 10;              ///< c
  index_t samples_per_user = 100;  ///< n_i
  index_t test_samples = 0;        ///< 0: the whole official test set; else a random subset
  index_t anchor_rows = 1000;      ///< a
  std::string anchor = "uniform";  ///< uniform | normal
  index_t dim = 50;                ///< l; 0 means floor(dim_fraction * m)
  double dim_fraction = 0.0;
  bool center = false;  ///< PCA (centred) instead of plain SVD for V_i
  /// ODC's target rotation O in A_1 O: "haar" (a fresh random one per trial) or "identity".
  std::string odc_rotation = "haar";
  /// Imakura-DC's right factor R in Z = U R: "identity" or "uniform" (a random invertible one).
  std::string imakura_right = "identity";
  /// Who maps the test set: "own" (each user its share with F_i G_i, paper eq. 9) or "first"
  /// (user 1 maps all of it with F_1 G_1).
  std::string test_holder = "own";
  std::vector<SpanCondition> conditions = {SpanCondition::same_span_orth};
  /// Alignment methods (odc, imakura, kawakami, gopp) and baselines (central, local).
  std::vector<std::string> methods = {"central", "local", "imakura", "kawakami", "odc"};
  std::vector<std::string> models = {"svm"};  ///< svm | mlp | logreg | knn
  /// accuracy | roc_auc | pr_auc | rmse. AUC metrics make the SVM fit probability outputs.
  std::vector<std::string> metrics = {"accuracy"};
  index_t trials = 1;
  std::uint64_t seed = 0;
  std::string device = "cpu";  ///< alignment and LibTorch models
  /// LibTorch threads. 1 by default: mini-batch MLP training on small layers got slower, and
  /// erratic, with 2 threads on a loaded 2-core machine (measured in the learning layer).
  int threads = 1;
  learn::ModelOptions model_options;
};

/// Reads a TOML experiment file. Unknown keys, wrong types and bad values throw InvalidInput
/// naming the file and the key.
Config load_config(const std::string& path);

/// Why `name` cannot be an experiment's name, or "" if it can. The name becomes the output file
/// names in write_outputs' directory, so it must be a single plain file name: 1 to 128
/// characters from [A-Za-z0-9_+.-], not starting with '.' or '-' (no '/', no "..", no hidden
/// files).
std::string experiment_name_problem(const std::string& name);

/// One number: one trial, condition, method, model and metric. Central and Local do not depend
/// on the condition and are reported with condition "-".
struct Record {
  index_t trial = 0;
  std::string condition, method, model, metric;
  double value = 0.0;
  double seconds = 0.0;  ///< training + evaluation time of this model
};

struct Result {
  Config config;
  std::vector<Record> records;
  double wall_seconds = 0.0;
  std::string machine;  ///< CPU model and thread counts
};

using Progress = std::function<void(const std::string&)>;

/// Validates the configuration against the dataset (before any training) and runs it.
Result run(const Config& config, const Progress& progress = {});

/// Writes <dir>/<name>.json (config, machine, records), <dir>/<name>.csv (records) and
/// <dir>/<name>.md (summary table in the layout of paper 001 Table 7).
void write_outputs(const Result& result, const std::string& dir);

/// The Markdown summary: mean +- 95% CI half-width (Student t over trials).
std::string summary_table(const Result& result);

}  // namespace dcalign::experiment
