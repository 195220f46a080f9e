// An experiment's checkpoint (experiment/checkpoint.hpp).
#include "experiment/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dcalign/error.hpp"
#include "experiment/common.hpp"
#include "io/model_directory.hpp"
#include "io/staged_outputs.hpp"

namespace dcalign::experiment::detail {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* kManifest = "manifest.json";
constexpr int kFormatVersion = 1;

// A double as JSON: a number (17 significant digits, exact), or a string for NaN and the
// infinities, which JSON has no number for.
Json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double number(const Json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "nan") return NAN;
  if (s == "inf") return INFINITY;
  if (s == "-inf") return -INFINITY;
  throw InvalidInput("'" + s + "' is not a number");
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// FNV-1a of a short text (the manifest): the fingerprint each trial file carries.
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ULL;
  return h;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError("cannot read '" + path + "' (" + std::strerror(errno) + ")");
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

// `text` at `path`, atomically: a temporary beside it, flushed, renamed over it, and the
// directory flushed, so that a kill at any moment leaves the old file or the new one.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) throw IoError("cannot write '" + tmp + "' (" + std::strerror(errno) + ")");
  }
  io::fsync_path(tmp, false);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw IoError("cannot rename '" + tmp + "' to '" + path + "' (" + why + ")");
  }
  io::fsync_path(fs::path(path).parent_path(), true);
}

// The first key whose value differs between two JSON objects, as "key: was A, now B".
std::string first_difference(const Json& was, const Json& now, const std::string& prefix = "") {
  for (auto it = now.begin(); it != now.end(); ++it) {
    const std::string key = prefix + it.key();
    if (!was.contains(it.key())) return key + ": not in the checkpoint's run, now " + it->dump();
    const Json& old = was.at(it.key());
    if (old == *it) continue;
    if (old.is_object() && it->is_object()) return first_difference(old, *it, key + ".");
    return key + ": was " + old.dump() + ", now " + it->dump();
  }
  for (auto it = was.begin(); it != was.end(); ++it)
    if (!now.contains(it.key()))
      return prefix + it.key() + ": was " + it->dump() + ", not in this run";
  return "";
}

// The model options a config key can set (config.cpp), beside config_json's.
Json model_json(const learn::ModelOptions& m) {
  return {{"mlp",
           {{"hidden_layers", m.mlp.hidden_layers},
            {"learning_rate", m.mlp.learning_rate},
            {"alpha", m.mlp.alpha},
            {"batch_size", m.mlp.batch_size},
            {"max_epochs", m.mlp.max_epochs},
            {"early_stopping", m.mlp.early_stopping},
            {"n_iter_no_change", m.mlp.n_iter_no_change},
            {"float64", m.mlp.float64}}},
          {"svm", {{"C", m.svm.C}, {"gamma", m.svm.gamma}}},
          {"knn", {{"k", m.knn.k}}},
          {"forest",
           {{"n_estimators", m.forest.n_estimators},
            {"max_depth", m.forest.max_depth},
            {"subsample", m.forest.subsample},
            {"max_features", m.forest.max_features},
            {"tree_method", m.forest.tree_method}}},
          {"standardize_target", m.standardize_target}};
}

}  // namespace

std::string config_fingerprint_json(const Config& c) {
  Json j = Json::parse(config_json(c));
  j.erase("trials");  // a resumed run may ask for more
  j["name"] = c.name;
  j["seed"] = c.seed;
  j["model_options"] = model_json(c.model_options);
  j["fedavg"] = {{"configurations", c.fedavg_configurations},
                 {"rounds", c.fedavg_rounds},
                 {"participation", c.fedavg_participation}};
  Json sweep = Json::object();
  for (const auto& axis : c.sweep) sweep[axis.key] = axis.values;
  j["sweep"] = sweep;
  j["dirichlet_alpha"] = c.dirichlet_alpha;
  j["nri_delta"] = c.nri_delta;
  j["nri_permute"] = c.nri_permute;
  return j.dump();
}

std::string unit_json(const UnitResult& u, const std::string& fingerprint) {
  Json j;
  j["format_version"] = kFormatVersion;
  j["fingerprint"] = fingerprint;
  j["point"] = u.point;
  j["trial"] = u.trial;
  Json recs = Json::array();
  for (const auto& r : u.records)
    recs.push_back({r.condition, r.method, r.model, r.metric, number(r.value), number(r.seconds)});
  j["records"] = recs;
  Json rounds = Json::array();
  for (const auto& r : u.rounds)
    rounds.push_back({r.method, r.round, number(r.train_loss), number(r.train_accuracy),
                      number(r.test_value), number(r.downlink_bytes), number(r.uplink_bytes)});
  j["rounds"] = rounds;
  return j.dump() + "\n";
}

UnitResult parse_unit(const std::string& text, const std::string& fingerprint,
                      const std::string& where) {
  try {
    const Json j = Json::parse(text);
    if (j.at("format_version").get<int>() != kFormatVersion || j.at("fingerprint") != fingerprint)
      throw InvalidInput("it belongs to another run");
    UnitResult u;
    u.point = j.at("point").get<std::size_t>();
    u.trial = j.at("trial").get<index_t>();
    for (const auto& r : j.at("records"))
      u.records.push_back({u.trial, r.at(0).get<std::string>(), r.at(1).get<std::string>(),
                           r.at(2).get<std::string>(), r.at(3).get<std::string>(), number(r.at(4)),
                           number(r.at(5)), ""});
    for (const auto& r : j.at("rounds")) {
      RoundRecord rr;
      rr.trial = u.trial;
      rr.method = r.at(0).get<std::string>();
      rr.round = r.at(1).get<int>();
      rr.train_loss = number(r.at(2));
      rr.train_accuracy = number(r.at(3));
      rr.test_value = number(r.at(4));
      rr.downlink_bytes = number(r.at(5));
      rr.uplink_bytes = number(r.at(6));
      u.rounds.push_back(rr);
    }
    return u;
  } catch (const InvalidInput& e) {
    throw InvalidInput(where + ": " + e.what());
  } catch (const std::exception& e) {
    throw InvalidInput(where + ": not a trial file of dcalign's checkpoint (" + e.what() + ")");
  }
}

Checkpoint::Checkpoint(std::string dir, const Config& config, std::vector<std::uint64_t> data)
    : dir_(std::move(dir)), data_(std::move(data)) {
  Json m;
  m["format"] = "dcalign-experiment-checkpoint";
  m["format_version"] = kFormatVersion;
  m["build"] = std::string("dcalign ") + io::version_string() + ", " + __VERSION__;
  m["config"] = Json::parse(config_fingerprint_json(config));
  Json data_json = Json::object();
  const auto points = sweep_points(config);
  for (std::size_t k = 0; k < data_.size() && k < points.size(); ++k)
    data_json[points[k].first.empty() ? "-" : points[k].first] = hex(data_[k]);
  m["data"] = data_json;
  manifest_ = m.dump();
  fingerprint_ = hex(fnv1a(manifest_));
}

std::string Checkpoint::unit_path(std::size_t point, index_t trial) const {
  return (fs::path(dir_) /
          ("point" + std::to_string(point + 1) + "-trial" + std::to_string(trial + 1) + ".json"))
      .string();
}

std::string Checkpoint::manifest_text() const {
  Json m = Json::parse(manifest_);
  m["fingerprint"] = fingerprint_;
  return m.dump(2) + "\n";
}

std::vector<std::string> Checkpoint::unit_files() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("point", 0) == 0 && it->path().extension() == ".json")
      out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<UnitResult> Checkpoint::load() const {
  std::vector<UnitResult> done;
  const fs::path manifest = fs::path(dir_) / kManifest;
  std::error_code ec;
  if (!fs::exists(manifest, ec)) {
    if (!unit_files().empty())
      throw InvalidInput("--resume: '" + dir_ + "' holds trial files but no " + kManifest +
                         "; expected a checkpoint written by dcalign experiment");
    return done;
  }
  Json was;
  try {
    was = Json::parse(read_text(manifest.string()));
  } catch (const nlohmann::json::exception& e) {
    throw InvalidInput("--resume: '" + manifest.string() + "' is not a checkpoint manifest (" +
                       e.what() + ")");
  }
  const Json now = Json::parse(manifest_);
  const auto refuse = [&](const std::string& what) {
    throw InvalidInput("--resume: the checkpoint in '" + dir_ +
                       "' is of another run; it differs in " + what +
                       " (run without --resume and with --restart to discard it)");
  };
  if (was.value("format_version", 0) != kFormatVersion)
    refuse("its format version " + was.value("format_version", Json(0)).dump());
  if (was.value("build", Json()) != now.at("build"))
    refuse("the build: was " + was.value("build", Json()).dump() + ", now " +
           now.at("build").dump());
  if (const auto d = first_difference(was.value("config", Json::object()), now.at("config"));
      !d.empty())
    refuse("the config key " + d);
  if (const auto d = first_difference(was.value("data", Json::object()), now.at("data"));
      !d.empty())
    refuse("the data of point " + d);
  for (const auto& path : unit_files())
    done.push_back(parse_unit(read_text(path), fingerprint_, path));
  return done;
}

void Checkpoint::start(bool discard) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw IoError("cannot create the checkpoint directory '" + dir_ + "' (" + ec.message() + ")");
  const auto files = unit_files();
  if (!files.empty() && !discard)
    throw InvalidInput("'" + dir_ + "' holds " + std::to_string(files.size()) +
                       " finished trial(s) of an interrupted run; --resume continues it, "
                       "--restart discards them");
  for (const auto& f : files) fs::remove(f, ec);
  write_manifest();
}

void Checkpoint::write_manifest() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  write_atomically((fs::path(dir_) / kManifest).string(), manifest_text());
}

void Checkpoint::save(const UnitResult& u) const {
  write_atomically(unit_path(u.point, u.trial), unit_json(u, fingerprint_));
}

}  // namespace dcalign::experiment::detail

namespace dcalign::experiment {

std::string checkpoint_directory(const std::string& out, const std::string& name) {
  return (std::filesystem::path(out) / (name + ".trials")).string();
}

void remove_checkpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("point", 0) == 0 || name.rfind("manifest.json", 0) == 0)
      fs::remove(it->path(), ec);
  }
  fs::remove(dir, ec);  // only when nothing else is left there
}

}  // namespace dcalign::experiment
