// The model directory of include/dcalign/aligner.hpp: model.json (read strictly, bounded, every
// key checked) and target.npy, written under a temporary name and published atomically.
#include "core/model_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>
#include <variant>

#include "core/methods.hpp"
#include "dcalign/options.hpp"
#include "dcalign/polar.hpp"
#include "io/staged_outputs.hpp"

#ifndef DCALIGN_VERSION_STRING
#define DCALIGN_VERSION_STRING "unknown"
#endif

namespace dcalign {
namespace model_file {
namespace {

constexpr std::uintmax_t kMaxModelJsonBytes = 1 << 20;

// ---- names of the options in model.json

/// The keys of the "options" object of each method; a model must have exactly these.
const std::vector<std::string>& option_keys(Method m) { return core::method_info(m).model_keys; }

std::string key_list(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
  return "{" + s + "}";
}

const std::vector<std::string> kTopKeys = {
    "format", "format_version", "dcalign_version", "method",         "precision", "anchor_rows",
    "dim",    "users",          "enrolment",       "rank_tolerance", "target",    "options"};

/// One key of the "options" object that is not an option of the schema: its value from the
/// fitted state, and back.
struct OptionCodec {
  const char* key;
  Json (*write)(const Saved&);
  void (*read)(const Reader&, const Json&, Parsed&);
};

/// The prefix of the options' keys in messages.
const char* const kOptions = "options.";

// ---- the options of the schema (dcalign/options.hpp): its model-file keys, values, ranges and
// messages ("options.tolerance -1 is out of range: expected a finite number >= 0").

OptionValue option_value(const Reader& in, const Json& v, const std::string& where) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  in.fail(where + " must be a number, a string or a boolean, found " + v.dump());
}

Json json_of(const OptionValue& v) {
  return std::visit([](const auto& x) -> Json { return x; }, v);
}

/// Reads the schema's option `key` (a model-file key such as "tolerance" or "svd.oversampling")
/// of `obj` into m.opts.
void read_schema_option(const Reader& in, const Json& obj, const std::string& key,
                        const std::string& field, Parsed& m) {
  const OptionInfo* row = find_option(OptionEntry::model_file, key, m.opts.method);
  if (!row) throw std::logic_error("model.json: no schema row for the key '" + key + "'");
  const std::string where = kOptions + key;  // "options.svd.oversampling"
  const std::string prefix = where.substr(0, where.size() - field.size());
  AlignRequest r;
  r.align = m.opts;
  try {
    set_option(r, *row, option_value(in, in.at(obj, field, prefix), where), where,
               OptionEntry::model_file);
  } catch (const InvalidInput& e) {
    in.fail(e.what());
  }
  m.opts = r.align;
}

Json write_schema_option(const Saved& s, const std::string& key) {
  const OptionInfo* row = find_option(OptionEntry::model_file, key, s.opts.method);
  if (!row) throw std::logic_error("model.json: no schema row for the key '" + key + "'");
  AlignRequest r;
  r.align = s.opts;
  return json_of(get_option(r, *row));
}

Json svd_json(const Saved& s) {
  Json j;
  for (const char* k : {"algorithm", "oversampling", "power_iterations"})
    j[k] = write_schema_option(s, std::string("svd.") + k);
  j["seed"] = s.opts.svd.seed;
  return j;
}

void read_svd(const Reader& in, const Json& o, Parsed& m) {
  const Json& s = o["svd"];
  in.exact_keys(s, {"algorithm", "oversampling", "power_iterations", "seed"}, "'options.svd'");
  for (const char* k : {"algorithm", "oversampling", "power_iterations"})
    read_schema_option(in, s, std::string("svd.") + k, k, m);
  m.opts.svd.seed = in.u64(s, "seed", "options.svd.");
}

// The keys that are the fitted state's, not options.
const std::vector<OptionCodec>& option_codecs() {
  using S = const Saved&;
  using R = const Reader&;
  using J = const Json&;
  static const std::vector<OptionCodec> table = {
      {"target", [](S s) -> Json { return s.explicit_target ? "explicit" : "reference"; },
       [](R in, J o, Parsed& m) {
         const std::string target = in.str(o, "target", kOptions);
         if (target != "reference" && target != "explicit")
           in.fail("key 'options.target' must be \"reference\" or \"explicit\"");
         m.explicit_target = target == "explicit";
       }},
      {"svd", svd_json, read_svd},
      {"iterations", [](S s) -> Json { return s.iterations; },
       [](R in, J o, Parsed& m) { m.iterations = in.integer(o, "iterations", 0, kOptions); }},
      {"converged", [](S s) -> Json { return s.converged; },
       [](R in, J o, Parsed& m) { m.converged = in.boolean(o, "converged", kOptions); }},
  };
  return table;
}

const OptionCodec* option_codec(const std::string& key) {
  for (const OptionCodec& c : option_codecs())
    if (key == c.key) return &c;
  return nullptr;
}

void read_option(const Reader& in, const Json& o, const std::string& key, Parsed& m) {
  if (const OptionCodec* c = option_codec(key))
    c->read(in, o, m);
  else
    read_schema_option(in, o, key, key, m);
}

Json write_option(const Saved& s, const std::string& key) {
  const OptionCodec* c = option_codec(key);
  return c ? c->write(s) : write_schema_option(s, key);
}

}  // namespace

const Layout kAlignerLayout = {kFormatName, "model.json and target.npy", "target.npy"};

const char* version_string() { return DCALIGN_VERSION_STRING; }

void Reader::fail(const std::string& what) const {
  throw IoError("model file '" + file_ + "': " + what);
}

const Json& Reader::at(const Json& obj, const std::string& key, const std::string& where) const {
  const auto it = obj.find(key);
  if (it == obj.end()) fail("missing key '" + where + key + "'");
  return *it;
}

std::string Reader::str(const Json& obj, const std::string& key, const std::string& where) const {
  const Json& v = at(obj, key, where);
  if (!v.is_string()) fail("key '" + where + key + "' must be a string, found " + v.dump());
  return v.get<std::string>();
}

index_t Reader::integer(const Json& obj, const std::string& key, index_t min,
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

std::uint64_t Reader::u64(const Json& obj, const std::string& key, const std::string& where) const {
  const Json& v = at(obj, key, where);
  if (!v.is_number_unsigned())
    fail("key '" + where + key + "' must be a non-negative integer, found " + v.dump());
  return v.get<std::uint64_t>();
}

double Reader::number(const Json& obj, const std::string& key, const std::string& where) const {
  const Json& v = at(obj, key, where);
  if (!v.is_number()) fail("key '" + where + key + "' must be a number, found " + v.dump());
  return v.get<double>();
}

bool Reader::boolean(const Json& obj, const std::string& key, const std::string& where) const {
  const Json& v = at(obj, key, where);
  if (!v.is_boolean()) fail("key '" + where + key + "' must be true or false, found " + v.dump());
  return v.get<bool>();
}

void Reader::exact_keys(const Json& obj, const std::vector<std::string>& keys,
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

Json read_model_json(const std::string& dir, const std::string& file, const Layout& layout) {
  const Reader in(file);
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

Parsed parse_model(const std::string& dir) {
  const fs::path d = model_dir(dir);
  std::error_code ec;
  if (!fs::exists(d, ec))
    throw IoError("cannot load model '" + dir + "': no such directory (a model is a directory " +
                  "holding model.json and target.npy, written by Aligner::save or `dcalign " +
                  "align --model-out`)");
  if (!fs::is_directory(d, ec))
    throw IoError("cannot load model '" + dir + "': not a directory (a model is a directory " +
                  "holding model.json and target.npy, written by Aligner::save or `dcalign " +
                  "align --model-out`)");
  const std::string file = (d / kJsonFile).string();
  const Reader in(file);
  const Json j = read_model_json(dir, file);
  const index_t version = in.integer(j, "format_version", 0);
  if (version != kModelFormatVersion)
    in.fail("format version " + std::to_string(version) + "; this dcalign (" +
            DCALIGN_VERSION_STRING + ") reads format version " +
            std::to_string(kModelFormatVersion));
  in.exact_keys(j, kTopKeys, "the top-level object");

  Parsed m;
  m.info.format_version = static_cast<int>(version);
  m.info.dcalign_version = in.str(j, "dcalign_version");
  m.info.method = in.choice(j, "method", parse_method);
  m.opts.method = m.info.method;
  m.info.precision = in.str(j, "precision");
  if (m.info.precision != "float32" && m.info.precision != "float64")
    in.fail("key 'precision' must be \"float32\" or \"float64\", found \"" + m.info.precision +
            "\"");
  m.info.anchor_rows = in.integer(j, "anchor_rows", 1);
  m.info.dim = in.integer(j, "dim", 1);
  m.info.users = in.integer(j, "users", 1);
  if (m.info.dim > m.info.anchor_rows)
    in.fail("dim l = " + std::to_string(m.info.dim) + " exceeds anchor_rows a = " +
            std::to_string(m.info.anchor_rows) + " (a model needs l <= a)");
  const Method method = m.info.method;
  const std::string enrolment = in.str(j, "enrolment");
  const char* expected = core::method_info(method).enrolment == core::Enrolment::procrustes
                             ? "procrustes"
                             : "least_squares";
  if (enrolment != expected)
    in.fail("method '" + to_string(method) + "' enrols by \"" + expected +
            "\" but the file says \"" + enrolment + "\" (written for another method, or edited)");
  m.rank_tolerance = in.number(j, "rank_tolerance");
  if (!(m.rank_tolerance >= 0) || !std::isfinite(m.rank_tolerance))
    in.fail("key 'rank_tolerance' must be finite and >= 0");
  m.opts.rank_tolerance = m.rank_tolerance;

  const Json& t = in.at(j, "target", "");
  in.exact_keys(t, {"file", "shape"}, "'target'");
  m.target_file = in.str(t, "file", "target.");
  if (m.target_file.empty() || m.target_file.find('/') != std::string::npos ||
      m.target_file == "." || m.target_file == "..")
    in.fail("key 'target.file' must name a file inside the model directory, found \"" +
            m.target_file + "\"");
  const Json& shape = t["shape"];
  if (!shape.is_array() || shape.size() != 2 || !shape[0].is_number_integer() ||
      !shape[1].is_number_integer() || shape[0].get<index_t>() != m.info.anchor_rows ||
      shape[1].get<index_t>() != m.info.dim)
    in.fail("key 'target.shape' is " + shape.dump() + ", expected [anchor_rows, dim] = [" +
            std::to_string(m.info.anchor_rows) + ", " + std::to_string(m.info.dim) + "]");

  // The options: exactly the keys of this method, so that a file written for another method and
  // relabelled is recognised.
  const Json& o = in.at(j, "options", "");
  in.exact_keys(o, option_keys(method), "'options' of method '" + to_string(method) + "'",
                "; written for another method, or edited");
  for (const std::string& key : option_keys(method)) read_option(in, o, key, m);
  return m;
}

Json options_json(const Saved& s) {
  Json o = Json::object();
  for (const std::string& key : option_keys(s.opts.method)) o[key] = write_option(s, key);
  return o;
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

void check_destination(const std::string& dir, const Layout& layout, const FilesOf& files_of) {
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

void save_directory(const std::string& dir, const Layout& layout, const FilesOf& files_of,
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

}  // namespace model_file

using namespace model_file;

ModelInfo read_model_info(const std::string& dir) { return parse_model(dir).info; }

void check_model_destination(const std::string& dir) {
  check_destination(dir, kAlignerLayout,
                    [](const Json&) { return std::vector<std::string>{kTargetFile}; });
}

}  // namespace dcalign
