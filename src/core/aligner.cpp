// Enrolment of later users against a fitted model, and the model's directory format (see
// include/dcalign/aligner.hpp). Written on Primitives<T> like the methods: ODC and GOPP enrol by
// the Procrustes step of their fit (one product W_new^T Z, one batched polar factor), Imakura-DC
// and Kawakami-DC by the backend's batched least squares.
#include "dcalign/aligner.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

#include "core/common.hpp"
#include "core/methods.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/polar.hpp"
#include "io/staged_outputs.hpp"

#ifndef DCALIGN_VERSION_STRING
#define DCALIGN_VERSION_STRING "unknown"
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)  // <linux/fs.h>; older C libraries lack the declaration
#endif

namespace dcalign {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* kFormatName = "dcalign-aligner";
constexpr const char* kJsonFile = "model.json";
constexpr const char* kTargetFile = "target.npy";
constexpr std::uintmax_t kMaxModelJsonBytes = 1 << 20;

template <typename T>
const char* precision_name() {
  return std::is_same_v<T, float> ? "float32" : "float64";
}

// ODC, GOPP and OPP have orthogonal G_i and enrol by the Procrustes step; the others (RDP
// against its target, the mean of the A_i G_i) by least squares.
bool procrustes(Method m) { return core::method_info(m).enrolment == core::Enrolment::procrustes; }

std::string shape_string(index_t r, index_t c) {
  return std::to_string(r) + " x " + std::to_string(c);
}

/// Backend memory for host arrays: on the CPU the host pointers themselves, elsewhere explicit
/// copies in (in) and out (out, copied back by finish).
template <typename T>
class Staging {
 public:
  explicit Staging(Primitives<T>& p) : p_(p), host_(p.device() == Device::cpu) {}
  bool host() const { return host_; }
  const T* in(const T* host, index_t n) {
    if (host_) return host;
    bufs_.push_back(p_.allocate(n));
    p_.to_device(host, bufs_.back().data(), n);
    return bufs_.back().data();
  }
  T* out(T* host, index_t n) {
    if (host_) return host;
    bufs_.push_back(p_.allocate(n));
    outs_.push_back({bufs_.back().data(), host, n});
    return bufs_.back().data();
  }
  void finish() {
    for (const auto& o : outs_) p_.to_host(o.dev, o.host, o.n);
    p_.synchronize();
  }

 private:
  struct Out {
    T* dev;
    T* host;
    index_t n;
  };
  Primitives<T>& p_;
  bool host_;
  std::vector<Buffer<T>> bufs_;
  std::vector<Out> outs_;
};

/// Zbar = (1/c) W [G_1; ...; G_c], Kawakami-DC's kept target.
template <typename T>
Matrix<T> mean_aligned(Primitives<T>& p, const Stack<T>& A, const Stack<T>& G) {
  const index_t c = A.count(), a = A.rows(), l = A.cols();
  Matrix<T> Z(a, l);
  Staging<T> st(p);
  const StackView<const T> dA(st.in(A.data(), A.size()), c, a, l);
  const StackView<const T> dG(st.in(G.data(), G.size()), c, l, l);
  const MatrixView<T> dZ(st.out(Z.data(), a * l), a, l);
  Buffer<T> gv = p.allocate(c * l * l);
  p.vstack(dG, MatrixView<T>(gv.data(), c * l, l));
  p.gemm(Op::none, Op::none, T(1) / T(c), dA.concatenated(),
         MatrixView<const T>(gv.data(), c * l, l), T(0), dZ);
  st.finish();
  return Z;
}

// ---- enrolment

template <typename T>
BatchEnrolment<T> enroll_impl(const Aligner<T>& model, StackView<const T> A_new, Backend& backend,
                              bool single) {
  const index_t k = A_new.count(), a = model.anchor_rows(), l = model.dim();
  const Method method = model.method();
  const auto who = [single](index_t u) {
    return single ? std::string("A_new")
                  : "new user " + std::to_string(u) + " (A_new[" + std::to_string(u) + "])";
  };
  if (k < 1)
    throw InvalidInput("enroll: no new users (the batch is empty); expected k >= 1 matrices of " +
                       shape_string(a, l));
  if (A_new.rows() != a || A_new.cols() != l)
    throw InvalidInput("enroll: " + std::string(single ? "A_new is " : "each A_new[k] is ") +
                       shape_string(A_new.rows(), A_new.cols()) + ", expected a x l = " +
                       shape_string(a, l) + ", the shape of the anchor representations the " +
                       to_string(method) + " model was fitted on");

  auto& p = backend.primitives<T>();
  BatchEnrolment<T> out;
  EnrolmentReport& r = out.report;
  r.method = to_string(method);
  r.device = to_string(p.device());
  r.precision = precision_name<T>();
  r.users = k;
  r.anchor_rows = a;
  r.dim = l;
  r.fitted_users = model.users();
  auto t0 = std::chrono::steady_clock::now();
  const auto lap = [&](const char* phase) {
    p.synchronize();
    const auto t = std::chrono::steady_clock::now();
    r.add_phase(phase, std::chrono::duration<double>(t - t0).count());
    t0 = t;
  };

  out.G = Stack<T>(k, l, l);
  Staging<T> st(p);
  const StackView<const T> A(st.in(A_new.data(), A_new.size()), k, a, l);
  const MatrixView<const T> Z(st.in(model.target().data(), a * l), a, l);
  const StackView<T> G(st.out(out.G.data(), out.G.size()), k, l, l);
  if (!st.host()) lap("upload");

  // One O(a l) scan: cheap next to the O(a l^2) enrolment, and LAPACK's behaviour on NaN is
  // unspecified for the least-squares path.
  const auto bad = p.first_nonfinite_batched(A);
  for (index_t u = 0; u < k; ++u)
    if (bad[u] >= 0)
      throw InvalidInput("enroll: " + who(u) + " has a non-finite value (NaN or Inf) at row " +
                         std::to_string(bad[u] % a) + ", column " + std::to_string(bad[u] / a) +
                         "; every entry must be finite");
  lap("validate");

  std::vector<T> ratio(static_cast<size_t>(k));
  const double tol = model.rank_tolerance();
  std::string factorised;
  if (procrustes(method)) {
    // As in the fit (core::procrustes_step): W_new^T Z, whose row blocks are the M_k = A_k^T Z,
    // then one batched polar factor with the fit's polar method and rank fallback.
    Buffer<T> m = p.allocate(k * l * l);
    p.gemm(Op::trans, Op::none, T(1), A.concatenated(), Z, T(0), MatrixView<T>(m.data(), k * l, l));
    // Finite entries (checked above) whose products, or their squares, overflow: the norms
    // ||M_u||_F^2 (double sums) say which user, O(k l^2).
    const StackView<const T> Ms(m.data(), k, l, l, k * l, l);
    if (const index_t u = core::first_overflowing(p, Ms); u < k) {
      throw NumericalError("enroll: " + who(u) +
                           ": A_new^T Z overflowed to Inf although every entry is finite; "
                           "rescale A_new by one power of two (its G_new does not change)");
    }
    PolarOptions po;
    po.method = model.options().polar;
    po.fallback_ratio = tol;
    po.measure_orthogonality = false;  // measured below for the report
    const PolarInfo<T> info = polar_factor(p, Ms, false, G, po);
    for (index_t u = 0; u < k; ++u)
      ratio[u] = info.sigma_max[u] > 0 ? info.sigma_min[u] / info.sigma_max[u] : T(0);
    factorised = "A_new^T Z";
    lap("procrustes");
  } else {
    ratio = p.lstsq_batched(A, Z, G);
    factorised = "A_new";
    lap("least_squares");
  }
  for (index_t u = 0; u < k; ++u)
    if (!(static_cast<double>(ratio[u]) > tol)) {
      std::ostringstream os;
      os << "enroll: " << (single ? "" : "new user " + std::to_string(u) + ": ") << factorised
         << " is numerically rank deficient (sigma_min/sigma_max = "
         << static_cast<double>(ratio[u]) << ", tolerance " << tol
         << "); A_new must have full column rank l = " << l
         << (procrustes(method) ? " and A_new^T Z must be nonsingular" : "");
      throw InvalidInput(os.str());
    }
  if (!p.all_finite(G.data(), G.size()))
    throw NumericalError(
        "enroll: the computed G_new contain NaN or Inf although A_new passed "
        "validation (overflow? rescale the anchors)");

  const auto res = p.residuals(A, StackView<const T>(G), Z);
  const auto orth = p.orthogonality_errors(StackView<const T>(G));
  const double zz = p.sum_squares(Z.data(), a * l);
  for (index_t u = 0; u < k; ++u) {
    r.residual.push_back(static_cast<double>(res[u]));
    r.relative_residual.push_back(zz > 0 ? std::sqrt(static_cast<double>(res[u]) / zz) : 0.0);
    r.orthogonality_error.push_back(static_cast<double>(orth[u]));
    r.rank_ratio.push_back(static_cast<double>(ratio[u]));
  }
  lap("evaluate");
  st.finish();
  if (!st.host()) lap("download");
  return out;
}

// ---- names of the options in model.json

const char* name_of(TargetRotation v) {
  return v == TargetRotation::haar       ? "haar"
         : v == TargetRotation::identity ? "identity"
                                         : "supplied";
}
const char* name_of(RightFactor v) {
  return v == RightFactor::identity  ? "identity"
         : v == RightFactor::uniform ? "uniform"
                                     : "supplied";
}
const char* name_of(KawakamiForm v) { return v == KawakamiForm::qr_svd ? "qr-svd" : "eigen"; }
const char* name_of(GoppInit v) { return v == GoppInit::spectral ? "spectral" : "odc"; }

Json svd_json(const SvdOptions& s) {
  Json j;
  j["algorithm"] = to_string(s.algorithm);
  j["oversampling"] = s.oversampling;
  j["power_iterations"] = s.power_iterations;
  j["seed"] = s.seed;
  return j;
}

/// The keys of the "options" object of each method; a model must have exactly these.
const std::vector<std::string>& option_keys(Method m) { return core::method_info(m).model_keys; }

std::string key_list(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
  return "{" + s + "}";
}

/// Typed access to model.json with errors that name the file and the key.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw IoError("model file '" + file_ + "': " + what);
  }
  const Json& at(const Json& obj, const std::string& key, const std::string& where) const {
    const auto it = obj.find(key);
    if (it == obj.end()) fail("missing key '" + where + key + "'");
    return *it;
  }
  std::string str(const Json& obj, const std::string& key, const std::string& where = "") const {
    const Json& v = at(obj, key, where);
    if (!v.is_string()) fail("key '" + where + key + "' must be a string, found " + v.dump());
    return v.get<std::string>();
  }
  index_t integer(const Json& obj, const std::string& key, index_t min,
                  const std::string& where = "") const {
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
  std::uint64_t u64(const Json& obj, const std::string& key, const std::string& where = "") const {
    const Json& v = at(obj, key, where);
    if (!v.is_number_unsigned())
      fail("key '" + where + key + "' must be a non-negative integer, found " + v.dump());
    return v.get<std::uint64_t>();
  }
  double number(const Json& obj, const std::string& key, const std::string& where = "") const {
    const Json& v = at(obj, key, where);
    if (!v.is_number()) fail("key '" + where + key + "' must be a number, found " + v.dump());
    return v.get<double>();
  }
  bool boolean(const Json& obj, const std::string& key, const std::string& where = "") const {
    const Json& v = at(obj, key, where);
    if (!v.is_boolean()) fail("key '" + where + key + "' must be true or false, found " + v.dump());
    return v.get<bool>();
  }
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
  void exact_keys(const Json& obj, const std::vector<std::string>& keys, const std::string& what,
                  const std::string& hint = "") const {
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
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

const std::vector<std::string> kTopKeys = {
    "format", "format_version", "dcalign_version", "method",         "precision", "anchor_rows",
    "dim",    "users",          "enrolment",       "rank_tolerance", "target",    "options"};

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

fs::path model_dir(const std::string& dir) {
  fs::path d(dir);
  if (!d.has_filename()) d = d.parent_path();  // "M/" names M
  return d;
}

/// model.json of the model `dir`, parsed, with its format marker checked.
Json read_model_json(const std::string& dir, const std::string& file) {
  const Reader in(file);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw IoError("cannot load model '" + dir + "': '" + file +
                  (fs::exists(file, ec) ? "' is not a regular file" : "' does not exist") +
                  " (a model is a directory holding model.json and target.npy)");
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
  if (!j.contains("format") || j["format"] != kFormatName)
    in.fail(std::string("not a dcalign model: expected \"format\": \"") + kFormatName + "\"");
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
  const char* expected = procrustes(method) ? "procrustes" : "least_squares";
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
  AlignOptions& opts = m.opts;
  const auto read_svd = [&] {
    const Json& s = o["svd"];
    in.exact_keys(s, {"algorithm", "oversampling", "power_iterations", "seed"}, "'options.svd'");
    opts.svd.algorithm = in.choice(s, "algorithm", parse_svd_algorithm, "options.svd.");
    opts.svd.oversampling = in.integer(s, "oversampling", 0, "options.svd.");
    opts.svd.power_iterations =
        static_cast<int>(in.integer(s, "power_iterations", 0, "options.svd."));
    opts.svd.seed = in.u64(s, "seed", "options.svd.");
  };
  const std::string w = "options.";
  switch (method) {
    case Method::odc:
    case Method::gopp:
      opts.reference_user = in.integer(o, "reference_user", 0, w);
      opts.rotation = in.choice(o, "rotation", parse_target_rotation, w);
      opts.seed = in.u64(o, "seed", w);
      opts.polar = in.choice(o, "polar", parse_polar_method, w);
      if (method == Method::odc) {
        const std::string target = in.str(o, "target", w);
        if (target != "reference" && target != "explicit")
          in.fail("key 'options.target' must be \"reference\" or \"explicit\"");
        m.explicit_target = target == "explicit";
      } else {
        opts.gopp_init = in.choice(o, "init", parse_gopp_init, w);
        read_svd();
        opts.gopp_tolerance = in.number(o, "tolerance", w);
        opts.gopp_max_iterations = in.integer(o, "max_iterations", 1, w);
        m.iterations = in.integer(o, "iterations", 0, w);
        m.converged = in.boolean(o, "converged", w);
      }
      break;
    case Method::imakura:
      opts.right = in.choice(o, "right", parse_right_factor, w);
      opts.seed = in.u64(o, "seed", w);
      read_svd();
      break;
    case Method::kawakami:
      opts.kawakami_form = in.choice(o, "form", parse_kawakami_form, w);
      read_svd();
      break;
    case Method::opp:
      read_svd();
      opts.polar = in.choice(o, "polar", parse_polar_method, w);
      break;
    case Method::rdp_ls:
    case Method::rdp_opp:
      opts.rdp_eta = in.number(o, "eta", w);
      opts.rdp_gradient_tolerance = in.number(o, "gradient_tolerance", w);
      opts.rdp_max_iterations = in.integer(o, "max_iterations", 1, w);
      opts.rdp_memory = in.integer(o, "memory", 1, w);
      read_svd();
      opts.polar = in.choice(o, "polar", parse_polar_method, w);
      m.iterations = in.integer(o, "iterations", 0, w);
      m.converged = in.boolean(o, "converged", w);
      break;
  }
  return m;
}

// ---- atomic save

void fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), O_RDONLY | (directory ? O_DIRECTORY : 0));
  if (fd < 0) {
    if (directory) return;  // best effort: some file systems do not open directories
    throw IoError("cannot open '" + p.string() + "' to flush it: " + std::strerror(errno));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !directory)
    throw IoError("cannot flush '" + p.string() + "' to disk: " + std::strerror(err));
}

/// A name in `parent` that no other save (thread or process) uses.
fs::path sibling(const fs::path& parent, const fs::path& name, const char* tag) {
  static std::atomic<unsigned long> counter{0};
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return parent / ("." + name.string() + "." + tag + "-" + std::to_string(::getpid()) + "-" +
                   std::to_string(counter++) + "-" + std::to_string(ticks));
}

/// Moves the complete directory `tmp` to `dest`. An existing model is swapped with the new one
/// in one step (renameat2 RENAME_EXCHANGE); where the file system cannot, it is moved aside
/// first, so `dest` is always either the old or the new complete model, or briefly absent.
void publish(const fs::path& tmp, const fs::path& dest, bool replace) {
  const auto fail = [&](const std::string& what, int err) {
    throw IoError("cannot save model to '" + dest.string() + "': " + what + " (" +
                  std::strerror(err) + ")");
  };
  if (!replace) {
    if (::rename(tmp.c_str(), dest.c_str()) != 0) fail("rename into place failed", errno);
    return;
  }
  std::error_code ec;
#ifdef SYS_renameat2
  if (::syscall(SYS_renameat2, AT_FDCWD, tmp.c_str(), AT_FDCWD, dest.c_str(), RENAME_EXCHANGE) ==
      0) {
    fs::remove_all(tmp, ec);  // now the old model; a leftover is harmless
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != EOPNOTSUPP)
    fail("atomic exchange with the existing model failed", errno);
#endif
  const fs::path old = sibling(dest.parent_path(), dest.filename(), "old");
  if (::rename(dest.c_str(), old.c_str()) != 0) fail("cannot move the existing model aside", errno);
  if (::rename(tmp.c_str(), dest.c_str()) != 0) {
    const int err = errno;
    ::rename(old.c_str(), dest.c_str());
    fail("rename into place failed", err);
  }
  fs::remove_all(old, ec);
}

}  // namespace

// ---- EnrolmentReport

void EnrolmentReport::add_phase(const std::string& name, double s) {
  seconds.emplace_back(name, s);
  total_seconds += s;
}

std::string EnrolmentReport::to_json(int indent) const {
  Json j;
  j["method"] = method;
  j["device"] = device;
  j["precision"] = precision;
  j["users"] = users;
  j["anchor_rows"] = anchor_rows;
  j["dim"] = dim;
  j["fitted_users"] = fitted_users;
  j["residual"] = residual;
  j["relative_residual"] = relative_residual;
  j["orthogonality_error"] = orthogonality_error;
  j["rank_ratio"] = rank_ratio;
  Json s = Json::object();
  for (const auto& [name, sec] : seconds) s[name] = sec;
  s["total"] = total_seconds;
  j["seconds"] = s;
  return j.dump(indent);
}

ModelInfo read_model_info(const std::string& dir) { return parse_model(dir).info; }

void check_model_destination(const std::string& dir) {
  const fs::path dest = model_dir(dir);
  const auto refuse = [&](const std::string& why) {
    throw IoError("cannot save model to '" + dir + "': " + why +
                  "; it is not a dcalign model directory, and only a dcalign model directory "
                  "(model.json with \"format\": \"" +
                  kFormatName + "\", and target.npy, nothing else) is replaced. Choose a new " +
                  "name or remove it yourself");
  };
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dest, ec);
  if (st.type() == fs::file_type::not_found) return;
  if (st.type() == fs::file_type::symlink) refuse("it is a symbolic link");
  if (st.type() != fs::file_type::directory) refuse("it exists and is not a directory");
  for (const auto& e : fs::directory_iterator(dest, ec)) {
    const std::string name = e.path().filename().string();
    if (name != kJsonFile && name != kTargetFile)
      refuse("it holds '" + name + "', which is not part of a model");
    if (!e.is_regular_file(ec) || e.is_symlink(ec))
      refuse("its '" + name + "' is not a regular file");
  }
  if (ec) refuse("it cannot be listed (" + ec.message() + ")");
  if (!fs::exists(dest / kJsonFile, ec)) refuse("it has no model.json");
  Json j;
  try {
    j = read_model_json(dir, (dest / kJsonFile).string());
  } catch (const IoError& e) {
    refuse(std::string("it is not a dcalign model (") + e.what() + ")");
  }
  if (!j.contains("format_version") || !j["format_version"].is_number_integer())
    refuse("its model.json has no integer \"format_version\"");
}

// ---- Aligner

template <typename T>
void Aligner<T>::require_fitted(const char* what) const {
  if (!fitted())
    throw InvalidInput(std::string("Aligner::") + what +
                       ": the aligner is not fitted; call fit() or load() first");
}

template <typename T>
Alignment<T> Aligner<T>::fit(const Stack<T>& anchors, const AlignOptions& opts, Backend& backend) {
  Alignment<T> res = align(anchors, opts, backend);
  // A method without a target (Kawakami-DC) enrols against the mean of the aligned anchors.
  Matrix<T> Z = !core::method_info(opts.method).has_target
                    ? mean_aligned(backend.primitives<T>(), anchors, res.G)
                    : res.target;
  // Commit only once everything succeeded: a failed fit leaves the aligner as it was.
  opts_ = opts;
  rank_tolerance_ = opts.rank_tolerance >= 0
                        ? opts.rank_tolerance
                        : static_cast<double>(anchors.cols()) * std::numeric_limits<T>::epsilon();
  opts_.rank_tolerance = rank_tolerance_;
  target_ = std::move(Z);
  users_ = anchors.count();
  explicit_target_ = opts.method == Method::odc && opts.target.size() > 0;
  iterations_ = res.report.iterations;
  converged_ = res.report.converged;
  return res;
}

template <typename T>
Alignment<T> Aligner<T>::fit(const Stack<T>& anchors, const AlignOptions& opts) {
  auto backend = make_backend(Device::cpu);
  return fit(anchors, opts, *backend);
}

template <typename T>
BatchEnrolment<T> Aligner<T>::enroll(const Stack<T>& A_new, Backend& backend) const {
  require_fitted("enroll");
  return enroll_impl(*this, A_new.view(), backend, false);
}

template <typename T>
BatchEnrolment<T> Aligner<T>::enroll(const Stack<T>& A_new) const {
  auto backend = make_backend(Device::cpu);
  return enroll(A_new, *backend);
}

template <typename T>
Enrolment<T> Aligner<T>::enroll(const Matrix<T>& A_new, Backend& backend) const {
  require_fitted("enroll");
  // The matrix seen as a stack of one: no copy of A_new.
  BatchEnrolment<T> b = enroll_impl(
      *this, StackView<const T>(A_new.data(), 1, A_new.rows(), A_new.cols()), backend, true);
  return {b.G.matrix(0), std::move(b.report)};
}

template <typename T>
Enrolment<T> Aligner<T>::enroll(const Matrix<T>& A_new) const {
  auto backend = make_backend(Device::cpu);
  return enroll(A_new, *backend);
}

template <typename T>
void Aligner<T>::save(const std::string& dir) const {
  require_fitted("save");
  const fs::path dest = model_dir(dir);
  if (dest.empty() || dest.filename() == "." || dest.filename() == "..")
    throw IoError("cannot save model to '" + dir + "': not a directory name");
  fs::path parent = dest.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    throw IoError("cannot save model to '" + dir + "': the directory '" + parent.string() +
                  "' does not exist");
  check_model_destination(dir);
  const bool replace = fs::symlink_status(dest, ec).type() != fs::file_type::not_found;

  Json j;
  j["format"] = kFormatName;
  j["format_version"] = kModelFormatVersion;
  j["dcalign_version"] = DCALIGN_VERSION_STRING;
  j["method"] = to_string(opts_.method);
  j["precision"] = precision_name<T>();
  j["anchor_rows"] = anchor_rows();
  j["dim"] = dim();
  j["users"] = users_;
  j["enrolment"] = procrustes(opts_.method) ? "procrustes" : "least_squares";
  j["rank_tolerance"] = rank_tolerance_;
  j["target"] = {{"file", kTargetFile}, {"shape", {anchor_rows(), dim()}}};
  Json o;
  switch (opts_.method) {
    case Method::odc:
      o["target"] = explicit_target_ ? "explicit" : "reference";
      o["reference_user"] = opts_.reference_user;
      o["rotation"] = name_of(opts_.rotation);
      o["seed"] = opts_.seed;
      o["polar"] = to_string(opts_.polar);
      break;
    case Method::gopp:
      o["init"] = name_of(opts_.gopp_init);
      o["reference_user"] = opts_.reference_user;
      o["rotation"] = name_of(opts_.rotation);
      o["seed"] = opts_.seed;
      o["svd"] = svd_json(opts_.svd);
      o["tolerance"] = opts_.gopp_tolerance;
      o["max_iterations"] = opts_.gopp_max_iterations;
      o["iterations"] = iterations_;
      o["converged"] = converged_;
      o["polar"] = to_string(opts_.polar);
      break;
    case Method::imakura:
      o["right"] = name_of(opts_.right);
      o["seed"] = opts_.seed;
      o["svd"] = svd_json(opts_.svd);
      break;
    case Method::kawakami:
      o["form"] = name_of(opts_.kawakami_form);
      o["svd"] = svd_json(opts_.svd);
      break;
    case Method::opp:
      o["svd"] = svd_json(opts_.svd);
      o["polar"] = to_string(opts_.polar);
      break;
    case Method::rdp_ls:
    case Method::rdp_opp:
      o["eta"] = opts_.rdp_eta;
      o["gradient_tolerance"] = opts_.rdp_gradient_tolerance;
      o["max_iterations"] = opts_.rdp_max_iterations;
      o["memory"] = opts_.rdp_memory;
      o["svd"] = svd_json(opts_.svd);
      o["polar"] = to_string(opts_.polar);
      o["iterations"] = iterations_;
      o["converged"] = converged_;
      break;
  }
  j["options"] = o;

  // The whole directory is written under a temporary name beside `dest`, then renamed.
  const fs::path tmp = sibling(parent, dest.filename(), "tmp");
  if (!fs::create_directory(tmp, ec))
    throw IoError("cannot save model to '" + dir + "': cannot create the temporary directory '" +
                  tmp.string() + "' (" + ec.message() + ")");
  io::register_temporary(tmp.string(), true);
  try {
    const fs::path json_path = tmp / kJsonFile, target_path = tmp / kTargetFile;
    {
      std::ofstream f(json_path, std::ios::binary | std::ios::trunc);
      f << j.dump(2) << "\n";
      f.close();
      if (!f) throw IoError("cannot write '" + json_path.string() + "'");
    }
    write_npy<T>(target_path.string(), target_.view());
    fsync_path(json_path, false);
    fsync_path(target_path, false);
    fsync_path(tmp, true);
    publish(tmp, dest, replace);
    io::forget_temporary(tmp.string());
    fsync_path(parent, true);
  } catch (const Error& e) {
    fs::remove_all(tmp, ec);
    io::forget_temporary(tmp.string());
    throw IoError("cannot save model to '" + dir + "': " + e.what() + " (nothing was changed at '" +
                  dir + "')");
  }
}

template <typename T>
Aligner<T> Aligner<T>::load(const std::string& dir) {
  const Parsed m = parse_model(dir);
  const std::string npy = (model_dir(dir) / m.target_file).string();
  if (m.info.precision != precision_name<T>())
    throw InvalidInput("model '" + dir + "' holds " + m.info.precision + " matrices; load it as " +
                       (m.info.precision == "float32" ? "Aligner<float>" : "Aligner<double>") +
                       ", not " +
                       (std::is_same_v<T, float> ? "Aligner<float>" : "Aligner<double>"));
  const NpyHeader h = read_npy_header(npy);
  const DType want = std::is_same_v<T, float> ? DType::float32 : DType::float64;
  std::string shape;
  for (index_t s : h.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(s);
  if (h.shape.size() != 2 || h.shape[0] != m.info.anchor_rows || h.shape[1] != m.info.dim)
    throw IoError("model file '" + npy + "' has shape (" + shape + ") but model.json says the " +
                  "target is (anchor_rows, dim) = (" + std::to_string(m.info.anchor_rows) + ", " +
                  std::to_string(m.info.dim) + ")");
  if (h.dtype != want)
    throw IoError("model file '" + npy + "' holds " +
                  (h.dtype == DType::float32 ? "float32" : "float64") +
                  " values but model.json says the precision is " + m.info.precision);
  Matrix<T> Z = read_npy_matrix<T>(npy);
  for (index_t jj = 0; jj < Z.cols(); ++jj)
    for (index_t i = 0; i < Z.rows(); ++i)
      if (!std::isfinite(Z(i, jj)))
        throw IoError("model file '" + npy + "' has a non-finite value at row " +
                      std::to_string(i) + ", column " + std::to_string(jj) + " (corrupt model)");
  Aligner out;
  out.opts_ = m.opts;
  out.target_ = std::move(Z);
  out.users_ = m.info.users;
  out.rank_tolerance_ = m.rank_tolerance;
  out.explicit_target_ = m.explicit_target;
  out.iterations_ = m.iterations;
  out.converged_ = m.converged;
  return out;
}

template class Aligner<float>;
template class Aligner<double>;

}  // namespace dcalign
