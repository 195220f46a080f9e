#pragma once
// Model directories: a directory holding model.json (a "format" marker, a format version, and
// the names of its other files) and those files. The strict reading of model.json, the check
// that a destination may be replaced and the atomic save are shared by the aligner's model
// (src/core/model_file.hpp) and the learning layer's (src/learn/model_io.hpp).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "dcalign/matrix.hpp"
#include "io/staged_outputs.hpp"

namespace dcalign::io {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* kJsonFile = "model.json";

/// A directory format written on these helpers, for the checks and their messages.
struct ModelLayout {
  const char* format;  ///< model.json's "format" marker
  const char* holds;   ///< what such a directory holds, e.g. "model.json and target.npy"
  const char* others;  ///< its files besides model.json, e.g. "target.npy"
};
/// The dcalign version that saved models record.
const char* version_string();

/// Typed access to model.json with errors that name the file and the key (IoError
/// "model file 'FILE': ...").
class JsonReader {
 public:
  explicit JsonReader(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& what) const;
  const Json& at(const Json& obj, const std::string& key, const std::string& where) const;
  std::string str(const Json& obj, const std::string& key, const std::string& where = "") const;
  index_t integer(const Json& obj, const std::string& key, index_t min,
                  const std::string& where = "") const;
  std::uint64_t u64(const Json& obj, const std::string& key, const std::string& where = "") const;
  double number(const Json& obj, const std::string& key, const std::string& where = "") const;
  bool boolean(const Json& obj, const std::string& key, const std::string& where = "") const;
  /// An enumeration through the library's parser, whose InvalidInput becomes an IoError here.
  template <typename Parse>
  auto choice(const Json& obj, const std::string& key, Parse parse,
              const std::string& where = "") const {
    const std::string s = str(obj, key, where);
    try {
      return parse(s);
    } catch (const InvalidInput& e) {
      fail("key '" + where + key + "': " + e.what());
    }
  }
  /// `obj` is an object with exactly `keys` (`what` names it in messages, `hint` follows).
  void exact_keys(const Json& obj, const std::vector<std::string>& keys, const std::string& what,
                  const std::string& hint = "") const;
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

/// The directory a model name means ("M/" names M).
fs::path model_dir(const std::string& dir);
/// model.json of the model `dir`, parsed strictly (bounded size, one JSON object, no key twice),
/// with its format marker checked.
Json read_model_json(const std::string& dir, const std::string& file, const ModelLayout& layout);
/// A name in `parent` that no other save (thread or process) uses.
fs::path sibling(const fs::path& parent, const fs::path& name, const char* tag);
/// Moves the complete directory `tmp` to `dest` (io::swap_into_place) and removes the old one.
void publish(const fs::path& tmp, const fs::path& dest);

/// The files of a saved directory besides model.json, as its model.json names them.
using FilesOf = std::function<std::vector<std::string>(const Json& model_json)>;

/// Throws IoError unless `dir` may receive a model of `layout`: it does not exist, or it is such
/// a model already (a directory, not a link, holding model.json with the layout's "format" and
/// an integer "format_version", and regular files that `files_of` names, nothing else).
void check_destination(const std::string& dir, const ModelLayout& layout, const FilesOf& files_of);

/// Saves a model directory atomically: checks `dir` (its parent exists; check_destination),
/// lets `write` fill a new temporary directory beside it, flushes every file and the directory
/// to disk and publishes it in place of `dir`. Any failure leaves `dir` as it was and throws
/// IoError naming `dir`; the temporary is removed (and, while it exists, registered with
/// io::register_temporary for the signal handlers).
void save_directory(const std::string& dir, const ModelLayout& layout, const FilesOf& files_of,
                    const std::function<void(const fs::path& tmp)>& write);

/// Writes `j` to `path` (indented, newline-terminated); IoError naming the file on failure.
void write_json(const fs::path& path, const Json& j);

}  // namespace dcalign::io
