#pragma once
// The Aligner's model directory (include/dcalign/aligner.hpp): model.json and target.npy.
// Aligner's save and load, read_model_info and check_model_destination are written on these and
// on the model-directory helpers of src/io/model_directory.hpp, which the learning layer's model
// directory (src/learn/model_io.cpp) shares.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "dcalign/aligner.hpp"
#include "io/model_directory.hpp"

namespace dcalign::model_file {

namespace fs = std::filesystem;
// The directory helpers are io's (src/io/model_directory.hpp), shared with the learning layer.
using io::check_destination;
using io::FilesOf;
using io::fsync_path;
using io::Json;
using io::kJsonFile;
using io::model_dir;
using io::publish;
using io::save_directory;
using io::sibling;
using io::version_string;
using io::write_json;
using Layout = io::ModelLayout;
using Reader = io::JsonReader;

constexpr const char* kFormatName = "dcalign-aligner";
constexpr const char* kTargetFile = "target.npy";

/// The Aligner's directory.
extern const Layout kAlignerLayout;

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

/// model.json of the model `dir`, parsed strictly, with the Aligner's format marker checked.
inline Json read_model_json(const std::string& dir, const std::string& file,
                            const Layout& layout = kAlignerLayout) {
  return io::read_model_json(dir, file, layout);
}
/// Everything model.json of `dir` says, validated (IoError naming the file and the key).
Parsed parse_model(const std::string& dir);
/// model.json's "options" object: exactly the method's MethodInfo::model_keys.
Json options_json(const Saved& s);

}  // namespace dcalign::model_file
