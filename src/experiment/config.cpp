// TOML experiment files. Example (experiments/*.toml):
//   name = "mnist_table7"    dataset = "mnist"     users = 100     samples_per_user = 100
//   anchor_rows = 1000       dim = 50              trials = 10     seed = 1
//   conditions = ["SameSpan-Orth", "SameSpan", "DiffSpan-Orth", "DiffSpan"]
//   methods = ["central", "local", "imakura", "kawakami", "odc"]
//   models = ["svm", "mlp"]
#include <sys/stat.h>

#include <toml++/toml.h>
#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include "dcalign/checked.hpp"
#include "dcalign/experiment.hpp"
#include "dcalign/options.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment {
namespace {

class Reader {
 public:
  /// `prefix` leads every key in messages ("fedavg." for the keys of the [fedavg] section).
  Reader(const toml::table& t, std::string path, std::string prefix = "")
      : t_(t), path_(std::move(path)), prefix_(std::move(prefix)) {}

  /// A [section] of the file: its table, or nullptr when absent; anything else is an error.
  const toml::table* section(const char* key) {
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n) return nullptr;
    if (!n->is_table()) fail(key, "a table (a [section] of keys)");
    return n->as_table();
  }

  /// An array of tables ([[key]] in the file), or empty when absent.
  std::vector<const toml::table*> tables(const char* key) {
    seen_.insert(key);
    std::vector<const toml::table*> out;
    const toml::node* n = t_.get(key);
    if (!n) return out;
    const toml::array* arr = n->as_array();
    if (!arr) fail(key, "an array of tables ([[key]] sections)");
    for (const auto& e : *arr) {
      if (!e.is_table()) fail(key, "an array of tables ([[key]] sections)");
      out.push_back(e.as_table());
    }
    return out;
  }

  /// The keys of this table, each with its value as text: a non-empty array of integers,
  /// numbers or strings (a [sweep] section).
  std::vector<SweepAxis> value_lists() {
    std::vector<SweepAxis> out;
    for (const auto& [k, node] : t_) {
      const std::string key(k.str());
      seen_.insert(key);
      const toml::array* arr = node.as_array();
      if (!arr || arr->empty()) fail(key.c_str(), "a non-empty array of numbers or strings");
      SweepAxis axis{key, {}};
      for (const auto& e : *arr) {
        if (e.is_integer()) {
          axis.values.push_back(std::to_string(e.as_integer()->get()));
        } else if (e.is_floating_point()) {
          std::ostringstream os;
          os.precision(15);
          os << e.as_floating_point()->get();
          axis.values.push_back(os.str());
        } else if (e.is_string()) {
          axis.values.push_back(e.as_string()->get());
        } else {
          fail(key.c_str(), "a non-empty array of numbers or strings");
        }
      }
      out.push_back(std::move(axis));
    }
    return out;
  }

  /// A non-empty array of integers, each within [lo, hi].
  void integer_list(const char* key, std::vector<int>& out, int lo, int hi) {
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n) return;
    const std::string range =
        "a non-empty array of integers from " + std::to_string(lo) + " to " + std::to_string(hi);
    const toml::array* arr = n->as_array();
    if (!arr || arr->empty()) fail(key, range.c_str());
    std::vector<int> values;
    for (const auto& e : *arr) {
      if (!e.is_integer()) fail(key, range.c_str());
      const std::int64_t v = e.as_integer()->get();
      if (v < lo || v > hi)
        throw InvalidInput("experiment file '" + path_ + "': key '" + prefix_ + key + "' holds " +
                           std::to_string(v) + ", out of range: expected " + range);
      values.push_back(static_cast<int>(v));
    }
    out = values;
  }

  /// Strings and booleans. Numbers go through integer() or real(), which range-check them.
  template <typename T>
  void get(const char* key, T& out) {
    static_assert(std::is_same_v<T, std::string> || std::is_same_v<T, bool>,
                  "numeric keys must be read with integer() or real() and a range");
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n) return;
    if constexpr (std::is_same_v<T, std::string>) {
      if (!n->is_string()) fail(key, "a string");
      out = n->as_string()->get();
    } else {
      if (!n->is_boolean()) fail(key, "true or false");
      out = n->as_boolean()->get();
    }
  }

  /// A key whose default depends on other keys: left unset when the file does not have it.
  template <typename T>
  void get(const char* key, std::optional<T>& out) {
    T v{};
    get(key, v);
    if (t_.get(key)) out = v;
  }

  /// An integer key stored in T: accepted only within [lo, hi] (hi defaults to the largest
  /// value T holds), so nothing wraps or is truncated on the way in.
  template <typename T>
  void integer(const char* key, T& out, std::int64_t lo,
               std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
    if constexpr (static_cast<std::uint64_t>(std::numeric_limits<T>::max()) <
                  static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      hi = std::min<std::int64_t>(hi, static_cast<std::int64_t>(std::numeric_limits<T>::max()));
    if constexpr (std::is_signed_v<T>)
      lo = std::max<std::int64_t>(lo, static_cast<std::int64_t>(std::numeric_limits<T>::min()));
    else
      lo = std::max<std::int64_t>(lo, 0);
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n) return;
    const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    if (!n->is_integer()) fail(key, range.c_str());
    const std::int64_t v = n->as_integer()->get();
    if (v < lo || v > hi)
      throw InvalidInput("experiment file '" + path_ + "': key '" + prefix_ + key +
                         "' = " + std::to_string(v) + " is out of range: expected " + range);
    out = static_cast<T>(v);
  }

  /// A real key: finite and within its range; lo_open/hi_open exclude the bound itself.
  void real(const char* key, double& out, double lo, bool lo_open, double hi, bool hi_open) {
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n) return;
    std::ostringstream range;
    range << "a finite number in " << (lo_open ? '(' : '[') << lo << ", ";
    if (std::isinf(hi))
      range << "inf)";
    else
      range << hi << (hi_open ? ')' : ']');
    if (!n->is_number()) fail(key, range.str().c_str());
    // An integer is accepted for a real key and converted (rounded to the nearest double);
    // toml++'s value<double>() refuses integers it cannot represent exactly (found by fuzz_toml:
    // svm_C = 4611668018427387904 escaped as std::bad_optional_access).
    const double v = n->is_integer() ? static_cast<double>(n->as_integer()->get())
                                     : n->as_floating_point()->get();
    const bool ok =
        std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (!ok) {
      std::ostringstream os;
      os << "experiment file '" << path_ << "': key '" << prefix_ << key << "' = " << v
         << " is out of range: expected " << range.str();
      throw InvalidInput(os.str());
    }
    out = v;
  }

  /// An alignment option of the schema (dcalign/options.hpp), checked by its row with the
  /// message every entry point gives ("experiment file 'f': gopp_tolerance -1 is out of range:
  /// expected a finite number >= 0"); empty when the file does not have it.
  std::optional<OptionValue> option(const char* key) {
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n) return std::nullopt;
    OptionValue v;
    if (n->is_boolean())
      v = n->as_boolean()->get();
    else if (n->is_integer())
      v = n->as_integer()->get();
    else if (n->is_floating_point())
      v = n->as_floating_point()->get();
    else if (n->is_string())
      v = n->as_string()->get();
    else
      fail(key, "a number, a string or a boolean");
    try {
      return check_option(*find_option(OptionEntry::toml, key), v, prefix_ + key,
                          OptionEntry::toml);
    } catch (const InvalidInput& e) {
      throw InvalidInput("experiment file '" + path_ + "': " + e.what());
    }
  }

  /// `allow_empty`: for an optional list (privacy), where [] means none.
  void get_list(const char* key, std::vector<std::string>& out, bool allow_empty = false) {
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n) return;
    const toml::array* arr = n->as_array();
    if (!arr) fail(key, "an array of strings");
    // Every list the protocol reads is required: an empty one is an error, not the default.
    if (arr->empty() && !allow_empty) fail(key, "a non-empty array of strings");
    out.clear();
    for (const auto& e : *arr) {
      if (!e.is_string()) fail(key, "an array of strings");
      out.push_back(e.as_string()->get());
    }
  }

  void reject_unknown() const {
    for (const auto& [k, v] : t_) {
      const std::string key(k.str());
      if (!seen_.count(key))
        throw InvalidInput("experiment file '" + path_ + "': unknown key '" + prefix_ + key + "'");
    }
  }

  [[noreturn]] void fail(const char* key, const char* expected) const {
    throw InvalidInput("experiment file '" + path_ + "': key '" + prefix_ + key + "' must be " +
                       expected);
  }

 private:
  const toml::table& t_;
  std::string path_, prefix_;
  std::set<std::string> seen_;
};

}  // namespace

std::string experiment_name_problem(const std::string& name) {
  constexpr std::size_t kMaxName = 128;
  if (name.empty()) return "is empty";
  if (name.size() > kMaxName)
    return "is " + std::to_string(name.size()) + " characters long (at most " +
           std::to_string(kMaxName) + ")";
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos)
    return "contains a path separator";
  if (name.front() == '.') return "starts with '.' (a hidden file, or a path like '..')";
  if (name.front() == '-') return "starts with '-'";
  for (unsigned char ch : name)
    if (!(std::isalnum(ch) || ch == '_' || ch == '-' || ch == '.' || ch == '+'))
      return "contains the character " +
             (std::isprint(ch) ? "'" + std::string(1, static_cast<char>(ch)) + "'"
                               : "with code " + std::to_string(static_cast<int>(ch)));
  return {};
}

Config load_config(const std::string& path) {
  // Type and size first, before opening: open() of a FIFO would block, and a directory or a
  // device (/dev/zero) is no experiment file.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InvalidInput("experiment file '" + path + "': cannot open it (" + std::strerror(errno) +
                       ")");
  if (!S_ISREG(st.st_mode))
    throw InvalidInput("experiment file '" + path + "' is " +
                       (S_ISDIR(st.st_mode)    ? "a directory"
                        : S_ISFIFO(st.st_mode) ? "a FIFO"
                        : S_ISCHR(st.st_mode)  ? "a character device"
                                               : "not a regular file") +
                       "; expected a TOML file");
  constexpr long long kMaxConfigBytes = 1 << 20;
  if (st.st_size > kMaxConfigBytes)
    throw InvalidInput("experiment file '" + path + "' is " + std::to_string(st.st_size) +
                       " bytes; an experiment file is at most " + std::to_string(kMaxConfigBytes) +
                       " bytes");
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::string msg = "experiment file '" + path + "': " + std::string(e.description());
    if (e.source().begin.line > 0) msg += " (line " + std::to_string(e.source().begin.line) + ")";
    throw InvalidInput(msg);
  }
  Config c;
  c.source = path;
  Reader r(t, path);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  r.get("name", c.name);
  r.get("protocol", c.protocol);
  r.get("dataset", c.dataset);
  // Never echoed back whole: a name is short.
  if (c.dataset.size() > 128)
    r.fail("dataset", ("a dataset name of at most 128 characters (this one has " +
                       std::to_string(c.dataset.size()) + ")")
                          .c_str());
  r.get("data_dir", c.data_dir);
  r.get("verify_checksums", c.verify_checksums);
  r.get("partition", c.partition);
  r.real("dirichlet_alpha", c.dirichlet_alpha, 0, true, kInf, false);
  r.integer("users", c.users, 1);
  r.integer("samples_per_user", c.samples_per_user, 0);  // 0: every row (label-skew only)
  r.integer("test_samples", c.test_samples, 0);
  r.get("test_split", c.test_split);
  r.integer("subsample", c.subsample, 0);
  r.get("subsample_stratified", c.subsample_stratified);
  r.get("onehot", c.onehot);
  r.get("heart_ca", c.heart_ca);
  r.get("standardize", c.standardize);
  r.integer("emulate_duplicates", c.emulate_duplicates, 0);
  r.integer("anchor_rows", c.anchor_rows, 1);
  r.get("anchor", c.anchor);
  r.integer("dim", c.dim, 0);
  r.real("dim_fraction", c.dim_fraction, 0, false, 1, false);
  {
    std::vector<int> dims;
    r.integer_list("dim_per_user", dims, 1, 1 << 20);
    c.dim_per_user.assign(dims.begin(), dims.end());
  }
  r.get("dim_assignment", c.dim_assignment);
  r.get("center", c.center);
  if (auto v = r.option("odc_rotation")) c.odc_rotation = std::get<std::string>(*v);
  if (auto v = r.option("imakura_right")) c.imakura_right = std::get<std::string>(*v);
  r.get("test_holder", c.test_holder);
  r.real("nri_delta", c.nri_delta, 0, false, kInf, false);
  r.get("nri_permute", c.nri_permute);
  r.get("dp_target", c.dp_target);
  r.real("dp_epsilon", c.dp_epsilon, 0, true, kInf, false);
  r.real("dp_delta", c.dp_delta, 0, true, 1, true);
  r.real("dp_row_range", c.dp_row_range, 0, true, kInf, false);
  r.get_list("privacy", c.privacy, true);
  r.real("privacy_dr_epsilon", c.privacy_dr_epsilon, 0, true, 1, false);
  r.get("privacy_defence", c.privacy_defence);
  std::vector<std::string> conditions;
  r.get_list("conditions", conditions);
  if (t.get("conditions")) {  // present: get_list has rejected an empty list
    c.conditions.clear();
    for (const auto& s : conditions) c.conditions.push_back(parse_condition(s));
  }
  r.get_list("methods", c.methods);
  if (auto v = r.option("kawakami_form")) c.kawakami_form = std::get<std::string>(*v);
  r.get("redraw", c.redraw);
  r.get("standardize_aligned", c.standardize_aligned);
  r.get("align_timing", c.align_timing);
  r.get("uplink", c.uplink);
  if (auto v = r.option("rdp_eta")) c.rdp_eta = std::get<double>(*v);
  if (auto v = r.option("gopp_tolerance")) c.gopp_tolerance = std::get<double>(*v);
  r.get_list("models", c.models);
  r.get_list("metrics", c.metrics);
  r.integer("trials", c.trials, 1, 1000000);
  r.integer("seed", c.seed, 0);
  if (auto v = r.option("device")) c.device = std::get<std::string>(*v);
  if (auto v = r.option("threads")) c.threads = static_cast<int>(std::get<std::int64_t>(*v));
  auto& mo = c.model_options;
  r.integer("mlp_max_epochs", mo.mlp.max_epochs, 1);
  r.integer("mlp_hidden", mo.mlp.hidden_layers[0], 1);
  // Several hidden layers (paper 002's 512-128 network); mlp_hidden sets a single one.
  if (t.get("mlp_hidden") && t.get("mlp_hidden_layers"))
    r.fail("mlp_hidden_layers", "left out when mlp_hidden is given (both set the hidden layers)");
  r.integer_list("mlp_hidden_layers", mo.mlp.hidden_layers, 1, 1 << 20);
  r.integer("mlp_n_iter_no_change", mo.mlp.n_iter_no_change, 1);
  r.real("mlp_learning_rate", mo.mlp.learning_rate, 0, true, kInf, false);
  r.real("mlp_alpha", mo.mlp.alpha, 0, false, kInf, false);
  r.integer("mlp_batch_size", mo.mlp.batch_size, 1);
  r.get("mlp_early_stopping", mo.mlp.early_stopping);
  r.get("standardize_target", mo.standardize_target);
  r.real("svm_C", mo.svm.C, 0, true, kInf, false);
  r.real("svm_gamma", mo.svm.gamma, 0, true, kInf, false);  // unset: sklearn's "scale"
  r.integer("knn_k", mo.knn.k, 1);
  r.integer("forest_trees", mo.forest.n_estimators, 1);
  r.integer("forest_max_depth", mo.forest.max_depth, 0);
  r.real("forest_subsample", mo.forest.subsample, 0, true, 1, false);
  r.real("forest_max_features", mo.forest.max_features, 0, true, 1, false);
  r.get("forest_tree_method", mo.forest.tree_method);
  if (const toml::table* fed = r.section("fedavg")) {
    Reader f(*fed, path, "fedavg.");
    f.get_list("configurations", c.fedavg_configurations);
    f.integer("rounds", c.fedavg_rounds, 1, 1 << 20);
    f.real("participation", c.fedavg_participation, 0, true, 1, false);
    f.reject_unknown();
  }
  if (const toml::table* sweep = r.section("sweep")) {
    Reader f(*sweep, path, "sweep.");
    c.sweep = f.value_lists();
    if (c.sweep.empty()) r.fail("sweep", "a table with at least one key");
  }
  const auto specs = r.tables("statistics");
  for (std::size_t k = 0; k < specs.size(); ++k) {
    Reader f(*specs[k], path, "statistics[" + std::to_string(k) + "].");
    StatisticsSpec spec;
    f.get("test", spec.test);
    f.get("a", spec.a);
    f.get("b", spec.b);
    f.get("alternative", spec.alternative);
    f.get_list("factors", spec.factors);
    f.get("sum_of_squares", spec.sum_of_squares);
    f.reject_unknown();
    c.statistics.push_back(std::move(spec));
  }
  r.reject_unknown();
  // The sweep's values and the tests' names, methods and factors, before any work.
  try {
    (void)sweep_points(c);
    (void)run_statistics(c, {});
  } catch (const InvalidInput& e) {
    throw InvalidInput("experiment file '" + path + "': " + e.what());
  }
  // The rules on the values, shared with a Config built in code; then those that only a file
  // has: keys it sets that the run would not use.
  detail::check_config(c);
  const bool fedavg = std::find(c.methods.begin(), c.methods.end(), "fedavg") != c.methods.end();
  if (t.get("fedavg") && !fedavg)
    r.fail("fedavg", "left out unless \"fedavg\" is in methods (the section would do nothing)");
  // NRI-DC has no secret-basis conditions (each worker's basis is its own PCA); a file that
  // sets them expects something the protocol does not do.
  if (c.protocol == "nri-dc" && t.get("conditions"))
    r.fail("conditions", "left out for protocol = \"nri-dc\" (every worker uses its own PCA)");
  // The one rule for keys (as for the command line's options): a key the run would not use is
  // an error, never silently ignored. `unless` says what would use it.
  const auto refuse_unused = [&](const char* key, bool used, const std::string& unless) {
    if (!used && t.get(key)) r.fail(key, ("left out unless " + unless).c_str());
  };
  const auto lists = [](const std::vector<std::string>& names, const std::string& name) {
    for (const auto& n : names)
      if (n.substr(0, n.find(':')) == name) return true;
    return false;
  };
  const auto method = [&](const char* name) { return lists(c.methods, name); };
  const auto model = [&](const char* name) { return lists(c.models, name); };
  for (const char* key : {"dp_epsilon", "dp_delta", "dp_row_range"})
    refuse_unused(key, c.dp_enabled(), "dp_target is \"released\" or \"raw\"");
  // The alignment options a file may set: used where methods lists a method of the option's
  // schema row (dcalign/options.hpp).
  for (const auto& o : option_schema()) {
    if (o.toml.empty() || o.methods.empty()) continue;
    bool used = false;
    std::string unless = "methods lists ";
    for (std::size_t k = 0; k < o.methods.size(); ++k) {
      used = used || method(to_string(o.methods[k]).c_str());
      unless += (k ? " or \"" : "\"") + to_string(o.methods[k]) + "\"";
    }
    refuse_unused(o.toml.c_str(), used, unless);
  }
  refuse_unused("dim_assignment", !c.dim_per_user.empty(), "dim_per_user is given");
  for (const char* key : {"svm_C", "svm_gamma"})
    refuse_unused(key, model("svm"), "models lists \"svm\"");
  for (const char* key :
       {"mlp_max_epochs", "mlp_hidden", "mlp_hidden_layers", "mlp_n_iter_no_change",
        "mlp_learning_rate", "mlp_alpha", "mlp_batch_size", "mlp_early_stopping"})
    refuse_unused(key, model("mlp") || method("fedavg"),
                  "models lists \"mlp\" or methods lists \"fedavg\"");
  refuse_unused("knn_k", model("knn"), "models lists \"knn\"");
  for (const char* key : {"forest_trees", "forest_max_depth", "forest_subsample",
                          "forest_max_features", "forest_tree_method"})
    refuse_unused(key, model("forest"), "models lists \"forest\"");
  for (const char* key : {"nri_delta", "nri_permute"})
    refuse_unused(key, c.protocol == "nri-dc", "protocol = \"nri-dc\"");
  refuse_unused("dirichlet_alpha", c.partition == "dirichlet", "partition = \"dirichlet\"");
  if (t.get("privacy_dr_epsilon") && !c.measures("dr"))
    r.fail("privacy_dr_epsilon", "left out unless privacy lists \"dr\"");
  return c;
}

}  // namespace dcalign::experiment
