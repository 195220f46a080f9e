#pragma once
// What each model puts into its saved directory and how it gets it back (the format is
// documented in include/dcalign/learn.hpp). A model's save_state() fills a ModelState; its
// restore function (the model table in model.cpp) reads a ModelReader, whose errors name the
// file and the key. model_io.cpp does the files, the generic checks (shapes and dtypes against
// model.json, finite values, checksums, no parameter left unread) and the atomic save.
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/model_directory.hpp"
#include "learn/internal.hpp"

namespace dcalign::learn::detail {

/// FNV-1a, 64 bits, as 16 hex digits: catches a truncated or damaged native file before the
/// library parses it (not a defence against a deliberately forged one).
std::string fnv1a64(const std::string& bytes);

using Json = io::Json;

/// One parameter, written as <name>.npy in its own precision (f32 when float32, else f64).
struct SavedArray {
  std::string name;
  bool float32 = false;
  Matrix<double> f64;
  Matrix<float> f32;
};

/// A file in a library's own format (XGBoost's booster), written as <name>.<extension>.
struct NativeFile {
  std::string name, format, bytes;
};

/// A model's part of its saved directory.
struct ModelState {
  Json options = Json::object();  ///< model.json's "options": what prediction reads
  std::vector<SavedArray> arrays;
  std::vector<NativeFile> native;
  bool target_scaled = false;  ///< ModelOptions::standardize_target, in regression
  double target_mean = 0, target_sd = 1;

  void add(const std::string& name, Matrix<double> m) {
    arrays.push_back({name, false, std::move(m), {}});
  }
  void add(const std::string& name, Matrix<float> m) {
    arrays.push_back({name, true, {}, std::move(m)});
  }
};

/// Model's protected hooks, for a model that saves another (TargetScaled) and for model_io.cpp.
struct ModelIo {
  static void save_state(const Model& model, ModelState& state) { model.save_state(state); }
};

/// A saved model as load_model read it, for the restore functions: model.json's header values,
/// its options (typed access through json(), errors naming model.json and the key) and the
/// parameters, already checked against model.json's shapes and dtypes and for finite values.
class ModelReader {
 public:
  ModelReader(std::string dir, std::string json_file, int num_classes, index_t num_features,
              FitInfo info)
      : dir_(std::move(dir)),
        in_(std::move(json_file)),
        num_classes_(num_classes),
        num_features_(num_features),
        info_(std::move(info)) {}

  int num_classes() const { return num_classes_; }
  index_t num_features() const { return num_features_; }
  const FitInfo& fit_info() const { return info_; }
  const io::JsonReader& json() const { return in_; }
  [[noreturn]] void fail(const std::string& what) const { in_.fail(what); }

  /// model.json's "options", which must hold exactly `keys`.
  const Json& options(const std::vector<std::string>& keys) const;
  /// options.threads (ModelOptions::threads, >= 0) and options.device (a device name).
  int threads(const Json& options) const;
  std::string device(const Json& options) const;
  /// make_model's checks of the options of `kind`, as IoError naming model.json.
  void check_options(const std::string& kind, const ModelOptions& options) const;
  /// options.`key`, an integer in [min, INT_MAX].
  int int_option(const Json& options, const std::string& key, int min) const;

  /// The parameter `name`; IoError naming model.json when it lists none, or lists it in the
  /// other precision. Each parameter read is marked used.
  const Matrix<double>& f64(const std::string& name);
  const Matrix<float>& f32(const std::string& name);
  /// The bytes of the native file `name`, of `format` (size and checksum already checked).
  const std::string& native(const std::string& name, const std::string& format);
  /// IoError "model file 'DIR/<name>.npy': parameter '<name>' WHAT", for a parameter that
  /// disagrees with model.json's header or with the other parameters.
  [[noreturn]] void fail_parameter(const std::string& name, const std::string& what) const;

  // Filled by load_model before the restore function runs.
  Json options_json;
  std::vector<SavedArray> arrays;
  std::vector<NativeFile> natives;
  std::vector<std::string> native_files;  ///< the file name of each native file
  /// The parameters and native files the restore function did not ask for.
  std::vector<std::string> unused() const;

 private:
  const SavedArray& array(const std::string& name, bool float32);
  std::string dir_;
  io::JsonReader in_;
  int num_classes_;
  index_t num_features_;
  FitInfo info_;
  std::set<std::string> used_;
};

/// A value of a parameter in messages (all its digits).
inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// A vector as a saved parameter: one row.
template <typename T>
Matrix<T> as_row(const std::vector<T>& v) {
  return Matrix<T>(1, static_cast<index_t>(v.size()), v);
}

/// A saved forest's booster (XGBoost's JSON model) checked for `features` and `num_classes` with
/// `objective` (forest_model.cpp), as the JSON XGBoost may read; std::invalid_argument saying
/// what is wrong otherwise.
std::string checked_xgboost_model(const std::string& text, index_t features, int num_classes,
                                  const std::string& objective);

// The restore functions of the model table: the model of that kind from a saved directory.
std::unique_ptr<Model> restore_mlp(ModelReader& in);
std::unique_ptr<Model> restore_logreg(ModelReader& in);
std::unique_ptr<Model> restore_svm(ModelReader& in);
std::unique_ptr<Model> restore_knn(ModelReader& in);
std::unique_ptr<Model> restore_forest(ModelReader& in);
std::unique_ptr<Model> restore_linear(ModelReader& in);
/// Through the model table: the restore function of `kind` (IoError for an unknown kind), after
/// checking that the kind does the task num_classes names.
std::unique_ptr<Model> restore_model(const std::string& kind, ModelReader& in);

}  // namespace dcalign::learn::detail
