// TOML experiment files. Example (experiments/*.toml):
//   name = "mnist_table7"    dataset = "mnist"     users = 100     samples_per_user = 100
//   anchor_rows = 1000       dim = 50              trials = 10     seed = 1
//   conditions = ["SameSpan-Orth", "SameSpan", "DiffSpan-Orth", "DiffSpan"]
//   methods = ["central", "local", "imakura", "kawakami", "odc"]
//   models = ["svm", "mlp"]
#include <toml++/toml.h>

#include <set>

#include "dcalign/experiment.hpp"

namespace dcalign::experiment {
namespace {

class Reader {
 public:
  Reader(const toml::table& t, std::string path) : t_(t), path_(std::move(path)) {}

  template <typename T>
  void get(const char* key, T& out) {
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n) return;
    if constexpr (std::is_same_v<T, std::string>) {
      if (!n->is_string()) fail(key, "a string");
      out = n->value<std::string>().value();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!n->is_boolean()) fail(key, "true or false");
      out = n->value<bool>().value();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!n->is_number()) fail(key, "a number");
      out = static_cast<T>(n->value<double>().value());
    } else {
      if (!n->is_integer()) fail(key, "an integer");
      const auto v = n->value<std::int64_t>().value();
      if constexpr (std::is_unsigned_v<T>) {
        if (v < 0) fail(key, "a non-negative integer");
      }
      out = static_cast<T>(v);
    }
  }

  void get_list(const char* key, std::vector<std::string>& out) {
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n) return;
    const toml::array* arr = n->as_array();
    if (!arr) fail(key, "an array of strings");
    out.clear();
    for (const auto& e : *arr) {
      if (!e.is_string()) fail(key, "an array of strings");
      out.push_back(e.value<std::string>().value());
    }
  }

  void reject_unknown() const {
    for (const auto& [k, v] : t_) {
      const std::string key(k.str());
      if (!seen_.count(key))
        throw InvalidInput("experiment file '" + path_ + "': unknown key '" + key + "'");
    }
  }

  [[noreturn]] void fail(const char* key, const char* expected) const {
    throw InvalidInput("experiment file '" + path_ + "': key '" + key + "' must be " + expected);
  }

 private:
  const toml::table& t_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace

Config load_config(const std::string& path) {
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
  r.get("name", c.name);
  r.get("dataset", c.dataset);
  r.get("data_dir", c.data_dir);
  r.get("verify_checksums", c.verify_checksums);
  r.get("partition", c.partition);
  r.get("dirichlet_alpha", c.dirichlet_alpha);
  r.get("users", c.users);
  r.get("samples_per_user", c.samples_per_user);
  r.get("test_samples", c.test_samples);
  r.get("anchor_rows", c.anchor_rows);
  r.get("anchor", c.anchor);
  r.get("dim", c.dim);
  r.get("dim_fraction", c.dim_fraction);
  r.get("center", c.center);
  r.get("odc_rotation", c.odc_rotation);
  r.get("imakura_right", c.imakura_right);
  r.get("test_holder", c.test_holder);
  std::vector<std::string> conditions;
  r.get_list("conditions", conditions);
  if (!conditions.empty()) {
    c.conditions.clear();
    for (const auto& s : conditions) c.conditions.push_back(parse_condition(s));
  }
  r.get_list("methods", c.methods);
  r.get_list("models", c.models);
  r.get_list("metrics", c.metrics);
  r.get("trials", c.trials);
  r.get("seed", c.seed);
  r.get("device", c.device);
  r.get("threads", c.threads);
  auto& mo = c.model_options;
  r.get("mlp_max_epochs", mo.mlp.max_epochs);
  r.get("mlp_hidden", mo.mlp.hidden_layers[0]);
  r.get("mlp_learning_rate", mo.mlp.learning_rate);
  r.get("mlp_alpha", mo.mlp.alpha);
  r.get("mlp_batch_size", mo.mlp.batch_size);
  r.get("svm_C", mo.svm.C);
  r.get("knn_k", mo.knn.k);
  r.reject_unknown();
  if (c.dataset.empty()) r.fail("dataset", "set to a dataset name");
  if (c.odc_rotation != "haar" && c.odc_rotation != "identity")
    r.fail("odc_rotation", "\"haar\" or \"identity\"");
  if (c.imakura_right != "identity" && c.imakura_right != "uniform")
    r.fail("imakura_right", "\"identity\" or \"uniform\"");
  if (c.test_holder != "own" && c.test_holder != "first")
    r.fail("test_holder", "\"own\" or \"first\"");
  return c;
}

}  // namespace dcalign::experiment
