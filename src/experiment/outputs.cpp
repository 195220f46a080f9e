// The output files of an experiment: JSON (config, machine, records), CSV (records) and the
// Markdown summary (summary.cpp), written atomically.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dcalign/align.hpp"
#include "dcalign/experiment.hpp"
#include "dcalign/privacy.hpp"
#include "experiment/common.hpp"
#include "io/staged_outputs.hpp"

namespace dcalign::experiment {
namespace {

// The [fedavg] settings in the JSON's config.
void cfg_fedavg(nlohmann::ordered_json& cfg, const Config& c) {
  cfg["fedavg"] = {{"configurations", c.fedavg_configurations},
                   {"rounds", c.fedavg_rounds},
                   {"participation", c.fedavg_participation}};
}

// The document indented by 2, except that each element of its long arrays (records,
// statistics, rounds) takes one line: the same JSON, about a sixth smaller than fully indented
// and still one line per record in a diff (the committed results count against what travels
// to the GPU machine).
std::string dump_with_rows(const nlohmann::ordered_json& j) {
  nlohmann::ordered_json outline = j;
  const char* rows[] = {"records", "statistics", "rounds"};
  std::vector<std::pair<std::string, std::string>> replaced;
  for (const char* key : rows) {
    auto it = outline.find(key);
    if (it == outline.end() || !it->is_array() || it->empty()) continue;
    std::string text = "[\n";
    for (size_t k = 0; k < it->size(); ++k)
      text += "    " + (*it)[k].dump() + (k + 1 < it->size() ? ",\n" : "\n");
    text += "  ]";
    const std::string marker = std::string("@@dcalign-rows-") + key + "@@";
    *it = marker;
    replaced.emplace_back("\"" + marker + "\"", text);
  }
  std::string out = outline.dump(2);
  for (const auto& [marker, text] : replaced) out.replace(out.find(marker), marker.size(), text);
  return out + "\n";
}

}  // namespace

// Writable: a probe file is created and removed.
void check_output_directory(const std::string& dir, const std::string& name,
                            const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw IoError(what + " '" + dir + "': cannot create the results directory (" + ec.message() +
                  ")");
  if (!fs::is_directory(dir, ec))
    throw IoError(what + " '" + dir + "' is not a directory; expected a directory for the results");
  const std::string probe =
      (fs::path(dir) / (".dcalign-probe.tmp." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw IoError(what + " '" + dir + "': cannot write the results there (" + std::strerror(errno) +
                  "); checked before the first trial");
  ::close(fd);
  ::unlink(probe.c_str());
  for (const char* ext : {".json", ".csv", ".md"})
    io::check_replaceable_file((fs::path(dir) / (name + ext)).string(), "experiment output");
}

namespace detail {
std::string config_json(const Config& c) {
  nlohmann::ordered_json cfg;
  cfg["protocol"] = c.protocol;
  cfg["dataset"] = c.dataset;
  cfg["partition"] = c.partition;
  cfg["users"] = c.users;
  cfg["samples_per_user"] = c.samples_per_user;
  cfg["test_samples"] = c.test_samples;
  cfg["subsample"] = c.subsample;
  cfg["subsample_stratified"] = c.subsample_stratified;
  cfg["onehot"] = c.onehot;
  cfg["heart_ca"] = c.heart_ca;
  cfg["standardize"] = c.standardize;
  cfg["standardize_target"] = c.model_options.standardize_target;
  cfg["emulate_duplicates"] = c.emulate_duplicates;
  cfg["anchor_rows"] = c.anchor_rows;
  cfg["anchor"] = c.anchor;
  cfg["dim"] = c.dim;
  cfg["dim_fraction"] = c.dim_fraction;
  if (!c.dim_per_user.empty()) {
    cfg["dim_per_user"] = c.dim_per_user;
    cfg["dim_assignment"] = c.dim_assignment;
  }
  cfg["center"] = c.centered();
  cfg["odc_rotation"] = c.odc_rotation;
  cfg["imakura_right"] = c.imakura_right;
  cfg["kawakami_form"] = c.kawakami_form;
  cfg["redraw"] = c.redraw;
  cfg["standardize_aligned"] = c.standardize_aligned;
  cfg["align_timing"] = c.align_timing;
  cfg["uplink"] = c.uplink;
  {
    const dcalign::AlignOptions defaults;
    cfg["rdp_eta"] = c.rdp_eta.value_or(defaults.rdp.eta);
    cfg["gopp_tolerance"] = c.gopp_tolerance.value_or(defaults.gopp.tolerance);
  }
  cfg["test_holder"] = c.holder();
  cfg["test_split"] = c.test_split;
  if (c.protocol == "nri-dc") {
    cfg["nri_delta"] = c.nri_delta;
    cfg["nri_permute"] = c.nri_permute;
  } else {
    std::vector<std::string> conds;
    for (auto cond : c.conditions) conds.push_back(to_string(cond));
    cfg["conditions"] = conds;
  }
  cfg["methods"] = c.methods;
  cfg["models"] = c.models;
  cfg["metrics"] = c.metrics;
  cfg["trials"] = c.trials;
  cfg["seed"] = c.seed;
  cfg["device"] = c.device;
  cfg["mlp_early_stopping"] = c.model_options.mlp.early_stopping;
  cfg["mlp_hidden_layers"] = c.model_options.mlp.hidden_layers;
  cfg["mlp_max_epochs"] = c.model_options.mlp.max_epochs;
  cfg["mlp_batch_size"] = c.model_options.mlp.batch_size;
  cfg["mlp_alpha"] = c.model_options.mlp.alpha;
  if (c.dp_enabled()) {
    cfg["dp_target"] = c.dp_target;
    cfg["dp_epsilon"] = c.dp_epsilon;
    cfg["dp_delta"] = c.dp_delta;
    cfg["dp_row_range"] = c.dp_row_range;
  }
  if (!c.privacy.empty()) {
    cfg["privacy"] = c.privacy;
    if (c.measures("dr")) cfg["privacy_dr_epsilon"] = c.privacy_dr_epsilon;
    if (c.privacy_defence) cfg["privacy_defence"] = true;
  }
  return cfg.dump();
}
}  // namespace detail

std::string result_json(const Result& r) {
  nlohmann::ordered_json j;
  const auto& c = r.config;
  j["name"] = c.name;
  j["source"] = c.source;
  j["machine"] = r.machine;
  j["wall_seconds"] = r.wall_seconds;
  if (c.dp_enabled())  // sigma for Delta = dp_row_range; per-condition sigma_i in the records
    j["dp_sigma"] = analytic_gaussian_sigma(c.dp_epsilon, c.dp_delta, c.dp_row_range);
  j["config"] = nlohmann::ordered_json::parse(detail::config_json(c));
  nlohmann::ordered_json recs = nlohmann::ordered_json::array();
  for (const auto& rec : r.records)
    recs.push_back({{"trial", rec.trial},
                    {"condition", rec.condition},
                    {"method", rec.method},
                    {"model", rec.model},
                    {"metric", rec.metric},
                    {"value", rec.value},
                    {"seconds", rec.seconds}});
  if (!c.sweep.empty()) {
    nlohmann::ordered_json sweep;
    for (const auto& axis : c.sweep) sweep[axis.key] = axis.values;
    j["config"]["sweep"] = sweep;
    for (size_t k = 0; k < r.records.size(); ++k) recs[k]["point"] = r.records[k].point;
  }
  j["records"] = recs;
  if (!r.statistics.empty()) {
    nlohmann::ordered_json tests = nlohmann::ordered_json::array();
    for (const auto& t : r.statistics) {
      nlohmann::ordered_json e = {{"test", t.test},
                                  {"what", t.what},
                                  {"term", t.term},
                                  {"point", t.point},
                                  {"condition", t.condition},
                                  {"method", t.method},
                                  {"model", t.model},
                                  {"metric", t.metric},
                                  {"n", t.n},
                                  {"statistic", t.statistic},
                                  {"df1", t.df1},
                                  {"df2", t.df2},
                                  {"p", t.p},
                                  {"effect", t.effect}};
      if (t.test == "paired-t") {
        e["mean_a"] = t.mean_a;
        e["mean_b"] = t.mean_b;
      }
      tests.push_back(e);
    }
    j["statistics"] = tests;
  }
  if (!r.rounds.empty()) {
    cfg_fedavg(j["config"], c);
    nlohmann::ordered_json rounds = nlohmann::ordered_json::array();
    for (const auto& rr : r.rounds)
      rounds.push_back({{"trial", rr.trial},
                        {"method", rr.method},
                        {"round", rr.round},
                        {"train_loss", rr.train_loss},
                        {"train_accuracy", rr.train_accuracy},
                        {"test_" + c.metrics.front(), rr.test_value},
                        {"downlink_bytes", rr.downlink_bytes},
                        {"uplink_bytes", rr.uplink_bytes}});
    j["rounds"] = rounds;
  }
  return dump_with_rows(j);
}

void write_outputs(const Result& r, const std::string& dir) {
  if (const auto why = experiment_name_problem(r.config.name); !why.empty())
    throw InvalidInput("experiment name \"" + r.config.name + "\" " + why +
                       "; it must be a single plain file name");
  const std::string base = dir + "/" + r.config.name;
  const auto& c = r.config;
  // The three files are staged beside their destinations and renamed into place together once
  // all are written: a failed run leaves earlier results untouched.
  io::StagedOutputs staged;
  auto write = [&staged](const std::string& path, const std::string& text) {
    const std::string tmp = staged.stage(path, "experiment output");
    errno = 0;
    std::ofstream f(tmp);
    if (!f)
      throw IoError("cannot write '" + path + "' (" +
                    (errno ? std::strerror(errno) : "unknown error") + ")");
    f << text;
    f.close();
    if (!f)
      throw IoError("writing '" + path + "' failed (" +
                    (errno ? std::strerror(errno) : "unknown error") + ")");
  };
  write(base + ".json", result_json(r));
  std::ostringstream csv;
  const bool swept = !c.sweep.empty();  // the point as a last column (its values hold no ',')
  csv << "trial,condition,method,model,metric,value,seconds" << (swept ? ",point" : "") << "\n";
  for (const auto& rec : r.records) {
    csv << rec.trial << "," << rec.condition << "," << rec.method << "," << rec.model << ","
        << rec.metric << "," << rec.value << "," << rec.seconds;
    if (swept) csv << ",\"" << rec.point << "\"";
    csv << "\n";
  }
  write(base + ".csv", csv.str());
  std::ostringstream md;
  md << "# " << c.name << "\n\nMachine: " << r.machine << ". Wall time: " << r.wall_seconds
     << " s. Command: `dcalign experiment " << (c.source.empty() ? "<config>" : c.source);
  if (!c.source.empty()) md << " --trials " << c.trials << " --device " << c.device;
  md << "`.\n\n" << summary_table(r);
  write(base + ".md", md.str());
  staged.commit();
}

}  // namespace dcalign::experiment
