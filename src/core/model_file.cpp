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

namespace dcalign {
namespace model_file {
namespace {

// ---- names of the options in model.json

/// The keys of the "options" object of each method; a model must have exactly these.
const std::vector<std::string>& option_keys(Method m) { return core::method_info(m).model_keys; }

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
    in.fail("format version " + std::to_string(version) + "; this dcalign (" + version_string() +
            ") reads format version " + std::to_string(kModelFormatVersion));
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

}  // namespace model_file

using namespace model_file;

ModelInfo read_model_info(const std::string& dir) { return parse_model(dir).info; }

void check_model_destination(const std::string& dir) {
  check_destination(dir, kAlignerLayout,
                    [](const Json&) { return std::vector<std::string>{kTargetFile}; });
}

}  // namespace dcalign
