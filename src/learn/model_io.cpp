// The saved-model directory of include/dcalign/learn.hpp: model.json (read strictly through the
// aligner's model.json reader), one .npy file per parameter and the libraries' own files,
// written atomically through io::save_directory (src/io/model_directory.hpp).
#include "learn/model_io.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>

#include "dcalign/npy.hpp"

namespace dcalign::learn {

namespace fs = std::filesystem;
using detail::Json;

namespace {

constexpr const char* kJsonFile = "model.json";
const io::ModelLayout kLayout = {"dcalign-model", "model.json and the parameter files it lists",
                                 "the parameter files its model.json lists"};
const std::vector<std::string> kTopKeys = {"format",         "format_version", "dcalign_version",
                                           "kind",           "num_classes",    "num_features",
                                           "target_scaling", "options",        "fit_info",
                                           "parameters",     "native_files"};
const std::vector<std::string> kParameterKeys = {"name", "file", "dtype", "shape"};
const std::vector<std::string> kNativeKeys = {"name", "file", "format", "bytes", "fnv1a64"};
const std::vector<std::string> kFitInfoKeys = {
    "iterations", "loss_curve",     "validation_scores", "best_validation_score",
    "gamma",      "support_vectors"};
// More classes than any model here is meant for; bounds what a corrupt file can make load
// allocate per prediction.
constexpr index_t kMaxClasses = 1 << 20;
// A native file is read whole into memory before the library parses it.
constexpr index_t kMaxNativeBytes = index_t{1} << 32;

// The libraries' own formats and their file extensions.
const char* extension_of(const std::string& format) {
  return format == "xgboost-json" ? "json" : nullptr;
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string shape_text(index_t rows, index_t cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

Json number_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

// The file names model.json lists (check_destination's view of a model): only strings, else
// the directory is not recognisably ours.
std::vector<std::string> listed_files(const Json& j) {
  std::vector<std::string> files;
  for (const char* list : {"parameters", "native_files"}) {
    const auto it = j.find(list);
    if (it == j.end() || !it->is_array())
      throw IoError(std::string("'") + list + "' is missing or not a list");
    for (const Json& e : *it) {
      if (!e.is_object() || !e.contains("file") || !e["file"].is_string())
        throw IoError(std::string("an entry of '") + list + "' has no file name");
      files.push_back(e["file"].get<std::string>());
    }
  }
  return files;
}

template <typename T>
void check_finite(const Matrix<T>& m, const std::string& what) {
  for (index_t j = 0; j < m.cols(); ++j)
    for (index_t i = 0; i < m.rows(); ++i)
      if (!std::isfinite(m(i, j)))
        throw IoError(what + " has the non-finite value " + detail::number_text(m(i, j)) +
                      " at row " + std::to_string(i) + ", column " + std::to_string(j) +
                      " (corrupt model)");
}

Json fit_info_json(const FitInfo& f) {
  Json j;
  j["iterations"] = f.iterations;
  j["loss_curve"] = Json::array();
  for (double v : f.loss_curve) j["loss_curve"].push_back(number_or_null(v));
  j["validation_scores"] = Json::array();
  for (double v : f.validation_scores) j["validation_scores"].push_back(number_or_null(v));
  j["best_validation_score"] = number_or_null(f.best_validation_score);
  j["gamma"] = number_or_null(f.gamma);
  j["support_vectors"] = f.support_vectors;
  return j;
}

// A number, or null for NaN (what number_or_null writes).
double read_number_or_null(const io::JsonReader& in, const Json& v, const std::string& key) {
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!v.is_number()) in.fail("key '" + key + "' must be a number or null, found " + v.dump());
  return v.get<double>();
}

FitInfo read_fit_info(const io::JsonReader& in, const Json& j) {
  const std::string w = "fit_info.";
  in.exact_keys(j, kFitInfoKeys, "'fit_info'");
  FitInfo f;
  const index_t iterations = in.integer(j, "iterations", 0, w);
  if (iterations > INT_MAX) in.fail("key 'fit_info.iterations' is too large");
  f.iterations = static_cast<int>(iterations);
  for (const char* key : {"loss_curve", "validation_scores"}) {
    const Json& list = in.at(j, key, w);
    if (!list.is_array()) in.fail("key '" + w + key + "' must be a list of numbers");
    auto& out = std::string(key) == "loss_curve" ? f.loss_curve : f.validation_scores;
    for (size_t i = 0; i < list.size(); ++i)
      out.push_back(read_number_or_null(in, list[i], w + key + "[" + std::to_string(i) + "]"));
  }
  f.best_validation_score =
      read_number_or_null(in, in.at(j, "best_validation_score", w), w + "best_validation_score");
  f.gamma = read_number_or_null(in, in.at(j, "gamma", w), w + "gamma");
  const index_t sv = in.integer(j, "support_vectors", 0, w);
  if (sv > INT_MAX) in.fail("key 'fit_info.support_vectors' is too large");
  f.support_vectors = static_cast<int>(sv);
  return f;
}

std::string read_file(const fs::path& path, index_t expected_bytes) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw IoError("model file '" + path.string() + "' " +
                  (fs::exists(path, ec) ? "is not a regular file" : "does not exist"));
  const auto size = fs::file_size(path, ec);
  if (ec || static_cast<index_t>(size) != expected_bytes)
    throw IoError("model file '" + path.string() + "' is " + std::to_string(size) +
                  " bytes; model.json says " + std::to_string(expected_bytes) +
                  " (truncated or replaced)");
  std::ifstream f(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f || f.gcount() != static_cast<std::streamsize>(bytes.size()))
    throw IoError("model file '" + path.string() + "' could not be read whole");
  return bytes;
}

// One parameter file: its header against model.json's shape and dtype, then its values.
void read_parameter(const std::string& path, index_t rows, index_t cols, const std::string& w,
                    detail::SavedArray& a) {
  const NpyHeader h = read_npy_header(path);
  if (h.shape.size() != 2 || h.shape[0] != rows || h.shape[1] != cols) {
    std::string got;
    for (index_t s : h.shape) got += (got.empty() ? "" : ", ") + std::to_string(s);
    throw IoError("model file '" + path + "' has shape (" + got + ") but model.json's '" + w +
                  "shape' says " + shape_text(rows, cols));
  }
  if ((h.dtype == DType::float32) != a.float32)
    throw IoError(
        "model file '" + path + "' holds " + (h.dtype == DType::float32 ? "float32" : "float64") +
        " values but model.json's '" + w + "dtype' says " + (a.float32 ? "float32" : "float64"));
  const std::string what = "model file '" + path + "'";
  if (a.float32) {
    a.f32 = read_npy_matrix<float>(path);
    check_finite(a.f32, what);
  } else {
    a.f64 = read_npy_matrix<double>(path);
    check_finite(a.f64, what);
  }
}

// The "parameters" of model.json: each file read, its header and values checked.
void read_parameters(const io::JsonReader& in, const Json& list, const fs::path& dir,
                     detail::ModelReader& out) {
  if (!list.is_array()) in.fail("key 'parameters' must be a list");
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string w = "parameters[" + std::to_string(i) + "].";
    const Json& e = list[i];
    in.exact_keys(e, kParameterKeys, "'parameters[" + std::to_string(i) + "]'");
    const std::string name = in.str(e, "name", w);
    if (!valid_name(name) || !names.insert(name).second)
      in.fail("key '" + w + "name' is \"" + name +
              "\"; expected a new name of letters, digits and '_'");
    if (in.str(e, "file", w) != name + ".npy")
      in.fail("key '" + w + "file' must be \"" + name + ".npy\"");
    const std::string dtype = in.str(e, "dtype", w);
    if (dtype != "float32" && dtype != "float64")
      in.fail("key '" + w + "dtype' must be \"float32\" or \"float64\", found \"" + dtype + "\"");
    const Json& shape = in.at(e, "shape", w);
    if (!shape.is_array() || shape.size() != 2 || !shape[0].is_number_unsigned() ||
        !shape[1].is_number_unsigned())
      in.fail("key '" + w + "shape' must be [rows, columns], found " + shape.dump());
    const index_t rows = shape[0].get<index_t>(), cols = shape[1].get<index_t>();
    const std::string path = (dir / (name + ".npy")).string();
    detail::SavedArray a{name, dtype == "float32", {}, {}};
    try {
      read_parameter(path, rows, cols, w, a);
    } catch (const IoError& err) {
      throw IoError(std::string(err.what()) + " (parameter '" + name + "', listed in '" +
                    in.file() + "' as '" + w.substr(0, w.size() - 1) + "')");
    }
    out.arrays.push_back(std::move(a));
  }
}

// The "native_files" of model.json: each file read whole, its size and checksum checked.
void read_natives(const io::JsonReader& in, const Json& list, const fs::path& dir,
                  detail::ModelReader& out) {
  if (!list.is_array()) in.fail("key 'native_files' must be a list");
  std::set<std::string> names;
  for (const auto& a : out.arrays) names.insert(a.name);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string w = "native_files[" + std::to_string(i) + "].";
    const Json& e = list[i];
    in.exact_keys(e, kNativeKeys, "'native_files[" + std::to_string(i) + "]'");
    const std::string name = in.str(e, "name", w), format = in.str(e, "format", w);
    if (!valid_name(name) || !names.insert(name).second)
      in.fail("key '" + w + "name' is \"" + name +
              "\"; expected a new name of letters, digits and '_'");
    const char* ext = extension_of(format);
    if (!ext) in.fail("key '" + w + "format' is \"" + format + "\"; expected \"xgboost-json\"");
    const std::string file = name + "." + ext;
    if (in.str(e, "file", w) != file) in.fail("key '" + w + "file' must be \"" + file + "\"");
    const index_t bytes = in.integer(e, "bytes", 0, w);
    if (bytes > kMaxNativeBytes) in.fail("key '" + w + "bytes' is beyond 4 GiB");
    const std::string sum = in.str(e, "fnv1a64", w);
    std::string data = read_file(dir / file, bytes);
    if (detail::fnv1a64(data) != sum)
      throw IoError("model file '" + (dir / file).string() + "' has the FNV-1a checksum " +
                    detail::fnv1a64(data) + " but model.json's '" + w + "fnv1a64' says " + sum +
                    " (damaged or replaced)");
    out.natives.push_back({name, format, std::move(data)});
    out.native_files.push_back((dir / file).string());
  }
}

std::unique_ptr<Model> load(const std::string& dir) {
  const fs::path d = io::model_dir(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec))
    throw IoError("cannot load model '" + dir +
                  "': " + (fs::exists(d, ec) ? "not a directory" : "no such directory") +
                  " (a model is a directory holding " + kLayout.holds +
                  ", written by Model::save)");
  const std::string file = (d / kJsonFile).string();
  const io::JsonReader in(file);
  const Json j = io::read_model_json(dir, file, kLayout);
  const index_t version = in.integer(j, "format_version", 0);
  if (version != kSaveFormatVersion)
    in.fail("format version " + std::to_string(version) + "; this dcalign (" +
            io::version_string() + ") reads format version " + std::to_string(kSaveFormatVersion));
  in.exact_keys(j, kTopKeys, "the top-level object");
  in.str(j, "dcalign_version");
  const std::string kind = in.str(j, "kind");
  const index_t classes = in.integer(j, "num_classes", 0);
  if (classes == 1 || classes > kMaxClasses)
    in.fail("key 'num_classes' is " + std::to_string(classes) +
            "; expected 0 (regression) or 2 to " + std::to_string(kMaxClasses) + " classes");
  const index_t features = in.integer(j, "num_features", 1);
  if (features > INT_MAX) in.fail("key 'num_features' is too large");
  detail::ModelReader r(dir, file, static_cast<int>(classes), features,
                        read_fit_info(in, in.at(j, "fit_info", "")));
  r.options_json = in.at(j, "options", "");
  const Json& scaling = in.at(j, "target_scaling", "");
  double mean = 0, sd = 1;
  if (!scaling.is_null()) {
    in.exact_keys(scaling, {"mean", "sd"}, "'target_scaling'");
    mean = in.number(scaling, "mean", "target_scaling.");
    sd = in.number(scaling, "sd", "target_scaling.");
    if (!std::isfinite(mean) || !std::isfinite(sd) || !(sd > 0))
      in.fail("key 'target_scaling' must hold a finite mean and a positive, finite sd");
    if (classes != 0)
      in.fail("key 'target_scaling' is set for a classifier (num_classes = " +
              std::to_string(classes) + "); only regression scales its targets");
  }
  read_parameters(in, in.at(j, "parameters", ""), d, r);
  read_natives(in, in.at(j, "native_files", ""), d, r);
  std::unique_ptr<Model> model = detail::restore_model(kind, r);
  for (const std::string& name : r.unused())
    in.fail("lists the parameter '" + name + "', which a model of kind '" + kind +
            "' does not have");
  if (!scaling.is_null())
    model = detail::scale_targets(std::move(model), static_cast<int>(features), mean, sd);
  return model;
}

}  // namespace

// ---- saving

void Model::save_state(detail::ModelState&) const {
  throw InvalidInput(name() + ".save: this model cannot be saved");
}

void Model::save(const std::string& dir) const {
  if (!fitted_) throw InvalidInput(name() + ".save: called before fit; expected a fitted model");
  detail::ModelState s;
  save_state(s);
  Json j;
  j["format"] = kLayout.format;
  j["format_version"] = kSaveFormatVersion;
  j["dcalign_version"] = io::version_string();
  j["kind"] = name();
  j["num_classes"] = num_classes_;
  j["num_features"] = num_features_;
  j["target_scaling"] =
      s.target_scaled ? Json{{"mean", s.target_mean}, {"sd", s.target_sd}} : Json(nullptr);
  j["options"] = s.options;
  j["fit_info"] = fit_info_json(info_);
  j["parameters"] = Json::array();
  for (const auto& a : s.arrays) {
    const index_t rows = a.float32 ? a.f32.rows() : a.f64.rows();
    const index_t cols = a.float32 ? a.f32.cols() : a.f64.cols();
    const std::string what = name() + ".save: parameter '" + a.name + "'";
    try {
      a.float32 ? check_finite(a.f32, what) : check_finite(a.f64, what);
    } catch (const IoError& e) {  // a model that cannot be loaded again is not written
      throw InvalidInput(e.what());
    }
    j["parameters"].push_back({{"name", a.name},
                               {"file", a.name + ".npy"},
                               {"dtype", a.float32 ? "float32" : "float64"},
                               {"shape", {rows, cols}}});
  }
  j["native_files"] = Json::array();
  for (const auto& n : s.native)
    j["native_files"].push_back({{"name", n.name},
                                 {"file", n.name + "." + extension_of(n.format)},
                                 {"format", n.format},
                                 {"bytes", n.bytes.size()},
                                 {"fnv1a64", detail::fnv1a64(n.bytes)}});
  io::save_directory(dir, kLayout, listed_files, [&](const fs::path& tmp) {
    io::write_json(tmp / kJsonFile, j);
    for (const auto& a : s.arrays) {
      const std::string path = (tmp / (a.name + ".npy")).string();
      a.float32 ? write_npy<float>(path, a.f32.view()) : write_npy<double>(path, a.f64.view());
    }
    for (const auto& n : s.native) {
      const fs::path path = tmp / (n.name + "." + extension_of(n.format));
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f.write(n.bytes.data(), static_cast<std::streamsize>(n.bytes.size()));
      f.close();
      if (!f) throw IoError("cannot write '" + path.string() + "'");
    }
  });
}

// ---- loading

std::unique_ptr<Model> load_model(const std::string& dir) {
  try {
    return load(dir);
  } catch (const IoError&) {
    throw;
  } catch (const InvalidInput& e) {  // a value a model's own checks refuse
    throw IoError("cannot load model '" + dir + "': " + e.what());
  } catch (const Json::exception& e) {
    throw IoError("cannot load model '" + dir + "': model file '" +
                  (io::model_dir(dir) / kJsonFile).string() +
                  "' holds a value of the wrong type: " + e.what());
  }
}

namespace detail {

std::string fnv1a64(const std::string& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

const Json& ModelReader::options(const std::vector<std::string>& keys) const {
  in_.exact_keys(options_json, keys, "'options'");
  return options_json;
}

int ModelReader::int_option(const Json& o, const std::string& key, int min) const {
  const index_t v = in_.integer(o, key, min, "options.");
  if (v > INT_MAX) fail("key 'options." + key + "' is too large");
  return static_cast<int>(v);
}

void ModelReader::check_options(const std::string& kind, const ModelOptions& o) const {
  try {
    validate_options(kind, o);
  } catch (const InvalidInput& e) {
    fail(std::string("key 'options': ") + e.what());
  }
}

int ModelReader::threads(const Json& o) const { return int_option(o, "threads", 0); }

std::string ModelReader::device(const Json& o) const {
  const std::string d = in_.str(o, "device", "options.");
  if (d != "cpu" && d != "cuda" && d.rfind("cuda:", 0) != 0)
    fail("key 'options.device' is \"" + d + "\"; expected \"cpu\", \"cuda\" or \"cuda:N\"");
  return d;
}

const SavedArray& ModelReader::array(const std::string& name, bool float32) {
  for (const auto& a : arrays)
    if (a.name == name) {
      if (a.float32 != float32)
        fail("parameter '" + name + "' is " + (a.float32 ? "float32" : "float64") +
             "; this model keeps it in " + (float32 ? "float32" : "float64"));
      used_.insert(name);
      return a;
    }
  fail("key 'parameters' lacks the parameter '" + name + "'");
}

const Matrix<double>& ModelReader::f64(const std::string& name) { return array(name, false).f64; }
const Matrix<float>& ModelReader::f32(const std::string& name) { return array(name, true).f32; }

const std::string& ModelReader::native(const std::string& name, const std::string& format) {
  for (const auto& n : natives)
    if (n.name == name) {
      if (n.format != format)
        fail("native file '" + name + "' is \"" + n.format + "\"; expected \"" + format + "\"");
      used_.insert(name);
      return n.bytes;
    }
  fail("key 'native_files' lacks the file '" + name + "'");
}

void ModelReader::fail_parameter(const std::string& name, const std::string& what) const {
  for (size_t i = 0; i < natives.size(); ++i)
    if (natives[i].name == name)
      throw IoError("model file '" + native_files[i] + "': " + what + " (corrupt model)");
  throw IoError("model file '" + (io::model_dir(dir_) / (name + ".npy")).string() +
                "': parameter '" + name + "' " + what + " (corrupt model)");
}

std::vector<std::string> ModelReader::unused() const {
  std::vector<std::string> out;
  for (const auto& a : arrays)
    if (!used_.count(a.name)) out.push_back(a.name);
  for (const auto& n : natives)
    if (!used_.count(n.name)) out.push_back(n.name);
  return out;
}

}  // namespace detail

}  // namespace dcalign::learn
