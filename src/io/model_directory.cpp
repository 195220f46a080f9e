// Model directories (src/io/model_directory.hpp): strict reading of model.json, the destination
// check and the atomic save, shared by the aligner's model (src/core/model_file.cpp) and the
// learning layer's (src/learn/model_io.cpp).
#include "io/model_directory.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "dcalign/error.hpp"

#ifndef DCALIGN_VERSION_STRING
#define DCALIGN_VERSION_STRING "unknown"
#endif

namespace dcalign::io {
namespace {

constexpr std::uintmax_t kMaxModelJsonBytes = 1 << 20;

std::string key_list(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
  return "{" + s + "}";
}

}  // namespace

const char* version_string() { return DCALIGN_VERSION_STRING; }

void JsonReader::fail(const std::string& what) const {
  throw IoError("model file '" + file_ + "': " + what);
}

const Json& JsonReader::at(const Json& obj, const std::string& key,
                           const std::string& where) const {
  const auto it = obj.find(key);
  if (it == obj.end()) fail("missing key '" + where + key + "'");
  return *it;
}

std::string JsonReader::str(const Json& obj, const std::string& key,
                            const std::string& where) const {
  const Json& v = at(obj, key, where);
  if (!v.is_string()) fail("key '" + where + key + "' must be a string, found " + v.dump());
  return v.get<std::string>();
}

index_t JsonReader::integer(const Json& obj, const std::string& key, index_t min,
                            const std::string& where) const {
  const Json& v = at(obj, key, where);
  const auto bad = [&] {
    fail("key '" + where + key + "' must be an integer >= " + std::to_string(min) + ", found " +
         v.dump());
  };
  if (!v.is_number_integer()) bad();
  if (v.is_number_unsigned() &&
      v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<index_t>::max()))
    bad();
  if (v.get<index_t>() < min) bad();
  return v.get<index_t>();
}

std::uint64_t JsonReader::u64(const Json& obj, const std::string& key,
                              const std::string& where) const {
  const Json& v = at(obj, key, where);
  if (!v.is_number_unsigned())
    fail("key '" + where + key + "' must be a non-negative integer, found " + v.dump());
  return v.get<std::uint64_t>();
}

double JsonReader::number(const Json& obj, const std::string& key, const std::string& where) const {
  const Json& v = at(obj, key, where);
  if (!v.is_number()) fail("key '" + where + key + "' must be a number, found " + v.dump());
  return v.get<double>();
}

bool JsonReader::boolean(const Json& obj, const std::string& key, const std::string& where) const {
  const Json& v = at(obj, key, where);
  if (!v.is_boolean()) fail("key '" + where + key + "' must be true or false, found " + v.dump());
  return v.get<bool>();
}

void JsonReader::exact_keys(const Json& obj, const std::vector<std::string>& keys,
                            const std::string& what, const std::string& hint) const {
  if (!obj.is_object()) fail(what + " must be a JSON object");
  for (const auto& k : keys)
    if (!obj.contains(k))
      fail(what + " lacks key '" + k + "' (expected exactly the keys " + key_list(keys) + ")" +
           hint);
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
      fail(what + " has the unexpected key '" + it.key() + "' (expected exactly the keys " +
           key_list(keys) + ")" + hint);
}

fs::path model_dir(const std::string& dir) {
  fs::path d(dir);
  if (!d.has_filename()) d = d.parent_path();  // "M/" names M
  return d;
}

Json read_model_json(const std::string& dir, const std::string& file, const ModelLayout& layout) {
  const JsonReader in(file);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw IoError("cannot load model '" + dir + "': '" + file +
                  (fs::exists(file, ec) ? "' is not a regular file" : "' does not exist") +
                  " (a model is a directory holding " + layout.holds + ")");
  std::ifstream f(file, std::ios::binary);
  if (!f)
    throw IoError("cannot load model '" + dir + "': cannot open '" + file + "' (" +
                  (errno ? std::strerror(errno) : "unknown error") + ")");
  // Bounded before reading: a model.json is a few hundred bytes.
  const auto size = fs::file_size(file, ec);
  if (ec || size > kMaxModelJsonBytes)
    in.fail("is " + std::to_string(size) + " bytes; a model.json is at most " +
            std::to_string(kMaxModelJsonBytes) + " bytes (not a dcalign model, or corrupt)");
  std::string text(static_cast<std::size_t>(size), '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (f.gcount() != static_cast<std::streamsize>(text.size()))
    in.fail("could not be read whole (it changed while being read?)");
  // Strict, as the TOML reader: one JSON value and nothing after it (no NUL byte and garbage,
  // which the parser would take as the end of its input), and no key twice in an object.
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    in.fail("has a NUL byte at offset " + std::to_string(nul) + " (corrupt or not a JSON file)");
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  const Json::parser_callback_t strict = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) keys.emplace_back();
    if (event == Json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == Json::parse_event_t::key && !keys.empty() && duplicate.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  Json j;
  try {
    j = Json::parse(text, strict);
  } catch (const Json::parse_error& e) {
    in.fail(std::string("not valid JSON (truncated or corrupt?): ") + e.what());
  } catch (const Json::exception& e) {
    // The parser also throws out_of_range, e.g. for a number beyond double's range (1e999).
    in.fail(std::string("has a value JSON cannot hold: ") + e.what());
  }
  if (!duplicate.empty())
    in.fail("has the key '" + duplicate + "' twice in one object (a model has each key once)");
  if (!j.is_object()) in.fail("not a JSON object");
  if (!j.contains("format") || j["format"] != layout.format)
    in.fail(std::string("not a dcalign model: expected \"format\": \"") + layout.format + "\"");
  return j;
}

// ---- atomic save

fs::path sibling(const fs::path& parent, const fs::path& name, const char* tag) {
  static std::atomic<unsigned long> counter{0};
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return parent / ("." + name.string() + "." + tag + "-" + std::to_string(::getpid()) + "-" +
                   std::to_string(counter++) + "-" + std::to_string(ticks));
}

/// Moves the complete directory `tmp` to `dest` (io::swap_into_place: an existing model is
/// swapped with the new one in one step where the file system can), then removes the old one.
void publish(const fs::path& tmp, const fs::path& dest) {
  const std::string old = io::swap_into_place(tmp.string(), dest.string());
  std::error_code ec;
  if (!old.empty()) fs::remove_all(old, ec);  // a leftover is harmless
}

void check_destination(const std::string& dir, const ModelLayout& layout, const FilesOf& files_of) {
  const fs::path dest = model_dir(dir);
  const auto refuse = [&](const std::string& why) {
    throw IoError("cannot save model to '" + dir + "': " + why +
                  "; it is not a dcalign model directory, and only a dcalign model directory "
                  "(model.json with \"format\": \"" +
                  layout.format + "\", and " + layout.others + ", nothing else) is replaced. " +
                  "Choose a new name or remove it yourself");
  };
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dest, ec);
  if (st.type() == fs::file_type::not_found) return;
  if (st.type() == fs::file_type::symlink) refuse("it is a symbolic link");
  if (st.type() != fs::file_type::directory) refuse("it exists and is not a directory");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dest, ec)) {
    names.push_back(e.path().filename().string());
    if (!e.is_regular_file(ec) || e.is_symlink(ec))
      refuse("its '" + names.back() + "' is not a regular file");
  }
  if (ec) refuse("it cannot be listed (" + ec.message() + ")");
  if (!fs::exists(dest / kJsonFile, ec)) {
    if (!names.empty()) refuse("it holds '" + names.front() + "', which is not part of a model");
    refuse("it has no model.json");
  }
  Json j;
  try {
    j = read_model_json(dir, (dest / kJsonFile).string(), layout);
  } catch (const IoError& e) {
    refuse(std::string("it is not a dcalign model (") + e.what() + ")");
  }
  if (!j.contains("format_version") || !j["format_version"].is_number_integer())
    refuse("its model.json has no integer \"format_version\"");
  std::vector<std::string> files;
  try {
    files = files_of(j);
  } catch (const Error& e) {
    refuse(std::string("its model.json does not list its files (") + e.what() + ")");
  }
  for (const auto& name : names)
    if (name != kJsonFile && std::find(files.begin(), files.end(), name) == files.end())
      refuse("it holds '" + name + "', which is not part of a model");
}

void write_json(const fs::path& path, const Json& j) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << j.dump(2) << "\n";
  f.close();
  if (!f) throw IoError("cannot write '" + path.string() + "'");
}

void save_directory(const std::string& dir, const ModelLayout& layout, const FilesOf& files_of,
                    const std::function<void(const fs::path& tmp)>& write) {
  const fs::path dest = model_dir(dir);
  if (dest.empty() || dest.filename() == "." || dest.filename() == "..")
    throw IoError("cannot save model to '" + dir + "': not a directory name");
  fs::path parent = dest.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    throw IoError("cannot save model to '" + dir + "': the directory '" + parent.string() +
                  "' does not exist");
  check_destination(dir, layout, files_of);

  // The whole directory is written under a temporary name beside `dest`, then renamed.
  const fs::path tmp = sibling(parent, dest.filename(), "tmp");
  if (!fs::create_directory(tmp, ec))
    throw IoError("cannot save model to '" + dir + "': cannot create the temporary directory '" +
                  tmp.string() + "' (" + ec.message() + ")");
  io::register_temporary(tmp.string(), true);
  try {
    write(tmp);
    for (const auto& e : fs::directory_iterator(tmp)) fsync_path(e.path(), false);
    fsync_path(tmp, true);
    publish(tmp, dest);
    io::forget_temporary(tmp.string());
    fsync_path(parent, true);
  } catch (const std::exception& e) {
    fs::remove_all(tmp, ec);
    io::forget_temporary(tmp.string());
    throw IoError("cannot save model to '" + dir + "': " + e.what() + " (nothing was changed at '" +
                  dir + "')");
  }
}

}  // namespace dcalign::io
