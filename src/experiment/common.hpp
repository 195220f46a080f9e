#pragma once
// Pieces the experiment's units share: the method names, stacking, and scoring a model.
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dcalign/data.hpp"
#include "dcalign/experiment.hpp"
#include "dcalign/learn.hpp"
#include "dcalign/matrix.hpp"

namespace dcalign::experiment {

/// The alignment methods a config may name (odc, imakura, kawakami, gopp, opp, rdp-ls, rdp-opp),
/// beside the baselines central and local.
const std::set<std::string>& align_method_names();
bool is_align_method(const std::string& method);

/// A method name and the variant of its random factor after a ':' ("odc:identity" -> {"odc",
/// "identity"}; "odc" -> {"odc", ""}). The variants: ODC's O ("haar", "identity") and
/// Imakura-DC's R ("identity", "uniform"); they override odc_rotation and imakura_right for that
/// method, so that one config runs both on the same data (paper 001 section 8).
struct MethodName {
  std::string base, variant;
};
MethodName split_method(const std::string& method);

/// Analyst-side standardisation of the aligned representation: each column's mean and
/// population standard deviation from the stacked training representation (a constant column
/// keeps sd 1), applied to it and to the users' mapped test rows.
void standardize_aligned(Matrix<double>& train, Matrix<double>& test);

/// Paper 004's down-sampling defence for one party holding the rows X under its basis F: the
/// indices, increasing, of the rows x with r(x) = ||x - x F F^+|| / ||x|| >= epsilon (> 0).
/// Throws InvalidInput, naming epsilon, the row count and the largest ratio, when it keeps no
/// row: the party would have nothing to release.
std::vector<index_t> defended_rows(const Matrix<double>& X, const Matrix<double>& F,
                                   double epsilon);

/// [parts[0]; parts[1]; ...]: the rows of every part, in order.
using data::vstack;
std::vector<double> concat(const std::vector<std::vector<double>>& parts);

/// The metrics (accuracy, roc_auc, pr_auc, rmse) of predictions for true labels y. `predict`
/// gives the predicted labels, `proba` the n x K probabilities; each is called at most once, and
/// only when a metric needs it. Binary AUCs use column 1, K > 2 the one-vs-rest macro means.
/// The models' options of a run: the Config's, with `seed`, its device and threads, and class
/// probabilities where a metric needs them (roc_auc, pr_auc).
learn::ModelOptions trial_model_options(const Config& c, std::uint64_t seed);
std::map<std::string, double> score(const std::vector<std::string>& metrics,
                                    const std::vector<double>& y, index_t num_classes,
                                    const std::function<std::vector<double>()>& predict,
                                    const std::function<Matrix<double>()>& proba);
/// The same for a fitted model on X.
std::map<std::string, double> score(const learn::Model& h, const Matrix<double>& X,
                                    const std::vector<double>& y,
                                    const std::vector<std::string>& metrics, index_t num_classes);

/// One trial's data: per user its training rows and its share of the test rows (the shares
/// together are the whole test set).
struct Split {
  std::vector<Matrix<double>> X, Y;        // per user: training and test features
  std::vector<std::vector<double>> y, yY;  // labels
};

/// How many disjoint row sets a trial draws: c, or c/2 for "vertical-joined" (pairs of users
/// hold the same rows).
index_t row_holders(const Config& c);

/// Draws trial `trial`'s data from the trial's seed alone. With an official test split
/// (test.samples() > 0) the users' rows come from `train` and the test rows are all of `test`, or
/// a random subset of n_test of them. Without one, `train` is the whole dataset and the trial
/// first splits off its own n_test test rows, so that the test set's variance is part of the
/// spread over trials. With c.subsample > 0, `train` is first replaced by the trial's subsample
/// of c.subsample of its rows (data::subsample, stratified per c.subsample_stratified), and
/// everything above happens within those rows.
Split draw_split(const Config& c, const data::Dataset& train, const data::Dataset& test,
                 index_t n_test, index_t trial);

namespace detail {
using Clock = std::chrono::steady_clock;
/// Seconds since t0.
inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
/// The checks on a Config alone (config_checks.cpp), before anything is loaded: load_config
/// applies them to a file, the runner to every point, so that a Config built in code meets them
/// too. Throws InvalidInput naming the key, and the file when the config came from one.
void check_config(const Config& config);
/// "experiment", or "experiment file '<source>'" for a config read from a file: how messages
/// about a config begin.
std::string where(const Config& config);
/// An error about a configuration key: "<where>: key '<key>' <what>".
[[noreturn]] void key_error(const Config& config, const char* key, const std::string& what);
/// Every name in `given` (at least one) is in `known`, else InvalidInput naming the key and the
/// known names; `what` says what the names are ("model").
void check_names(const Config& config, const std::vector<std::string>& given,
                 const std::set<std::string>& known, const char* what, const char* key);
/// The [[statistics]] specs against the config (names, methods, factors); throws InvalidInput.
void validate_statistics(const Config& config);
/// The "config" object of result_json: the keys that describe the run, as JSON text.
std::string config_json(const Config& config);
/// One point of a run (no sweep): Runner's checks alone (loading the dataset).
void prepare_point(const Config& config, const Progress& progress);
}  // namespace detail

/// A seed derived from the run's seed and a purpose (a) and index (b).
std::uint64_t derive(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0);

}  // namespace dcalign::experiment
