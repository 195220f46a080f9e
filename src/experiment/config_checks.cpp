// The checks on a Config alone: the one home of the rules on its keys. load_config applies them
// to a TOML file (after the rules that only a file has: types, ranges, keys the run would not
// use) and the runner to every point it runs, so that a Config built in code meets the same
// rules. What needs another layer's table (dataset and model names, FedAvg's options) or the
// loaded dataset is checked by the runner (data_setup.cpp). Kept free of the data and learning
// layers: the fuzz target tests/fuzz/fuzz_toml compiles it with the parser.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/checked.hpp"
#include "dcalign/experiment.hpp"
#include "dcalign/options.hpp"
#include "dcalign/user.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment {
namespace {

const std::set<std::string> kProtocols = {"dc", "nri-dc"};
const std::set<std::string> kBaselines = {"central", "local"};
const std::set<std::string> kMetrics = {"accuracy", "roc_auc", "pr_auc", "rmse"};
const std::set<std::string> kPartitions = {"iid", "label-skew", "dirichlet", "vertical",
                                           "vertical-joined"};

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// The privacy measurements: known names, each once, and the defence only where "dr" gives it
// its ratios.
void check_privacy(const Config& c) {
  using detail::key_error;
  std::set<std::string> seen;
  for (const auto& p : c.privacy) {
    if (p != "collusion" && p != "dr")
      key_error(c, "privacy", "names \"" + p + "\"; expected \"collusion\" or \"dr\"");
    if (!seen.insert(p).second) key_error(c, "privacy", "names \"" + p + "\" twice");
  }
  if (c.privacy_defence && !c.measures("dr"))
    key_error(c, "privacy_defence",
              "= true needs \"dr\" in privacy (the defence drops the rows whose epsilon-DR ratio "
              "is below privacy_dr_epsilon)");
  if (c.privacy.empty()) return;
  if (c.measures("collusion") && c.users < 2)
    key_error(c, "privacy",
              "lists \"collusion\", which needs users >= 2 (user 1 attacks the others)");
  if (c.measures("dr") && !(std::isfinite(c.privacy_dr_epsilon) && c.privacy_dr_epsilon > 0 &&
                            c.privacy_dr_epsilon <= 1)) {
    std::ostringstream os;
    os << "= " << c.privacy_dr_epsilon << " must be a finite number in (0, 1]";
    key_error(c, "privacy_dr_epsilon", os.str());
  }
}

// The DP keys: the noise goes where dp_target says, with a finite positive budget.
void check_dp(const Config& c) {
  using detail::key_error;
  if (c.dp_target != "none" && c.dp_target != "released" && c.dp_target != "raw")
    key_error(c, "dp_target",
              "= \"" + c.dp_target + "\" must be \"none\", \"released\" or \"raw\"");
  if (!c.dp_enabled()) return;
  if (c.protocol == "nri-dc")
    key_error(c, "dp_target", "= \"" + c.dp_target + "\" needs protocol \"dc\"");
  const auto show = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  if (!(std::isfinite(c.dp_epsilon) && c.dp_epsilon > 0))
    key_error(c, "dp_epsilon", "= " + show(c.dp_epsilon) + " must be a finite number > 0");
  if (!(c.dp_delta > 0 && c.dp_delta < 1))
    key_error(c, "dp_delta", "= " + show(c.dp_delta) + " must be in (0, 1)");
  if (!(std::isfinite(c.dp_row_range) && c.dp_row_range > 0))
    key_error(c, "dp_row_range", "= " + show(c.dp_row_range) + " must be a finite number > 0");
}

// Users with different l_i (dim_per_user): the values, their assignment, the common dim and
// what can run with them. The bounds that need the dataset (l_i <= m) follow in the runner.
void check_user_dims(const Config& c) {
  using detail::key_error;
  if (c.dim_per_user.empty()) return;
  if (c.dim_assignment != "draw" && c.dim_assignment != "in-order")
    key_error(c, "dim_assignment",
              "= \"" + c.dim_assignment + "\" must be \"draw\" or \"in-order\"");
  const index_t lo = *std::min_element(c.dim_per_user.begin(), c.dim_per_user.end());
  if (lo < 1) key_error(c, "dim_per_user", "holds " + std::to_string(lo) + "; every l_i is >= 1");
  if (c.dim_assignment == "in-order" && static_cast<index_t>(c.dim_per_user.size()) != c.users)
    key_error(c, "dim_per_user",
              "has " + std::to_string(c.dim_per_user.size()) +
                  " values; dim_assignment = \"in-order\" needs one per user (users = " +
                  std::to_string(c.users) + ")");
  if (c.protocol != "dc")
    key_error(c, "dim_per_user", "needs protocol \"dc\" (NRI-DC's workers share one dim)");
  if (c.partition == "vertical" || c.partition == "vertical-joined")
    key_error(c, "dim_per_user",
              "cannot be used with partition = \"" + c.partition + "\" (one l per feature block)");
  if (!c.privacy.empty())
    key_error(c, "dim_per_user",
              "cannot be used with the privacy measurements, which assume one l for every user");
  if (c.uplink != "fp64")
    key_error(c, "dim_per_user",
              "cannot be used with uplink = \"" + c.uplink +
                  "\": the traffic it records follows the communication model, which has one l");
  for (const auto& m : c.methods) {
    if (!is_align_method(m)) continue;
    const std::string base = split_method(m).base;
    if (base != "imakura" && base != "kawakami")
      key_error(c, "methods",
                "names \"" + m +
                    "\", which needs one l for every user (its G_i are l x l), "
                    "but dim_per_user gives the users different l_i; with different l_i only "
                    "\"imakura\" and \"kawakami\" align (paper 002, eq. 1)");
  }
  if (c.dim < 1)
    key_error(c, "dim",
              "= " + std::to_string(c.dim) +
                  ": with dim_per_user, dim is the common dimension of the aligned space and "
                  "must be >= 1 (dim_fraction does not apply)");
  if (c.dim > c.anchor_rows)
    key_error(c, "dim",
              "= " + std::to_string(c.dim) + " exceeds anchor_rows = " +
                  std::to_string(c.anchor_rows) + " (the aligned anchor is a x dim)");
  // The users' l_i sum to at least users x the smallest value: a common dim within that is
  // always reachable by the SVD of [A_1 ... A_c], whatever the draw.
  const index_t reach = checked_mul(c.users, lo, detail::where(c) + ": users x dim_per_user");
  if (c.dim > reach)
    key_error(c, "dim",
              "= " + std::to_string(c.dim) + " exceeds users x the smallest dim_per_user value = " +
                  std::to_string(c.users) + " x " + std::to_string(lo) + " = " +
                  std::to_string(reach) + " (the sum of the l_i may be no larger)");
}

// The [fedavg] keys this layer can read: FedAvg needs protocol "dc" and well-formed, distinct
// configuration names (the learning layer checks the options they make, data_setup.cpp).
void check_fedavg(const Config& c) {
  using detail::key_error;
  if (std::find(c.methods.begin(), c.methods.end(), "fedavg") == c.methods.end()) return;
  if (c.protocol == "nri-dc")
    key_error(c, "methods", "names \"fedavg\", which needs protocol \"dc\"");
  if (c.fedavg_configurations.empty())
    key_error(c, "fedavg.configurations", "is empty; expected at least one \"<E>E<B>B\"");
  std::set<std::string> unique;
  for (const auto& name : c.fedavg_configurations) {
    try {
      (void)parse_fedavg_configuration(name);
    } catch (const InvalidInput& e) {
      key_error(c, "fedavg.configurations", std::string("is invalid: ") + e.what());
    }
    if (!unique.insert(name).second)
      key_error(c, "fedavg.configurations", "names \"" + name + "\" twice");
  }
}

}  // namespace

namespace detail {

std::string where(const Config& c) {
  return c.source.empty() ? std::string("experiment") : "experiment file '" + c.source + "'";
}

void key_error(const Config& c, const char* key, const std::string& what) {
  throw InvalidInput(where(c) + ": key '" + key + "' " + what);
}

void check_names(const Config& c, const std::vector<std::string>& given,
                 const std::set<std::string>& known, const char* what, const char* key) {
  if (given.empty()) throw InvalidInput(where(c) + ": no " + what + " given (key '" + key + "')");
  for (const auto& g : given)
    if (!known.count(g))
      throw InvalidInput(where(c) + ": unknown " + what + " '" + g + "' in key '" + key +
                         "'; expected one of: " + join(known));
}

void check_config(const Config& c) {
  // Before any work: the name becomes the output files' names (write_outputs checks again).
  if (const auto why = experiment_name_problem(c.name); !why.empty())
    key_error(c, "name",
              "= \"" + c.name + "\" " + why +
                  "; it names the output files in --out, so it must be a single plain file name "
                  "of letters, digits, '_', '-', '.' and '+', not starting with '.' or '-'");
  if (!kProtocols.count(c.protocol))
    key_error(c, "protocol", "= \"" + c.protocol + "\" must be \"dc\" or \"nri-dc\"");
  const bool nri = c.protocol == "nri-dc";
  if (c.test_split != "official" && c.test_split != "pooled")
    key_error(c, "test_split", "= \"" + c.test_split + "\" must be \"official\" or \"pooled\"");
  if (c.test_split == "pooled" && c.test_samples < 1)
    key_error(c, "test_split",
              "= \"pooled\" needs test_samples >= 1 (the rows each trial draws from the pool for "
              "its test set), got " +
                  std::to_string(c.test_samples));
  const std::string holder = c.holder();
  if (holder != "own" && holder != "first" && !(nri && holder == "shared"))
    key_error(c, "test_holder",
              "= \"" + holder + "\" must be " +
                  (nri ? "\"own\", \"first\" or \"shared\""
                       : "\"own\" or \"first\" (\"shared\" needs protocol \"nri-dc\")"));
  if (!(c.nri_delta >= 0) || !std::isfinite(c.nri_delta))
    key_error(c, "nri_delta", "= " + std::to_string(c.nri_delta) + " must be a finite number >= 0");
  try {
    (void)parse_uplink(c.uplink);
  } catch (const InvalidInput&) {
    key_error(c, "uplink",
              "= \"" + c.uplink + "\" must be \"fp64\", \"fp32\", \"fp16\" or \"int8\"");
  }
  if (c.uplink != "fp64" && nri)
    key_error(c, "uplink",
              "= \"" + c.uplink + "\" needs protocol \"dc\" (NRI-DC's releases are not quantised)");
  // The alignment options a Config holds, by the option schema (dcalign/options.hpp), under
  // their experiment-file keys.
  const std::pair<const char*, OptionValue> align_keys[] = {{"kawakami_form", c.kawakami_form},
                                                            {"odc_rotation", c.odc_rotation},
                                                            {"imakura_right", c.imakura_right},
                                                            {"device", c.device}};
  for (const auto& [key, value] : align_keys) {
    try {
      (void)check_option(*find_option(OptionEntry::toml, key), value, key);
    } catch (const InvalidInput& e) {
      throw InvalidInput(where(c) + ": " + e.what());
    }
  }
  std::set<std::string> all = align_method_names();
  all.insert(kBaselines.begin(), kBaselines.end());
  all.insert("fedavg");
  for (const auto& m : c.methods) {
    if (split_method(m).variant.empty() || is_align_method(m)) continue;
    throw InvalidInput(where(c) + ": unknown method variant '" + m +
                       "' in key 'methods'; expected odc:haar, odc:identity, imakura:identity "
                       "or imakura:uniform");
  }
  std::vector<std::string> bases;
  for (const auto& m : c.methods) bases.push_back(is_align_method(m) ? split_method(m).base : m);
  check_names(c, bases, all, "method", "methods");
  if (std::set<std::string>(c.methods.begin(), c.methods.end()).size() != c.methods.size())
    throw InvalidInput(where(c) + ": key 'methods' names a method twice");
  if (c.redraw != "all" && c.redraw != "alignment")
    key_error(c, "redraw", "= \"" + c.redraw + "\" must be \"all\" or \"alignment\"");
  check_fedavg(c);
  check_names(c, c.metrics, kMetrics, "metric", "metrics");
  if (!kPartitions.count(c.partition))
    throw InvalidInput(where(c) + ": unknown partition '" + c.partition +
                       "'; expected one of: " + join(kPartitions));
  // "public:<dataset>": anchor rows drawn from another dataset (the runner checks its name).
  if (c.anchor.rfind("public:", 0) != 0) (void)parse_anchor_kind(c.anchor);
  if (c.samples_per_user == 0 && c.partition != "label-skew")
    key_error(c, "samples_per_user", "= 0 (every row) needs partition = \"label-skew\"");
  (void)parse_device(c.device);
  if (c.trials < 1 || c.users < 1 || c.samples_per_user < 0 || c.anchor_rows < 1)
    throw InvalidInput(where(c) +
                       ": trials, users and anchor_rows must be >= 1, samples_per_user >= 0");
  // The protocol allocates users x samples_per_user training rows: a product that does not
  // even fit 64 bits is rejected here, rather than overflowing later.
  (void)checked_mul(c.users, c.samples_per_user, where(c) + ": users x samples_per_user");
  if (c.conditions.empty()) throw InvalidInput(where(c) + ": no conditions given");
  if (c.dataset.empty()) key_error(c, "dataset", "must be set to a dataset name");
  // Paper 004's data preparation keys; their comparisons with the dataset's rows (and with
  // test_samples when the test set is drawn from the pool) follow when the runner has loaded it.
  if (c.onehot != "full" && c.onehot != "drop-first")
    key_error(c, "onehot", "= \"" + c.onehot + "\" must be \"full\" or \"drop-first\"");
  if (c.heart_ca != "continuous" && c.heart_ca != "categorical")
    key_error(c, "heart_ca", "= \"" + c.heart_ca + "\" must be \"continuous\" or \"categorical\"");
  if (c.heart_ca == "categorical" && c.dataset != "heart-disease")
    key_error(
        c, "heart_ca",
        "= \"categorical\" applies to dataset \"heart-disease\" only, not \"" + c.dataset + "\"");
  if (c.subsample < 0)
    key_error(c, "subsample",
              "= " + std::to_string(c.subsample) + " must be >= 0 (0: no subsample)");
  if (c.emulate_duplicates < 0)
    key_error(c, "emulate_duplicates",
              "= " + std::to_string(c.emulate_duplicates) + " must be >= 0 (0: off)");
  if (c.subsample > 0 && c.subsample < c.users * c.samples_per_user) {
    std::ostringstream os;
    os << "= " << c.subsample
       << " is too small: expected at least users x samples_per_user = " << c.users << " x "
       << c.samples_per_user << " = " << c.users * c.samples_per_user
       << " rows (plus test_samples when the test set is drawn from the dataset), or 0 for no "
          "subsample";
    key_error(c, "subsample", os.str());
  }
  if (c.emulate_duplicates > 0 && c.subsample > c.emulate_duplicates) {
    std::ostringstream os;
    os << "= " << c.subsample << " exceeds the emulate_duplicates = " << c.emulate_duplicates
       << " rows of the pool it is drawn from";
    key_error(c, "subsample", os.str());
  }
  if (c.model_options.forest.tree_method != "exact" && c.model_options.forest.tree_method != "hist")
    key_error(c, "forest_tree_method", "must be \"exact\" or \"hist\"");
  check_dp(c);
  check_privacy(c);
  check_user_dims(c);
}

}  // namespace detail
}  // namespace dcalign::experiment
