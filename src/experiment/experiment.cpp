// The experiment runner: the DC protocol (paper 001, Algorithm 1 and section 7) and NRI-DC
// (paper 004, Algorithm 1 and section 4.1; its three steps are in nri_dc.cpp). The summary
// table and the output files are written in outputs.cpp.
#include "dcalign/experiment.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "dcalign/align.hpp"
#include "dcalign/checked.hpp"
#include "dcalign/comm.hpp"
#include "dcalign/data.hpp"
#include "dcalign/privacy.hpp"
#include "dcalign/privacy_attacks.hpp"
#include "dcalign/random.hpp"
#include "experiment/common.hpp"
#include "experiment/nri_dc.hpp"

namespace dcalign::experiment {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const std::set<std::string> kProtocols = {"dc", "nri-dc"};
const std::set<std::string> kBaselines = {"central", "local"};
const std::set<std::string> kModels = {"svm", "mlp", "logreg", "knn", "forest"};
const std::set<std::string> kMetrics = {"accuracy", "roc_auc", "pr_auc", "rmse"};
const std::set<std::string> kPartitions = {"iid", "label-skew", "dirichlet", "vertical",
                                           "vertical-joined"};

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// `key` is the config key the names come from, so that the message names it.
void check_names(const std::vector<std::string>& given, const std::set<std::string>& known,
                 const char* what, const char* key) {
  if (given.empty())
    throw InvalidInput(std::string("experiment: no ") + what + " given (key '" + key + "')");
  for (const auto& g : given)
    if (!known.count(g))
      throw InvalidInput(std::string("experiment: unknown ") + what + " '" + g + "' in key '" +
                         key + "'; expected one of: " + join(known));
}

// Whether the labels hold every one of the K classes (the AUC metrics need that).
bool all_classes(const std::vector<double>& y, index_t num_classes) {
  return static_cast<index_t>(std::set<double>(y.begin(), y.end()).size()) >= num_classes;
}

std::string machine_description() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
}

// A clearly artificial stand-in used when no real data is available: 10 Gaussian classes in
// 64 features whose means lie in a 16-dimensional subspace, 6000 training and 2000 test samples.
data::TrainTest synthetic_dataset(std::uint64_t seed) {
  const index_t m = 64, k = 10, r = 16, n_train = 6000, n_test = 2000;
  Rng rng(seed);
  const Matrix<double> basis = random_normal<double>(r, m, rng);
  const Matrix<double> centres = random_normal<double>(k, r, rng);
  auto draw = [&](index_t n, const char* name) {
    data::Dataset d;
    d.name = name;
    d.num_classes = k;
    d.X = Matrix<double>(n, m);
    d.y.resize(static_cast<size_t>(n));
    for (index_t i = 0; i < n; ++i) {
      const index_t cls = static_cast<index_t>(rng.below(k));
      d.y[i] = static_cast<double>(cls);
      std::vector<double> z(r);
      for (index_t q = 0; q < r; ++q) z[q] = 1.5 * centres(cls, q) + rng.normal();
      for (index_t j = 0; j < m; ++j) {
        double v = 0.5 * rng.normal();
        for (index_t q = 0; q < r; ++q) v += z[q] * basis(q, j) / 4.0;
        d.X(i, j) = v;
      }
    }
    for (index_t j = 0; j < m; ++j) d.feature_names.push_back("x" + std::to_string(j));
    for (index_t c = 0; c < k; ++c) d.class_names.push_back("class " + std::to_string(c));
    return d;
  };
  data::TrainTest tt;
  tt.train = draw(n_train, "synthetic");
  tt.test = draw(n_test, "synthetic");
  return tt;
}

class Runner {
 public:
  Runner(const Config& c, const Progress& progress) : c_(c), progress_(progress) {}

  /// Everything that can be checked before a trial: names, keys, the dataset and the sizes.
  void prepare() {
    validate_names();
    load();
    validate_sizes();
  }

  Result run() {
    const auto t0 = Clock::now();
    prepare();
    // The CPU backend's threads too: one per run unless asked (two OpenMP threads made step 9
    // 1.7x slower on the 2-core development machine, bench/results/004).
    BackendOptions bo;
    bo.threads = c_.threads;
    backend_ = make_backend(parse_device(c_.device), bo);
    Result res;
    res.config = c_;
    res.machine = machine_description();
    for (index_t t = 0; t < c_.trials; ++t) {
      const double el = since(t0);
      if (progress_) {
        std::ostringstream os;
        os << "trial " << (t + 1) << " of " << c_.trials << ", elapsed " << static_cast<int>(el)
           << " s";
        if (t > 0) os << ", estimated " << static_cast<int>(el / t * (c_.trials - t)) << " s left";
        progress_(os.str());
      }
      trial(t, res);
    }
    res.wall_seconds = since(t0);
    return res;
  }

 private:
  void validate_names() {
    // Before any work: the name becomes the output files' names (write_outputs checks again).
    if (const auto why = experiment_name_problem(c_.name); !why.empty())
      throw InvalidInput("experiment name \"" + c_.name + "\" " + why +
                         "; it must be a single plain file name");
    if (!kProtocols.count(c_.protocol))
      throw InvalidInput("experiment: unknown protocol '" + c_.protocol +
                         "' in key 'protocol'; expected one of: " + join(kProtocols));
    nri_ = c_.protocol == "nri-dc";
    if (c_.test_split != "official" && c_.test_split != "pooled")
      throw InvalidInput("experiment: key 'test_split' = \"" + c_.test_split +
                         "\" must be \"official\" or \"pooled\"");
    if (c_.test_split == "pooled" && c_.test_samples < 1)
      throw InvalidInput(
          "experiment: key 'test_split' = \"pooled\" needs test_samples >= 1 (the "
          "rows each trial draws from the pool for its test set), got " +
          std::to_string(c_.test_samples));
    const std::string holder = c_.holder();
    if (holder != "own" && holder != "first" && !(nri_ && holder == "shared"))
      throw InvalidInput("experiment: key 'test_holder' = \"" + holder + "\" must be " +
                         (nri_ ? "\"own\", \"first\" or \"shared\""
                               : "\"own\" or \"first\" (\"shared\" needs protocol \"nri-dc\")"));
    if (!(c_.nri_delta >= 0) || !std::isfinite(c_.nri_delta))
      throw InvalidInput("experiment: key 'nri_delta' = " + std::to_string(c_.nri_delta) +
                         " must be a finite number >= 0");
    kawakami_form_ = parse_kawakami_form(c_.kawakami_form);
    std::set<std::string> all = align_method_names();
    all.insert(kBaselines.begin(), kBaselines.end());
    all.insert("fedavg");
    for (const auto& m : c_.methods) {
      if (split_method(m).variant.empty() || is_align_method(m)) continue;
      throw InvalidInput("experiment: unknown method variant '" + m +
                         "' in key 'methods'; expected odc:haar, odc:identity, imakura:identity "
                         "or imakura:uniform");
    }
    std::vector<std::string> bases;
    for (const auto& m : c_.methods) bases.push_back(is_align_method(m) ? split_method(m).base : m);
    check_names(bases, all, "method", "methods");
    if (std::set<std::string>(c_.methods.begin(), c_.methods.end()).size() != c_.methods.size())
      throw InvalidInput("experiment: key 'methods' names a method twice");
    if (c_.redraw != "all" && c_.redraw != "alignment")
      key_error("redraw", "= \"" + c_.redraw + "\" must be \"all\" or \"alignment\"");
    validate_fedavg();
    check_names(c_.models, kModels, "model", "models");
    check_names(c_.metrics, kMetrics, "metric", "metrics");
    if (!kPartitions.count(c_.partition))
      throw InvalidInput("experiment: unknown partition '" + c_.partition +
                         "'; expected one of: " + join(kPartitions));
    // "public:<dataset>": anchor rows drawn from another dataset (paper 003's public molecules).
    if (c_.anchor.rfind("public:", 0) == 0) {
      public_anchor_ = c_.anchor.substr(7);
      data::dataset_files(public_anchor_);  // unknown names throw with the list of known ones
    } else {
      anchor_kind_ = parse_anchor_kind(c_.anchor);
    }
    if (c_.samples_per_user == 0 && c_.partition != "label-skew")
      key_error("samples_per_user", "= 0 (every row) needs partition = \"label-skew\"");
    parse_device(c_.device);
    if (c_.trials < 1 || c_.users < 1 || c_.samples_per_user < 0 || c_.anchor_rows < 1)
      throw InvalidInput(
          "experiment: trials, users and anchor_rows must be >= 1, samples_per_user >= 0");
    // Before loading anything: validate_sizes() compares this product with the dataset.
    (void)checked_mul(c_.users, c_.samples_per_user, "experiment: users x samples_per_user");
    if (c_.conditions.empty()) throw InvalidInput("experiment: no conditions given");
    if (c_.dataset != "synthetic")
      data::dataset_files(c_.dataset);  // unknown names throw with the list of known ones
    // Paper 004's data preparation keys; their comparisons with the dataset's rows follow in
    // load() and validate_sizes().
    if (c_.onehot != "full" && c_.onehot != "drop-first")
      key_error("onehot", "= \"" + c_.onehot + "\" must be \"full\" or \"drop-first\"");
    if (c_.heart_ca != "continuous" && c_.heart_ca != "categorical")
      key_error("heart_ca", "= \"" + c_.heart_ca + "\" must be \"continuous\" or \"categorical\"");
    if (c_.heart_ca == "categorical" && c_.dataset != "heart-disease")
      key_error("heart_ca", "= \"categorical\" applies to dataset \"heart-disease\" only, not \"" +
                                c_.dataset + "\"");
    if (c_.subsample < 0)
      key_error("subsample",
                "= " + std::to_string(c_.subsample) + " must be >= 0 (0: no subsample)");
    if (c_.emulate_duplicates < 0)
      key_error("emulate_duplicates",
                "= " + std::to_string(c_.emulate_duplicates) + " must be >= 0 (0: off)");
    validate_privacy();
    validate_measurements();
  }

  // The privacy measurements (load_config checks them too; a Config built in code comes here
  // only).
  void validate_measurements() {
    std::set<std::string> seen;
    for (const auto& p : c_.privacy) {
      if (p != "collusion" && p != "dr")
        key_error("privacy", "names \"" + p + "\"; expected \"collusion\" or \"dr\"");
      if (!seen.insert(p).second) key_error("privacy", "names \"" + p + "\" twice");
    }
    if (c_.privacy_defence && !c_.measures("dr"))
      key_error("privacy_defence",
                "= true needs \"dr\" in privacy (the defence drops the rows whose epsilon-DR ratio "
                "is below privacy_dr_epsilon)");
    if (c_.privacy.empty()) return;
    if (c_.measures("collusion") && c_.users < 2)
      key_error("privacy",
                "lists \"collusion\", which needs users >= 2 (user 1 attacks the others)");
    if (c_.measures("dr") && !(std::isfinite(c_.privacy_dr_epsilon) && c_.privacy_dr_epsilon > 0 &&
                               c_.privacy_dr_epsilon <= 1)) {
      std::ostringstream os;
      os << "= " << c_.privacy_dr_epsilon << " must be a finite number in (0, 1]";
      key_error("privacy_dr_epsilon", os.str());
    }
  }

  // What the evaluator holds of one user's release for the privacy measurements.
  struct ReleaseView {
    const Matrix<double>* data;    ///< X~_j as released (after the defence, noise, P_j)
    const Matrix<double>* anchor;  ///< A~_j
    const Matrix<double>* basis;   ///< F_j, never released
    /// Released row k is row origin[k] of the user's rows; empty: all of them, in order.
    std::vector<index_t> origin;
  };

  // Per trial and condition ("-" for NRI-DC), after the releases: the collusion attack of user 1
  // and the analyst on every other user, the epsilon-DR ratios of every user's rows under its
  // own basis, and what the defence dropped. `clean`: each user's training rows as it holds
  // them, before "raw" noise and the defence.
  void measure_privacy(index_t t, const std::string& condition,
                       const std::vector<Matrix<double>>& clean,
                       const std::vector<ReleaseView>& views, const CollusionAttacker* attacker,
                       std::vector<Record>& out) const {
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return quantile_sorted(v, 0.5);
    };
    const auto record = [&](const char* metric, double v) {
      out.push_back({t, condition, "privacy", "-", metric, v, 0});
    };
    if (attacker) {
      const auto t0 = Clock::now();
      std::vector<double> frobenius, rows, identified;
      for (index_t j = 1; j < c_.users; ++j) {
        const ReleaseView& v = views[static_cast<size_t>(j)];
        const Matrix<double> Xh = attacker->reconstruct(*v.anchor, *v.data);
        // The evaluator knows which row each released row is (NRI-DC: P_j; DC: the rows kept).
        const auto e = reconstruction_error(
            v.origin.empty() ? clean[j] : data::take_rows(clean[j], v.origin), Xh);
        frobenius.push_back(e.relative);
        rows.push_back(e.median_row);
        // The attacker does not: can it pair each reconstruction with its true row?
        if (nri_) identified.push_back(match_rows(clean[j], Xh, v.origin).identified_fraction);
      }
      const double secs = since(t0);
      out.push_back({t, condition, "privacy", "-", "collusion_error", median(frobenius), secs});
      record("collusion_row_error", median(rows));
      if (nri_) record("collusion_identified", median(identified));
    }
    if (c_.measures("dr")) {
      double fraction = 0, lowest = 1;
      std::vector<double> medians;
      for (index_t i = 0; i < c_.users; ++i) {
        const auto s =
            dr_privacy(clean[i], *views[static_cast<size_t>(i)].basis, c_.privacy_dr_epsilon);
        fraction += s.fraction_below;
        lowest = std::min(lowest, s.min);
        medians.push_back(s.median);
      }
      record("dr_fraction_below", fraction / static_cast<double>(c_.users));
      record("dr_min_ratio", lowest);
      record("dr_median_ratio", median(medians));
    }
    if (c_.privacy_defence) {
      index_t dropped = 0, total = 0;
      for (index_t i = 0; i < c_.users; ++i) {
        total += clean[i].rows();
        dropped += clean[i].rows() - views[static_cast<size_t>(i)].data->rows();
      }
      record("dr_dropped_rows", static_cast<double>(dropped));
      record("dr_dropped_fraction", static_cast<double>(dropped) / static_cast<double>(total));
    }
  }

  // The [fedavg] keys (load_config checks them too; a Config built in code comes here only).
  void validate_fedavg() {
    fedavg_ = std::find(c_.methods.begin(), c_.methods.end(), "fedavg") != c_.methods.end();
    if (!fedavg_) return;
    if (nri_) key_error("methods", "names \"fedavg\", which needs protocol \"dc\"");
    if (c_.fedavg_configurations.empty())
      key_error("fedavg.configurations", "is empty; expected at least one \"<E>E<B>B\"");
    std::set<std::string> unique;
    for (const auto& name : c_.fedavg_configurations) {
      learn::FedAvgOptions fo = fedavg_options(name);  // throws for a malformed name
      try {
        learn::validate(fo);
      } catch (const InvalidInput& e) {
        key_error("fedavg", std::string("is invalid: ") + e.what());
      }
      if (!unique.insert(name).second)
        key_error("fedavg.configurations", "names \"" + name + "\" twice");
    }
  }

  learn::FedAvgOptions fedavg_options(const std::string& configuration) const {
    learn::FedAvgOptions fo;
    try {
      std::tie(fo.local_epochs, fo.batch_size) = parse_fedavg_configuration(configuration);
    } catch (const InvalidInput& e) {
      key_error("fedavg.configurations", std::string("is invalid: ") + e.what());
    }
    fo.rounds = c_.fedavg_rounds;
    fo.participation = c_.fedavg_participation;
    return fo;
  }

  // The DP keys (load_config checks them too; a Config built in code comes here only).
  void validate_privacy() {
    if (c_.dp_target != "none" && c_.dp_target != "released" && c_.dp_target != "raw")
      key_error("dp_target",
                "= \"" + c_.dp_target + "\" must be \"none\", \"released\" or \"raw\"");
    if (!c_.dp_enabled()) return;
    if (nri_) key_error("dp_target", "= \"" + c_.dp_target + "\" needs protocol \"dc\"");
    const auto show = [](double v) {
      std::ostringstream os;
      os << v;
      return os.str();
    };
    if (!(std::isfinite(c_.dp_epsilon) && c_.dp_epsilon > 0))
      key_error("dp_epsilon", "= " + show(c_.dp_epsilon) + " must be a finite number > 0");
    if (!(c_.dp_delta > 0 && c_.dp_delta < 1))
      key_error("dp_delta", "= " + show(c_.dp_delta) + " must be in (0, 1)");
    if (!(std::isfinite(c_.dp_row_range) && c_.dp_row_range > 0))
      key_error("dp_row_range", "= " + show(c_.dp_row_range) + " must be a finite number > 0");
    dp_sigma_ = analytic_gaussian_sigma(c_.dp_epsilon, c_.dp_delta, c_.dp_row_range);
  }

  // sigma_i for user i's released X_i F_i: Delta_i = r ||F_i||_2 (paper 000, eq. 4), which is r
  // for orthonormal F_i.
  double released_sigma(const User<double>& user, SpanCondition cond) const {
    if (orthonormal_mixing(cond)) return dp_sigma_;
    const Matrix<double>& F = user.reveal_secret_basis();  // the user's own, never released
    const Matrix<double> v = top_right_singular_vectors(F, 1, false);
    double norm2 = 0;
    for (index_t i = 0; i < F.rows(); ++i) {
      double fv = 0;
      for (index_t j = 0; j < F.cols(); ++j) fv += F(i, j) * v(j, 0);
      norm2 += fv * fv;
    }
    return analytic_gaussian_sigma(c_.dp_epsilon, c_.dp_delta, c_.dp_row_range * std::sqrt(norm2));
  }

  // An error about a configuration key, naming the file it came from when there is one.
  [[noreturn]] void key_error(const char* key, const std::string& what) const {
    throw InvalidInput(
        (c_.source.empty() ? std::string("experiment") : "experiment file '" + c_.source + "'") +
        ": key '" + key + "' " + what);
  }

  void load() {
    data::LoadOptions lo;
    lo.data_dir = c_.data_dir;
    lo.verify_checksums = c_.verify_checksums;
    lo.onehot = data::parse_onehot_coding(c_.onehot);
    lo.heart_ca_categorical = c_.heart_ca == "categorical";
    lo.standardize = c_.standardize;
    if (progress_)
      progress_(c_.dataset == "synthetic"
                    ? std::string("dataset 'synthetic': ARTIFICIAL Gaussian classes, not real data")
                    : "loading " + c_.dataset);
    auto tt = c_.dataset == "synthetic" ? synthetic_dataset(derive(c_.seed, 3))
                                        : data::load_dataset(c_.dataset, lo);
    if (c_.test_split == "pooled") {
      if (tt.test.samples() == 0)
        key_error("test_split", "= \"pooled\" needs a dataset with an official test split; '" +
                                    c_.dataset +
                                    "' has none, and every trial already draws its test rows "
                                    "from all of its rows (leave test_split out)");
      const index_t training = tt.train.samples(), official = tt.test.samples();
      tt = data::pool_splits(tt);
      if (progress_)
        progress_("test_split = \"pooled\": the " + std::to_string(training) + " training and " +
                  std::to_string(official) + " official test rows pooled; each trial draws " +
                  std::to_string(c_.test_samples) + " test rows from them");
    }
    train_ = std::move(tt.train);
    test_ = std::move(tt.test);
    if (c_.emulate_duplicates > 0) {
      if (test_.samples() > 0)
        key_error("emulate_duplicates",
                  "needs a dataset without an official test split (the test rows are drawn from "
                  "the repeated pool); '" +
                      c_.dataset + "' has one");
      if (c_.emulate_duplicates < train_.samples())
        key_error("emulate_duplicates", "= " + std::to_string(c_.emulate_duplicates) +
                                            " is below the " + std::to_string(train_.samples()) +
                                            " rows of '" + c_.dataset +
                                            "'; expected at least that many (or 0: off)");
      // The repeated pool is held in memory: refuse more than 2^31 values, as for the anchor.
      constexpr index_t kMaxPoolValues = index_t{1} << 31;
      if (checked_mul(c_.emulate_duplicates, train_.features(),
                      "experiment: emulate_duplicates x features") > kMaxPoolValues)
        key_error("emulate_duplicates", "= " + std::to_string(c_.emulate_duplicates) + " rows x " +
                                            std::to_string(train_.features()) +
                                            " features exceed 2^31 values");
      const index_t original = train_.samples();
      train_ = data::repeat_rows(train_, c_.emulate_duplicates);
      if (progress_)
        progress_("EMULATION: the pool repeats the " + std::to_string(original) + " rows of " +
                  c_.dataset + " to " + std::to_string(c_.emulate_duplicates) +
                  " rows (row k = row k mod " + std::to_string(original) + ")");
    }
    // No official test split: train_ keeps every sample, and each trial draws its own test set
    // from them (draw_split), so that the spread over trials includes the test set's.
    if (test_.samples() == 0) {
      if (c_.test_samples < 1)
        throw InvalidInput("experiment: dataset '" + c_.dataset +
                           "' has no official test split; set test_samples");
      if (c_.test_samples >= train_.samples())
        throw InvalidInput("experiment: test_samples = " + std::to_string(c_.test_samples) +
                           " leaves no training data (dataset has " +
                           std::to_string(train_.samples()) + " samples)");
      split_per_trial_ = true;
    }
    if (!public_anchor_.empty()) load_public_anchor(lo);
  }

  // The public pool of anchor rows: every row of the named dataset (training and test) whose
  // id does not occur in the task's data (molecules: canonical SMILES), so that the anchor holds
  // no user's molecule.
  void load_public_anchor(const data::LoadOptions& lo) {
    if (progress_) progress_("loading the public anchor pool " + public_anchor_);
    data::LoadOptions plo = lo;
    plo.onehot = data::OneHotCoding::full;
    plo.heart_ca_categorical = false;
    auto tt = data::load_dataset(public_anchor_, plo);
    if (tt.train.features() != train_.features())
      key_error("anchor", "= \"" + c_.anchor + "\": '" + public_anchor_ + "' has " +
                              std::to_string(tt.train.features()) + " features, the task '" +
                              c_.dataset + "' " + std::to_string(train_.features()));
    std::set<std::string> task(train_.sample_ids.begin(), train_.sample_ids.end());
    task.insert(test_.sample_ids.begin(), test_.sample_ids.end());
    std::vector<index_t> keep;
    index_t removed = 0;
    for (const data::Dataset* d : {&tt.train, &tt.test}) {
      for (index_t i = 0; i < d->samples(); ++i) {
        const bool known =
            !d->sample_ids.empty() && task.count(d->sample_ids[static_cast<size_t>(i)]) > 0;
        if (known) {
          ++removed;
          continue;
        }
        keep.push_back(i + (d == &tt.test ? tt.train.samples() : 0));
      }
    }
    if (static_cast<index_t>(keep.size()) < c_.anchor_rows)
      key_error("anchor", "= \"" + c_.anchor + "\": " + std::to_string(keep.size()) + " rows of '" +
                              public_anchor_ + "' are left after removing the " +
                              std::to_string(removed) + " that occur in '" + c_.dataset +
                              "', fewer than anchor_rows = " + std::to_string(c_.anchor_rows));
    Matrix<double> all = tt.test.samples() > 0
                             ? vstack(std::vector<const Matrix<double>*>{&tt.train.X, &tt.test.X})
                             : tt.train.X;
    public_pool_ = data::take_rows(all, keep);
    if (progress_)
      progress_("public anchor pool: " + std::to_string(keep.size()) + " rows of " +
                public_anchor_ + " (" + std::to_string(removed) + " left out: in the task's data)");
  }

  // Trial t's anchor: generated from the seed, or anchor_rows rows of the public pool drawn
  // from it.
  Matrix<double> anchor(index_t t) const {
    const std::uint64_t seed = derive(c_.seed, 17, data_trial(t));
    if (public_anchor_.empty())
      return make_anchor<double>(c_.anchor_rows, train_.features(), anchor_kind_, seed);
    return data::take_rows(public_pool_,
                           data::partition_iid(public_pool_.rows(), 1, c_.anchor_rows, seed)[0]);
  }

  void validate_sizes() {
    const index_t m = train_.features();
    // The subsample is the pool each trial draws from: it holds the users' rows and, without an
    // official split, the test rows.
    if (c_.subsample > 0) {
      const std::string pool = std::to_string(train_.samples()) + " rows of '" + c_.dataset + "'" +
                               (c_.emulate_duplicates > 0 ? " after emulate_duplicates" : "") +
                               (split_per_trial_ ? "" : " (training split)");
      if (c_.subsample > train_.samples())
        key_error("subsample", "= " + std::to_string(c_.subsample) + " exceeds the " + pool +
                                   "; expected at most that many");
      const index_t need =
          checked_add(c_.users * c_.samples_per_user, split_per_trial_ ? c_.test_samples : 0,
                      "experiment: users x samples_per_user + test_samples");
      if (c_.subsample < need)
        key_error("subsample", "= " + std::to_string(c_.subsample) +
                                   " is too small: expected at least users x samples_per_user" +
                                   (split_per_trial_ ? " + test_samples" : "") + " = " +
                                   std::to_string(need) + " rows");
    }
    l_ = c_.dim > 0 ? c_.dim : static_cast<index_t>(std::floor(c_.dim_fraction * m));
    if (l_ < 1) throw InvalidInput("experiment: dim must be >= 1 (or dim_fraction > 0)");
    if (l_ > m)
      throw InvalidInput("experiment: dim l = " + std::to_string(l_) + " exceeds the " +
                         std::to_string(m) + " features m of '" + c_.dataset + "'");
    if (c_.samples_per_user > 0 && l_ > c_.samples_per_user)
      throw InvalidInput("experiment: dim l = " + std::to_string(l_) +
                         " exceeds samples_per_user = " + std::to_string(c_.samples_per_user) +
                         " (a user's top-l singular vectors need l <= n_i)");
    if (c_.samples_per_user == 0) check_all_rows_partition();
    if (l_ > c_.anchor_rows)
      throw InvalidInput("experiment: dim l = " + std::to_string(l_) +
                         " exceeds anchor_rows = " + std::to_string(c_.anchor_rows));
    // checked in validate_names(); pairs of users share their rows under "vertical-joined"
    const index_t need = row_holders(c_) * c_.samples_per_user;
    const index_t pool = c_.subsample > 0 ? c_.subsample : train_.samples();
    const index_t available = split_per_trial_ ? pool - c_.test_samples : pool;
    if (need > available)
      throw InvalidInput("experiment: " + std::to_string(c_.users) + " users x " +
                         std::to_string(c_.samples_per_user) +
                         " samples = " + std::to_string(need) + " exceed the " +
                         std::to_string(available) + " training samples of '" + c_.dataset + "'" +
                         (split_per_trial_ ? " left after test_samples" : ""));
    // The anchor (anchor_rows x m) and its c representations (c x anchor_rows x l) are held at
    // once; refuse sizes beyond 2^31 values each before allocating them.
    constexpr index_t kMaxValues = index_t{1} << 31;
    const index_t anchor_values = checked_mul(c_.anchor_rows, m, "experiment: anchor_rows x m");
    const index_t released_values =
        checked_mul(c_.users, c_.anchor_rows, l_, "experiment: users x anchor_rows x l");
    if (anchor_values > kMaxValues || released_values > kMaxValues)
      throw InvalidInput("experiment: anchor_rows = " + std::to_string(c_.anchor_rows) +
                         " gives an anchor of " + std::to_string(anchor_values) +
                         " values and released anchors of " + std::to_string(released_values) +
                         " values; each must be at most 2^31");
    if (!split_per_trial_ && c_.test_samples > test_.samples())
      throw InvalidInput("experiment: test_samples = " + std::to_string(c_.test_samples) +
                         " exceeds the " + std::to_string(test_.samples()) + " test samples");
    const bool regression = train_.num_classes == 0;
    if (nri_ && regression)
      throw InvalidInput(
          "experiment: protocol 'nri-dc' needs a classification dataset (the "
          "master returns class labels of the anchor)");
    for (const auto& m : c_.metrics) {
      if (regression && m != "rmse")
        throw InvalidInput("experiment: metric '" + m + "' needs a classification dataset");
      if (!regression && m == "rmse")
        throw InvalidInput("experiment: metric 'rmse' needs a regression dataset");
    }
    n_test_ = !split_per_trial_ && c_.test_samples == 0 ? test_.samples() : c_.test_samples;
    validate_vertical();
    if (n_test_ < row_holders(c_))
      throw InvalidInput("experiment: " + std::to_string(n_test_) +
                         " test samples cannot be split among " + std::to_string(c_.users) +
                         " users");
  }

  // The trial whose data (split, secret bases, anchor, noise, model seeds) trial t uses: t, or 0
  // when only the alignment's random factors are redrawn (redraw = "alignment", paper 001
  // section 8's design).
  index_t data_trial(index_t t) const { return c_.redraw == "alignment" ? 0 : t; }

  Split make_split(index_t t) const {
    return draw_split(c_, train_, test_, n_test_, data_trial(t));
  }

  // samples_per_user = 0 with label-skew: every training row, each class dealt evenly among the
  // users holding it (users u, u + K, ... hold class u). Every user must get at least l rows: the
  // class's rows expected after a random test split of test_samples rows, less 10% (the split
  // takes each class in proportion, up to a few standard deviations).
  void check_all_rows_partition() {
    const index_t K = train_.num_classes;
    if (K < 2) key_error("samples_per_user", "= 0 needs a classification dataset");
    if (c_.users < K)
      key_error("samples_per_user",
                "= 0 with " + std::to_string(c_.users) +
                    " users leaves a class without a user (K = " + std::to_string(K) + ")");
    const index_t pool = c_.subsample > 0 ? c_.subsample : train_.samples();
    std::vector<index_t> count(static_cast<size_t>(K), 0);
    for (double v : train_.y) ++count[static_cast<size_t>(v)];
    for (index_t k = 0; k < K; ++k) {
      const index_t holders = c_.users / K + (k < c_.users % K ? 1 : 0);
      index_t rows = count[static_cast<size_t>(k)] * std::min<index_t>(pool, train_.samples()) /
                     train_.samples();
      if (split_per_trial_)
        rows = static_cast<index_t>(
            0.9 * static_cast<double>(rows) *
            (1.0 - static_cast<double>(c_.test_samples) / static_cast<double>(pool)));
      if (rows / holders < l_)
        key_error("samples_per_user", "= 0: class " + std::to_string(k) + " may leave its " +
                                          std::to_string(holders) + " user(s) only " +
                                          std::to_string(rows / holders) +
                                          " rows each, fewer than l = " + std::to_string(l_));
    }
  }

  // Vertical partitions: two complementary blocks of whole attributes, half of the users each.
  void validate_vertical() {
    vertical_ = c_.partition == "vertical" || c_.partition == "vertical-joined";
    if (!vertical_) return;
    joined_ = c_.partition == "vertical-joined";
    const std::string p = "= \"" + c_.partition + "\" ";
    if (c_.users < 2 || c_.users % 2 != 0)
      key_error("partition", p +
                                 "needs an even number of users (half hold each feature block); "
                                 "users = " +
                                 std::to_string(c_.users));
    if (nri_) key_error("partition", p + "needs protocol \"dc\"");
    if (fedavg_) key_error("partition", p + "cannot run FedAvg, whose users hold all features");
    if (!c_.privacy.empty())
      key_error("partition", p + "cannot run the privacy measurements, which attack users "
                                 "holding all features");
    try {
      blocks_ = data::attribute_blocks(train_.feature_names, 2);
    } catch (const InvalidInput& e) {
      key_error("partition", p + "needs two non-empty feature blocks: " + e.what());
    }
    for (const auto& b : blocks_)
      if (l_ > static_cast<index_t>(b.size()))
        throw InvalidInput("experiment: dim l = " + std::to_string(l_) + " exceeds the " +
                           std::to_string(b.size()) + " features of a vertical block of '" +
                           c_.dataset + "' (blocks of " + std::to_string(blocks_[0].size()) +
                           " and " + std::to_string(blocks_[1].size()) + " columns)");
  }

  // The feature block user i holds (vertical partitions), or -1 for all features.
  int block_of(index_t i) const { return vertical_ ? (i < c_.users / 2 ? 0 : 1) : -1; }
  // The row set of the split user i holds (users k and k + c/2 share theirs when joined).
  index_t rows_of(index_t i) const { return joined_ ? i % (c_.users / 2) : i; }
  Matrix<double> block(const Matrix<double>& X, int b) const {
    return b < 0 ? X : data::take_columns(X, blocks_[static_cast<size_t>(b)]);
  }

  // Each user's own data: its rows (and test share) restricted to its feature block.
  Split user_view(const Split& sp) const {
    if (!vertical_) return sp;
    Split v;
    for (index_t i = 0; i < c_.users; ++i) {
      const index_t r = rows_of(i);
      v.X.push_back(block(sp.X[r], block_of(i)));
      v.Y.push_back(block(sp.Y[r], block_of(i)));
      v.y.push_back(sp.y[r]);
      v.yY.push_back(sp.yY[r]);
    }
    return v;
  }

  learn::ModelOptions model_options(std::uint64_t seed) const {
    learn::ModelOptions mo = c_.model_options;
    mo.seed = seed;
    mo.device = c_.device;
    mo.threads = c_.threads;
    for (const auto& m : c_.metrics)
      if (m == "roc_auc" || m == "pr_auc") mo.svm.probability = true;
    return mo;
  }

  std::unique_ptr<learn::Model> model(const std::string& kind, std::uint64_t seed) const {
    return learn::make_model(kind, model_options(seed));
  }

  AlignOptions align_options(const std::string& method, index_t t) const {
    AlignOptions ao;
    const MethodName name = split_method(method);
    ao.method = parse_method(name.base);
    ao.seed = derive(c_.seed, 23, static_cast<std::uint64_t>(t));
    ao.evaluate = false;
    // A variant in the name ("odc:identity", "imakura:uniform") overrides the config's factor.
    ao.rotation = parse_target_rotation(
        name.base == "odc" && !name.variant.empty() ? name.variant : c_.odc_rotation);
    ao.right = parse_right_factor(
        name.base == "imakura" && !name.variant.empty() ? name.variant : c_.imakura_right);
    ao.kawakami_form = kawakami_form_;
    if (c_.rdp_eta) ao.rdp_eta = *c_.rdp_eta;
    if (c_.gopp_tolerance) ao.gopp_tolerance = *c_.gopp_tolerance;
    return ao;
  }

  double evaluate_one(const learn::Model& h, const Matrix<double>& Y, const std::vector<double>& y,
                      const std::string& metric) const {
    return score(h, Y, y, {metric}, train_.num_classes).at(metric);
  }

  // What a DC run exchanges, counted from the arrays (doubles, q = 64): per user the uplink of
  // X~_i, A_i and y_i, the downlink of G_i; the model h is added per model kind.
  struct DcTraffic {
    double uplink = 0, downlink_G = 0;
    CommModel model;  // eq. 14's inputs, N set per model kind
  };

  void fit_and_record(index_t t, const std::string& cond, const std::string& method,
                      const Matrix<double>& X, const std::vector<double>& y,
                      const Matrix<double>& Y, const std::vector<double>& yY,
                      std::vector<Record>& out, const DcTraffic* traffic = nullptr) {
    for (const auto& kind : c_.models) {
      const auto t0 = Clock::now();
      auto h = model(kind, derive(c_.seed, 13, static_cast<std::uint64_t>(data_trial(t))));
      h->fit(X, y, static_cast<int>(train_.num_classes));
      const auto values = score(*h, Y, yY, c_.metrics, train_.num_classes);
      const double secs = since(t0);
      for (const auto& [metric, v] : values)
        out.push_back({t, cond, method, kind, metric, v, secs});
      // Parametric models only (mlp, logreg): the comparison with FedAvg's model updates.
      const double N = static_cast<double>(h->parameters().size());
      if (traffic && N > 0) {
        CommModel cm = traffic->model;
        cm.model_parameters = N;
        const double users = static_cast<double>(c_.users);
        out.push_back({t, cond, method, kind, "uplink_bytes", traffic->uplink, 0});
        out.push_back({t, cond, method, kind, "downlink_bytes",
                       traffic->downlink_G + users * N * sizeof(double), 0});
        out.push_back(
            {t, cond, method, kind, "predicted_bytes", estimate_communication(cm).dc_bytes, 0});
      }
    }
  }

  // FedAvg on the users' raw training rows, scored on the test data as Central is; one method
  // per configuration "<E>E<B>B", with its per-round curves and the bytes it exchanged.
  void fedavg(index_t t, const Split& sp, Result& res) {
    const Matrix<double> X_all = vstack(sp.X), Y_all = vstack(sp.Y);
    const std::vector<double> y_all = concat(sp.y), yY_all = concat(sp.yY);
    const int K = static_cast<int>(train_.num_classes);
    for (const auto& configuration : c_.fedavg_configurations) {
      const learn::FedAvgOptions fo = fedavg_options(configuration);
      const std::string method = "fedavg-" + configuration;
      const auto t0 = Clock::now();
      double curve_seconds = 0, downlink = 0, uplink = 0;
      const auto after_round = [&](const learn::FedAvgRound& r, const learn::Model& h) {
        const auto e0 = Clock::now();
        RoundRecord rr;
        rr.trial = t;
        rr.method = method;
        rr.round = r.round;
        rr.train_loss = r.train_loss;
        rr.train_accuracy = K > 0 ? learn::accuracy(y_all, h.predict(X_all)) : NAN;
        rr.test_value = evaluate_one(h, Y_all, yY_all, c_.metrics.front());
        rr.downlink_bytes = r.downlink_bytes;
        rr.uplink_bytes = r.uplink_bytes;
        downlink += r.downlink_bytes;
        uplink += r.uplink_bytes;
        res.rounds.push_back(rr);
        curve_seconds += since(e0);
      };
      const auto h = learn::fit_fedavg(
          sp.X, sp.y, K,
          model_options(derive(c_.seed, 13, static_cast<std::uint64_t>(data_trial(t)))), fo,
          after_round);
      const auto values = score(*h, Y_all, yY_all, c_.metrics, train_.num_classes);
      const double secs = since(t0) - curve_seconds;  // training and the final scoring
      for (const auto& [metric, v] : values)
        res.records.push_back({t, "-", method, "mlp", metric, v, secs});
      CommModel cm;
      cm.users = c_.users;
      cm.model_parameters = static_cast<double>(h->parameters().size());
      cm.bits = c_.model_options.mlp.float64 ? 64 : 32;
      cm.rounds = fo.rounds;
      cm.participation = fo.participation;
      res.records.push_back({t, "-", method, "mlp", "uplink_bytes", uplink, 0});
      res.records.push_back({t, "-", method, "mlp", "downlink_bytes", downlink, 0});
      res.records.push_back(
          {t, "-", method, "mlp", "predicted_bytes", estimate_communication(cm).fl_bytes, 0});
    }
  }

  void trial(index_t t, Result& res) {
    std::vector<Record>& out = res.records;
    Split sp = make_split(t);
    // The privacy measurements compare with the users' rows as they hold them, before "raw" noise
    // (a copy only then; otherwise sp.X stays as drawn).
    const std::vector<Matrix<double>> raw_rows =
        !c_.privacy.empty() && c_.dp_target == "raw" ? sp.X : std::vector<Matrix<double>>();
    const std::vector<Matrix<double>>& clean = raw_rows.empty() ? sp.X : raw_rows;
    // Paper 001's DP baseline: the users' training rows themselves are released with noise.
    if (c_.dp_target == "raw")
      for (index_t i = 0; i < c_.users; ++i)
        add_gaussian_noise(
            sp.X[i], dp_sigma_,
            derive(c_.seed, 43, static_cast<std::uint64_t>(data_trial(t)) * 4096 + i));
    const auto want = [&](const char* m) {
      return std::find(c_.methods.begin(), c_.methods.end(), m) != c_.methods.end();
    };
    if (want("central"))
      fit_and_record(t, "-", "central", vstack(sp.X), concat(sp.y), vstack(sp.Y), concat(sp.yY),
                     out);
    const Split mine = user_view(sp);  // what each user holds (its block, when vertical)
    if (want("local")) {
      // The whole test set as user 1 holds it (its block, when vertical).
      const bool own = c_.holder() == "own";
      const Matrix<double> first = own ? Matrix<double>() : block(vstack(sp.Y), block_of(0));
      const std::vector<double> labels = own ? std::vector<double>() : concat(sp.yY);
      local(t, mine, out, own ? nullptr : &first, own ? nullptr : &labels);
    }
    if (fedavg_) fedavg(t, sp, res);
    if (nri_) return nri_trial(t, sp, out);

    const Matrix<double> A = anchor(t);
    std::vector<Matrix<double>> anchor_blocks;  // the anchor's columns of each feature block
    for (const auto& b : blocks_) anchor_blocks.push_back(data::take_columns(A, b));
    // User 1 and the analyst hold A^+ once per trial (the anchor is the same for every condition).
    std::optional<CollusionAttacker> attacker;
    if (c_.measures("collusion")) attacker.emplace(A);
    for (SpanCondition cond : c_.conditions) {
      std::vector<User<double>> users;
      const Mixing mixing = orthonormal_mixing(cond) ? Mixing::haar : Mixing::uniform;
      // SameSpan: the span of the first user's data (of the first user of each feature block).
      std::vector<Matrix<double>> v1(vertical_ ? 2 : 1);
      if (shares_span(cond))
        for (size_t b = 0; b < v1.size(); ++b)
          v1[b] = top_right_singular_vectors(mine.X[static_cast<index_t>(b) * (c_.users / 2)], l_,
                                             c_.centered());
      std::vector<Matrix<double>> released, projected_test, anchors;
      // privacy_defence: the rows each user releases and their labels (else every row, sp.y).
      std::vector<std::vector<index_t>> kept(static_cast<size_t>(c_.users));
      std::vector<std::vector<double>> kept_labels;
      if (c_.privacy_defence) kept_labels = sp.y;
      double sigma_sum = 0;
      for (index_t i = 0; i < c_.users; ++i) {
        users.emplace_back(mine.X[i], "user " + std::to_string(i));
        const std::uint64_t s =
            derive(c_.seed, 19, static_cast<std::uint64_t>(data_trial(t)) * 4096 + i);
        if (shares_span(cond))
          users.back().choose_secret_basis_in(v1[static_cast<size_t>(std::max(block_of(i), 0))],
                                              mixing, s);
        else
          users.back().choose_secret_basis(l_, mixing, s, c_.centered());
        released.push_back(users.back().release_data());
        if (c_.privacy_defence) {  // before any noise: the user decides on its own rows
          try {
            kept[i] =
                defended_rows(mine.X[i], users.back().reveal_secret_basis(), c_.privacy_dr_epsilon);
          } catch (const InvalidInput& e) {  // a user left with no row is an error, not skipped
            key_error("privacy_defence", "= true drops every row of user " + std::to_string(i + 1) +
                                             " of " + std::to_string(c_.users) + " in trial " +
                                             std::to_string(t + 1) + ": " + e.what() +
                                             "; a smaller dim or privacy_dr_epsilon keeps rows");
          }
          released.back() = data::take_rows(released.back(), kept[i]);
          kept_labels[static_cast<size_t>(i)] =
              data::take(kept_labels[static_cast<size_t>(i)], kept[i]);
        }
        if (c_.dp_target == "released") {  // paper 000, eq. 3; the anchor stays noise-free (eq. 6)
          const double sigma = released_sigma(users.back(), cond);
          add_gaussian_noise(
              released.back(), sigma,
              derive(c_.seed, 41, static_cast<std::uint64_t>(data_trial(t)) * 4096 + i));
          sigma_sum += sigma;
        }
        anchors.push_back(users.back().release_anchor(
            vertical_ ? anchor_blocks[static_cast<size_t>(block_of(i))] : A));
        // "own": each user maps its test share (paper eq. 9); "first": user 1 holds the whole
        // test set and maps it with F_1 G_1 (its pair partner, when joined, maps its block of it).
        if (c_.holder() == "own")
          projected_test.push_back(users.back().project(mine.Y[i]));
        else if (rows_of(i) == 0)
          projected_test.push_back(users.back().project(block(vstack(sp.Y), block_of(i))));
      }
      // "vertical-joined": pair (k, k + c/2) becomes one unit of 2l columns, aligned as a user.
      if (joined_) {
        released = join_pairs(released);
        anchors = join_pairs(anchors);
        projected_test = join_pairs(projected_test);
      }
      const index_t units = static_cast<index_t>(anchors.size()), dim = joined_ ? 2 * l_ : l_;
      if (c_.dp_target == "released")
        out.push_back({t, to_string(cond), "dp", "-", "dp_sigma",
                       sigma_sum / static_cast<double>(c_.users), 0});
      if (!c_.privacy.empty()) {  // never with vertical partitions: one unit per user
        std::vector<ReleaseView> views;
        for (index_t i = 0; i < c_.users; ++i)
          views.push_back({&released[i], &anchors[i], &users[i].reveal_secret_basis(), kept[i]});
        measure_privacy(t, to_string(cond), clean, views, attacker ? &*attacker : nullptr, out);
      }
      const std::vector<std::vector<double>>& y_train = c_.privacy_defence ? kept_labels : sp.y;
      const Stack<double> stack = Stack<double>::from_matrices(anchors);
      DcTraffic traffic;
      traffic.model.users = units;
      traffic.model.samples.clear();
      for (index_t i = 0; i < units; ++i) {
        traffic.uplink += static_cast<double>(released[i].size() + anchors[i].size() +
                                              static_cast<index_t>(y_train[i].size())) *
                          sizeof(double);
        traffic.downlink_G += static_cast<double>(dim * dim) * sizeof(double);
        traffic.model.samples.push_back(static_cast<double>(released[i].rows()));
      }
      traffic.model.anchor_rows = c_.anchor_rows;
      traffic.model.features = train_.features();
      traffic.model.dim = dim;
      traffic.model.bits = 64;
      traffic.model.gamma = 0;  // the anchor is regenerated from the seed, never sent
      for (const auto& method : c_.methods) {
        if (!is_align_method(method)) continue;
        const auto al = align(stack, align_options(method, t), *backend_);
        // The analyst's step alone, from the released anchors to all G_i (no evaluation).
        if (c_.align_timing)
          out.push_back(
              {t, to_string(cond), method, "-", "align_seconds", al.report.total_seconds, 0});
        std::vector<Matrix<double>> Xh, Yh;
        for (index_t i = 0; i < units; ++i) {
          const Matrix<double> G = al.G.matrix(i);
          Xh.push_back(apply_change_of_basis(released[i], G));
          if (i < static_cast<index_t>(projected_test.size()))
            Yh.push_back(apply_change_of_basis(projected_test[i], G));
        }
        Matrix<double> X_train = vstack(Xh), X_test = vstack(Yh);
        if (c_.standardize_aligned) standardize_aligned(X_train, X_test);
        fit_and_record(t, to_string(cond), method, X_train, concat(y_train), X_test, concat(sp.yY),
                       out, fedavg_ ? &traffic : nullptr);
      }
    }
  }

  // Each user alone on its own data, evaluated on its test data: its own share ("own"), the
  // whole test set ("shared", NRI-DC), or only user 1 on the whole test set ("first"); mean over
  // the users scored. A user whose training data hold a single class cannot fit a classifier
  // and is left out.
  // `whole_Y` and `whole_y`: the whole test set as user 1 holds it, where a vertical partition
  // gives the users other features than the split's rows (default: sp's test shares stacked).
  void local(index_t t, const Split& sp, std::vector<Record>& out,
             const Matrix<double>* whole_Y = nullptr,
             const std::vector<double>* whole_y = nullptr) {
    const std::string holder = c_.holder();
    const index_t scored = holder == "first" ? 1 : c_.users;
    const Matrix<double> Y_all = holder == "own" ? Matrix<double>()
                                 : whole_Y       ? *whole_Y
                                                 : vstack(sp.Y);
    const std::vector<double> y_all = holder == "own" ? std::vector<double>()
                                      : whole_y       ? *whole_y
                                                      : concat(sp.yY);
    for (const auto& kind : c_.models) {
      const auto t0 = Clock::now();
      std::map<std::string, std::vector<double>> per_metric;
      for (index_t i = 0; i < scored; ++i) {
        if (train_.num_classes > 0) {
          const std::set<double> classes(sp.y[i].begin(), sp.y[i].end());
          if (classes.size() < 2) continue;
        }
        auto h =
            model(kind, derive(c_.seed, 29, static_cast<std::uint64_t>(data_trial(t)) * 4096 + i));
        h->fit(sp.X[i], sp.y[i], static_cast<int>(train_.num_classes));
        // A user's test share may hold a single class, where ROC-AUC and PR-AUC are undefined
        // (the metrics refuse it); such users are left out of that metric's mean.
        for (const auto& metric : c_.metrics) {
          try {
            const double v = holder == "own" ? evaluate_one(*h, sp.Y[i], sp.yY[i], metric)
                                             : evaluate_one(*h, Y_all, y_all, metric);
            if (std::isfinite(v)) per_metric[metric].push_back(v);
          } catch (const InvalidInput&) {
            if (metric != "roc_auc" && metric != "pr_auc") throw;
          }
        }
      }
      const double secs = since(t0);
      for (const auto& [metric, vals] : per_metric) {
        double mean = 0;
        for (double v : vals) mean += v;
        out.push_back(
            {t, "-", "local", kind, metric, mean / static_cast<double>(vals.size()), secs});
      }
      if (per_metric.empty() && progress_)
        progress_("local baseline skipped for " + kind + ": no user holds two classes");
    }
  }

  // NRI-DC (paper 004, Algorithm 1): every worker releases once per trial; then per method and
  // model the master returns anchor labels and every worker scores its own t_i. Recorded: the
  // metric's mean over the workers scored, and how many of them had a constant t_i. With
  // privacy, the measurements on what the workers release (before the master runs); with
  // privacy_defence, each worker drops its rows below privacy_dr_epsilon before it releases.
  void nri_trial(index_t t, const Split& sp, std::vector<Record>& out) {
    const Matrix<double> A = anchor(t);
    nri::WorkerOptions wo;
    wo.dim = l_;
    wo.delta = c_.nri_delta;
    wo.center = c_.centered();
    wo.permute = c_.nri_permute;
    wo.defence_epsilon = c_.privacy_defence ? c_.privacy_dr_epsilon : 0;
    // The workers' secrets, for the privacy measurements' evaluator alone.
    const bool measure = !c_.privacy.empty();
    std::vector<nri::Secrets> secrets(measure ? static_cast<size_t>(c_.users) : 0);
    std::vector<nri::Release> releases;
    for (index_t i = 0; i < c_.users; ++i) {
      try {
        releases.push_back(nri::worker_release(
            sp.X[i], sp.y[i], A, wo,
            derive(c_.seed, 31, static_cast<std::uint64_t>(data_trial(t)) * 4096 + i),
            measure ? &secrets[static_cast<size_t>(i)] : nullptr));
      } catch (const InvalidInput& e) {
        if (!c_.privacy_defence) throw;
        // The one input error a validated run can meet here: the defence drops every row.
        key_error("privacy_defence", "= true stops worker " + std::to_string(i + 1) + " of " +
                                         std::to_string(c_.users) + " in trial " +
                                         std::to_string(t + 1) + ": " + e.what());
      }
    }
    if (measure) {
      // Worker 1 and the master: the affine attack on the centred PCA releases (the linear one
      // when the worker does not centre).
      std::optional<CollusionAttacker> attacker;
      if (c_.measures("collusion"))
        attacker.emplace(A, wo.center ? ReleaseMap::affine : ReleaseMap::linear);
      std::vector<ReleaseView> views;
      for (index_t i = 0; i < c_.users; ++i) {
        const auto& r = releases[static_cast<size_t>(i)];
        const auto& z = secrets[static_cast<size_t>(i)];
        views.push_back({&r.data, &r.anchor, &z.basis, z.origin});
      }
      measure_privacy(t, "-", sp.X, views, attacker ? &*attacker : nullptr, out);
    }
    const std::string holder = c_.holder();
    const index_t scored = holder == "first" ? 1 : c_.users;
    const Matrix<double> Y_all = holder == "own" ? Matrix<double>() : vstack(sp.Y);
    const std::vector<double> y_all = holder == "own" ? std::vector<double>() : concat(sp.yY);
    const index_t K = train_.num_classes;
    for (const auto& method : c_.methods) {
      if (!is_align_method(method)) continue;
      for (const auto& kind : c_.models) {
        const auto t0 = Clock::now();
        nri::MasterOptions mo;
        mo.align = align_options(method, t);
        mo.model = kind;
        mo.model_options =
            model_options(derive(c_.seed, 13, static_cast<std::uint64_t>(data_trial(t))));
        mo.num_classes = K;
        AlignReport alignment;
        const auto anchor_labels = nri::master(releases, mo, *backend_, &alignment);
        std::map<std::string, std::vector<double>> per_metric;
        index_t constant = 0;
        for (index_t i = 0; i < scored; ++i) {
          const Matrix<double>& Y = holder == "own" ? sp.Y[i] : Y_all;
          const std::vector<double>& y = holder == "own" ? sp.yY[i] : y_all;
          // AUCs need every class in the test labels; a worker whose share lacks one is left out
          // of those metrics' means (only possible with test_holder = "own").
          std::vector<std::string> metrics;
          for (const auto& m : c_.metrics)
            if ((m != "roc_auc" && m != "pr_auc") || all_classes(y, K)) metrics.push_back(m);
          const auto res = nri::worker_finish(
              A, anchor_labels[static_cast<size_t>(i)], Y, y, kind,
              model_options(
                  derive(c_.seed, 37, static_cast<std::uint64_t>(data_trial(t)) * 4096 + i)),
              K, metrics);
          if (res.constant) ++constant;
          for (const auto& [m, v] : res.scores) per_metric[m].push_back(v);
        }
        const double secs = since(t0);
        for (const auto& [metric, vals] : per_metric) {
          double mean = 0;
          for (double v : vals) mean += v;
          out.push_back(
              {t, "-", method, kind, metric, mean / static_cast<double>(vals.size()), secs});
        }
        out.push_back({t, "-", method, kind, "constant_workers", static_cast<double>(constant), 0});
        // Step 9 alone, from the released anchors to all G_i (no evaluation is asked for).
        out.push_back({t, "-", method, kind, "align_seconds", alignment.total_seconds, 0});
      }
    }
  }

  // [M_1 ... M_c] -> [M_k | M_{k + c/2}] for k = 1..c/2: the pairs of "vertical-joined",
  // side by side (the same rows, each partner's columns).
  std::vector<Matrix<double>> join_pairs(const std::vector<Matrix<double>>& m) const {
    const index_t half = static_cast<index_t>(m.size()) / 2;
    std::vector<Matrix<double>> out;
    for (index_t k = 0; k < half; ++k) {
      const Matrix<double>& left = m[k];
      const Matrix<double>& right = m[k + half];
      Matrix<double> both(left.rows(), left.cols() + right.cols());
      std::copy(left.data(), left.data() + left.size(), both.data());
      std::copy(right.data(), right.data() + right.size(), both.data() + left.size());
      out.push_back(std::move(both));
    }
    return out;
  }

  const Config& c_;
  const Progress& progress_;
  data::Dataset train_, test_;
  bool split_per_trial_ = false, nri_ = false, fedavg_ = false, vertical_ = false, joined_ = false;
  std::vector<std::vector<index_t>> blocks_;  ///< the two feature blocks of a vertical partition
  KawakamiForm kawakami_form_ = KawakamiForm::qr_svd;
  index_t l_ = 0, n_test_ = 0;
  double dp_sigma_ = 0;  ///< the AGM sigma for Delta = dp_row_range
  AnchorKind anchor_kind_ = AnchorKind::uniform;
  std::string public_anchor_;   ///< the dataset of "public:<dataset>" anchors, else ""
  Matrix<double> public_pool_;  ///< its rows that are not in the task's data
  std::shared_ptr<Backend> backend_;
};
}  // namespace

namespace detail {

void prepare_point(const Config& config, const Progress& progress) {
  Runner(config, progress).prepare();
}

Result run_point(const Config& config, const Progress& progress) {
  return Runner(config, progress).run();
}

}  // namespace detail

}  // namespace dcalign::experiment
