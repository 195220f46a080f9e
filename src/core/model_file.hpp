#pragma once
// The model directory (include/dcalign/aligner.hpp): model.json and target.npy. Aligner's save
// and load, read_model_info and check_model_destination are written on these.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "dcalign/aligner.hpp"

namespace dcalign::model_file {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* kFormatName = "dcalign-aligner";
constexpr const char* kJsonFile = "model.json";
constexpr const char* kTargetFile = "target.npy";

/// Everything model.json says, validated.
struct Parsed {
  ModelInfo info;
  AlignOptions opts;
  double rank_tolerance = 0;
  bool explicit_target = false;
  index_t iterations = 0;
  bool converged = true;
  std::string target_file;
};

/// What save records besides the options themselves.
struct Saved {
  const AlignOptions& opts;
  bool explicit_target;
  index_t iterations;
  bool converged;
};

/// The directory a model name means ("M/" names M).
fs::path model_dir(const std::string& dir);
/// model.json of the model `dir`, parsed, with its format marker checked.
Json read_model_json(const std::string& dir, const std::string& file);
/// Everything model.json of `dir` says, validated (IoError naming the file and the key).
Parsed parse_model(const std::string& dir);
/// model.json's "options" object: exactly the method's MethodInfo::model_keys.
Json options_json(const Saved& s);

/// Flushes a file (or, best effort, a directory) to disk.
void fsync_path(const fs::path& p, bool directory);
/// A name in `parent` that no other save (thread or process) uses.
fs::path sibling(const fs::path& parent, const fs::path& name, const char* tag);
/// Moves the complete directory `tmp` to `dest` (see model_file.cpp).
void publish(const fs::path& tmp, const fs::path& dest, bool replace);

}  // namespace dcalign::model_file
