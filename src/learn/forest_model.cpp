// A saved forest's booster, XGBoost's own JSON model, checked before XGBoost reads it. XGBoost's
// readers trust their input (a truncated UBJSON model crashes XGBoost 1.7), so load_model never
// hands them the file: the JSON is parsed here (nlohmann, bounded depth), every value that the
// loader and the predictor index with is checked (tree shapes, child and feature indices, tree
// groups, the objective), and XGBoost gets a copy of the checked keys only, written by nlohmann.
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "learn/model_io.hpp"

namespace dcalign::learn::detail {
namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

const Json& member(const Json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object()) bad("'" + where + "' is not a JSON object");
  const auto it = obj.find(key);
  if (it == obj.end()) bad("'" + where + "' has no '" + key + "'");
  return *it;
}

// XGBoost writes its parameters as decimal strings ("num_nodes": "7").
std::int64_t int_string(const Json& obj, const std::string& key, const std::string& where) {
  const Json& v = member(obj, key, where);
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos)
    bad("'" + where + "." + key + "' is " + v.dump() + "; expected a count as a decimal string");
  return std::stoll(s);
}

const Json& array_of(const Json& obj, const std::string& key, const std::string& where,
                     std::size_t size) {
  const Json& a = member(obj, key, where);
  if (!a.is_array() || a.size() != size)
    bad("'" + where + "." + key + "' is not a list of " + std::to_string(size) + " values");
  return a;
}

std::int64_t integer_at(const Json& a, std::size_t i, const std::string& what, std::int64_t lo,
                        std::int64_t hi) {
  const Json& v = a[i];
  if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
    bad("'" + what + "[" + std::to_string(i) + "]' is " + v.dump() + "; expected an integer in " +
        std::to_string(lo) + ".." + std::to_string(hi));
  return v.get<std::int64_t>();
}

// A copy of the string values of a flat object (an objective's parameters).
Json strings_of(const Json& obj, const std::string& where) {
  Json out = Json::object();
  if (!obj.is_object()) bad("'" + where + "' is not a JSON object");
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it.value().is_string())
      out[it.key()] = it.value();
    else if (it.value().is_object())
      out[it.key()] = strings_of(it.value(), where + "." + it.key());
    else
      bad("'" + where + "." + it.key() + "' is " + it.value().dump() + "; expected a string");
  }
  return out;
}

// One tree: its arrays of num_nodes entries, children after their parent (so that every path
// from the root ends), features below `features`, numerical splits only.
Json checked_tree(const Json& tree, std::int64_t id, std::int64_t features, const std::string& w) {
  const std::int64_t n = int_string(member(tree, "tree_param", w), "num_nodes", w + ".tree_param");
  if (n < 1) bad("'" + w + ".tree_param.num_nodes' is 0; expected at least the root");
  if (int_string(tree["tree_param"], "num_deleted", w + ".tree_param") != 0 ||
      int_string(tree["tree_param"], "size_leaf_vector", w + ".tree_param") != 0)
    bad("'" + w + ".tree_param' has deleted nodes or leaf vectors, which a forest has none of");
  const auto size = static_cast<std::size_t>(n);
  const Json& left = array_of(tree, "left_children", w, size);
  const Json& right = array_of(tree, "right_children", w, size);
  const Json& parents = array_of(tree, "parents", w, size);
  const Json& split = array_of(tree, "split_indices", w, size);
  const Json& type = array_of(tree, "split_type", w, size);
  const Json& dleft = array_of(tree, "default_left", w, size);
  std::vector<bool> has_parent(size, false);
  for (std::size_t i = 0; i < size; ++i) {
    const std::int64_t l = integer_at(left, i, w + ".left_children", -1, n - 1);
    const std::int64_t r = integer_at(right, i, w + ".right_children", -1, n - 1);
    integer_at(type, i, w + ".split_type", 0, 0);
    integer_at(dleft, i, w + ".default_left", 0, 1);
    integer_at(split, i, w + ".split_indices", 0, INT32_MAX);
    integer_at(parents, i, w + ".parents", 0, INT32_MAX);
    if (l == -1 && r == -1) continue;  // a leaf: split_conditions[i] is its value
    const auto li = static_cast<std::size_t>(l), ri = static_cast<std::size_t>(r);
    if (l <= static_cast<std::int64_t>(i) || r <= static_cast<std::int64_t>(i) || l == r ||
        has_parent[li] || has_parent[ri])
      bad("'" + w + "' node " + std::to_string(i) + " has the children " + std::to_string(l) +
          " and " + std::to_string(r) + "; expected two new nodes after it");
    has_parent[li] = has_parent[ri] = true;
    integer_at(split, i, w + ".split_indices", 0, features - 1);
    if (integer_at(parents, li, w + ".parents", 0, n - 1) != static_cast<std::int64_t>(i) ||
        integer_at(parents, ri, w + ".parents", 0, n - 1) != static_cast<std::int64_t>(i))
      bad("'" + w + ".parents' disagrees with the children of node " + std::to_string(i));
  }
  Json out = Json::object();
  for (const char* key : {"base_weights", "loss_changes", "split_conditions", "sum_hessian"}) {
    const Json& a = array_of(tree, key, w, size);
    for (const Json& v : a)
      if (!v.is_number()) bad("'" + w + "." + key + "' holds " + v.dump() + "; expected numbers");
    out[key] = a;
  }
  for (const char* key :
       {"categories", "categories_nodes", "categories_segments", "categories_sizes"}) {
    const auto it = tree.find(key);
    if (it != tree.end() && !(it->is_array() && it->empty()))
      bad("'" + w + "." + key + "' is not empty; a forest has no categorical splits");
    out[key] = Json::array();
  }
  out["default_left"] = dleft;
  out["id"] = id;
  out["left_children"] = left;
  out["parents"] = parents;
  out["right_children"] = right;
  out["split_indices"] = split;
  out["split_type"] = type;
  out["tree_param"] = {{"num_deleted", "0"},
                       {"num_feature", std::to_string(features)},
                       {"num_nodes", std::to_string(n)},
                       {"size_leaf_vector", "0"}};
  return out;
}

}  // namespace

std::string checked_xgboost_model(const std::string& text, index_t features, int num_classes,
                                  const std::string& objective) {
  constexpr int kMaxDepth = 16;  // the model nests 7 deep; XGBoost's reader recurses
  Json j;
  try {
    j = Json::parse(text, [](int depth, Json::parse_event_t, Json&) {
      if (depth > kMaxDepth) throw std::invalid_argument("nests deeper than a model");
      return true;
    });
  } catch (const Json::exception& e) {
    bad(std::string("is not valid JSON: ") + e.what());
  }
  const Json& learner = member(j, "learner", "");
  const Json& booster = member(learner, "gradient_booster", "learner");
  if (member(booster, "name", "learner.gradient_booster") != "gbtree")
    bad("'learner.gradient_booster.name' is not \"gbtree\"");
  const Json& param = member(learner, "learner_model_param", "learner");
  const std::string lw = "learner.learner_model_param";
  const std::int64_t groups = num_classes > 2 ? num_classes : 1;
  if (int_string(param, "num_feature", lw) != features ||
      int_string(param, "num_class", lw) != (num_classes > 2 ? num_classes : 0) ||
      int_string(param, "num_target", lw) != 1)
    bad("'" + lw + "' has num_feature " + param["num_feature"].dump() + " and num_class " +
        param["num_class"].dump() + "; expected " + std::to_string(features) + " and " +
        std::to_string(num_classes > 2 ? num_classes : 0));
  const Json& base = member(param, "base_score", lw);
  if (!base.is_string() || base.get<std::string>().size() > 40)
    bad("'" + lw + ".base_score' is bad");
  const Json& obj = member(learner, "objective", "learner");
  if (member(obj, "name", "learner.objective") != objective)
    bad("has the objective " + obj["name"].dump() + "; a forest of " + std::to_string(num_classes) +
        " classes has \"" + objective + "\"");

  const Json& model = member(booster, "model", "learner.gradient_booster");
  const std::string mw = "learner.gradient_booster.model";
  const Json& trees = member(model, "trees", mw);
  if (!trees.is_array() || trees.empty()) bad("'" + mw + ".trees' is not a list of trees");
  const std::int64_t count = static_cast<std::int64_t>(trees.size());
  const Json& mp = member(model, "gbtree_model_param", mw);
  const std::int64_t parallel = int_string(mp, "num_parallel_tree", mw + ".gbtree_model_param");
  if (int_string(mp, "num_trees", mw + ".gbtree_model_param") != count || parallel < 1 ||
      parallel * groups != count || int_string(mp, "size_leaf_vector", mw) != 0)
    bad("'" + mw + ".gbtree_model_param' disagrees with its " + std::to_string(count) +
        " trees of " + std::to_string(groups) + " group(s)");
  // One round: num_parallel_tree trees per class, class by class.
  const Json& info = array_of(model, "tree_info", mw, trees.size());
  for (std::size_t t = 0; t < trees.size(); ++t) {
    const std::int64_t g = static_cast<std::int64_t>(t) / parallel;
    integer_at(info, t, mw + ".tree_info", g, g);
  }
  Json clean_trees = Json::array();
  for (std::size_t t = 0; t < trees.size(); ++t)
    clean_trees.push_back(checked_tree(trees[t], static_cast<std::int64_t>(t), features,
                                       mw + ".trees[" + std::to_string(t) + "]"));

  Json out;
  out["learner"]["attributes"] = Json::object();
  out["learner"]["feature_names"] = Json::array();
  out["learner"]["feature_types"] = Json::array();
  out["learner"]["gradient_booster"]["model"] = {{"gbtree_model_param",
                                                  {{"num_parallel_tree", std::to_string(parallel)},
                                                   {"num_trees", std::to_string(count)},
                                                   {"size_leaf_vector", "0"}}},
                                                 {"tree_info", info},
                                                 {"trees", std::move(clean_trees)}};
  out["learner"]["gradient_booster"]["name"] = "gbtree";
  const std::int64_t average = int_string(param, "boost_from_average", lw);
  if (average > 1) bad("'" + lw + ".boost_from_average' is not \"0\" or \"1\"");
  out["learner"]["learner_model_param"] = {{"base_score", base},
                                           {"boost_from_average", std::to_string(average)},
                                           {"num_class", param["num_class"]},
                                           {"num_feature", std::to_string(features)},
                                           {"num_target", "1"}};
  out["learner"]["objective"] = strings_of(obj, "learner.objective");
  const Json& version = member(j, "version", "");
  if (!version.is_array() || version.size() != 3) bad("'version' is not [major, minor, patch]");
  for (std::size_t i = 0; i < 3; ++i) integer_at(version, i, "version", 0, 1000);
  out["version"] = version;
  return out.dump();
}

}  // namespace dcalign::learn::detail
