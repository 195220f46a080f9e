#include "sweep/sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <set>
#include <sstream>

namespace dcalign::bench {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

long parse_positive(const std::string& text, const std::string& spec) {
  const std::string t = trim(text);
  if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("value list '" + spec + "': '" + t + "' is not a positive integer");
  errno = 0;
  const long v = std::strtol(t.c_str(), nullptr, 10);
  if (errno == ERANGE || v <= 0)
    throw UsageError("value list '" + spec + "': '" + t + "' is not a positive integer");
  return v;
}

// The peers implement the paper's procedures; GOPP has no plain NumPy version to compare with.
bool peer_has_method(const std::string& method) { return method != "gopp"; }

}  // namespace

std::vector<long> parse_values(const std::string& spec) {
  std::vector<long> out;
  for (const auto& item : split_list(spec)) {
    const auto c1 = item.find(':');
    if (c1 == std::string::npos) {
      out.push_back(parse_positive(item, spec));
      continue;
    }
    const auto c2 = item.find(':', c1 + 1);
    if (c2 == std::string::npos || item.find(':', c2 + 1) != std::string::npos)
      throw UsageError("value list '" + spec + "': range '" + item +
                       "' must be start:step:stop (e.g. 50:50:950)");
    const long start = parse_positive(item.substr(0, c1), spec);
    const long step = parse_positive(item.substr(c1 + 1, c2 - c1 - 1), spec);
    const long stop = parse_positive(item.substr(c2 + 1), spec);
    if (stop < start)
      throw UsageError("value list '" + spec + "': range '" + item + "' ends before it starts");
    for (long v = start; v <= stop; v += step) out.push_back(v);
  }
  std::set<long> seen;
  for (long v : out)
    if (!seen.insert(v).second)
      throw UsageError("value list '" + spec + "': " + std::to_string(v) + " appears twice");
  return out;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) throw UsageError("list '" + s + "' has an empty item");
    out.push_back(item);
  }
  if (out.empty()) throw UsageError("empty list");
  return out;
}

std::string Series::key() const { return impl + "/" + method + "/" + backend + "/" + precision; }

Shape SweepConfig::shape_at(long x) const {
  Shape s{a, l, c};
  if (sweep == "a") s.a = x;
  if (sweep == "l") s.l = x;
  if (sweep == "c") s.c = x;
  return s;
}

std::string peer_backend(const std::string& peer) { return peer == "torch" ? "cuda" : "cpu"; }

std::vector<Series> SweepConfig::series() const {
  std::vector<Series> out;
  for (const auto& b : backends)
    for (const auto& m : methods)
      for (const auto& p : precisions) out.push_back({"dcalign", m, b, p});
  for (const auto& peer : peers)
    for (const auto& m : methods)
      if (peer_has_method(m))
        for (const auto& p : precisions) out.push_back({peer, m, peer_backend(peer), p});
  return out;
}

json SweepConfig::parameters() const {
  json p;
  p["sweep"] = sweep;
  p["values"] = values;
  json fixed;
  if (sweep != "a") fixed["a"] = a;
  if (sweep != "l") fixed["l"] = l;
  if (sweep != "c") fixed["c"] = c;
  p["fixed"] = fixed;
  p["methods"] = methods;
  p["precisions"] = precisions;
  p["backends"] = backends;
  p["peers"] = peers;
  p["warmup"] = warmup;
  p["repetitions"] = repetitions;
  p["seed"] = seed;
  p["threads"] = threads;
  p["max_seconds"] = max_seconds;
  p["svd"] = {{"algorithm", svd},
              {"oversampling", oversampling},
              {"power_iterations", power_iterations},
              {"applies_to", {"imakura", "kawakami", "gopp"}}};
  p["polar"] = {{"method", polar}, {"applies_to", {"odc", "gopp"}}};
  p["anchors"] = "uniform [0,1), generated once per point from the seed and the point";
  p["timed"] =
      "dcalign: one align() call with evaluate=false; peers: their procedure, anchors excluded";
  return p;
}

void SweepConfig::validate() const {
  if (sweep != "a" && sweep != "l" && sweep != "c")
    throw UsageError("--sweep must be a, l or c (got '" + sweep + "')");
  if (values.empty()) throw UsageError("no values to sweep");
  for (const auto& m : methods)
    if (m != "odc" && m != "imakura" && m != "kawakami" && m != "gopp")
      throw UsageError("unknown method '" + m + "'; expected odc, imakura, kawakami, gopp");
  for (const auto& p : precisions)
    if (p != "float64" && p != "float32")
      throw UsageError("unknown precision '" + p + "'; expected float64, float32");
  for (const auto& b : backends)
    if (b != "cpu" && b != "cuda")
      throw UsageError("unknown backend '" + b + "'; expected cpu, cuda");
  for (const auto& p : peers)
    if (p != "numpy" && p != "torch")
      throw UsageError("unknown peer '" + p + "'; expected numpy, torch (or none)");
  if (warmup < 0) throw UsageError("--warmup must be >= 0");
  if (repetitions < 1) throw UsageError("--repetitions must be >= 1");
  if (threads < 1) throw UsageError("--threads must be >= 1 after resolution");
  if (!(max_seconds >= 0)) throw UsageError("--max-seconds must be >= 0");
  if (svd != "randomized" && svd != "exact") throw UsageError("--svd must be randomized or exact");
  if (polar != "auto" && polar != "svd" && polar != "iterative")
    throw UsageError("--polar must be auto, svd or iterative");
  if (oversampling < 0 || power_iterations < 0)
    throw UsageError("--oversampling and --power-iterations must be >= 0");
  for (long x : values) {
    const Shape s = shape_at(x);
    if (s.l > s.a)
      throw UsageError("point " + sweep + "=" + std::to_string(x) +
                       " has l = " + std::to_string(s.l) + " > a = " + std::to_string(s.a) +
                       "; every A_i must be a x l with l <= a");
  }
}

SweepConfig paper_defaults(const std::string& sweep) {
  SweepConfig cfg;
  cfg.sweep = sweep;
  // Table 5 of paper 001.
  if (sweep == "l") {
    cfg.values = parse_values("50:50:950");
    cfg.a = 1000, cfg.c = 50;
  } else if (sweep == "a") {
    cfg.values = parse_values("1000:1000:20000");
    cfg.l = 50, cfg.c = 50;
  } else if (sweep == "c") {
    cfg.values = parse_values("50:50:1000");
    cfg.a = 1000, cfg.l = 50;
  } else {
    throw UsageError("--sweep must be a, l or c (got '" + sweep + "')");
  }
  return cfg;
}

Stats summarize(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("summarize: no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  Stats s;
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

json make_result(const Series& s, const std::vector<double>& warmup,
                 const std::vector<double>& seconds) {
  json r;
  r["impl"] = s.impl;
  r["method"] = s.method;
  r["backend"] = s.backend;
  r["precision"] = s.precision;
  r["status"] = "ok";
  const Stats st = summarize(seconds);
  r["median"] = st.median;
  r["min"] = st.min;
  r["max"] = st.max;
  r["seconds"] = seconds;
  r["warmup_seconds"] = warmup;
  return r;
}

json make_failed(const Series& s, const std::string& status, const std::string& reason) {
  json r;
  r["impl"] = s.impl;
  r["method"] = s.method;
  r["backend"] = s.backend;
  r["precision"] = s.precision;
  r["status"] = status;
  r["reason"] = reason;
  return r;
}

SweepDoc::SweepDoc(const SweepConfig& cfg, json machine) : cfg_(cfg) {
  doc_["schema"] = kSchema;
  doc_["parameters"] = cfg.parameters();
  doc_["machine"] = std::move(machine);
  doc_["sessions"] = json::array();
  doc_["complete"] = false;
  doc_["points"] = json::array();
}

SweepDoc SweepDoc::resume(const SweepConfig& cfg, json existing, json machine) {
  if (!existing.is_object() || existing.value("schema", "") != std::string(kSchema) ||
      !existing.contains("parameters") || !existing.contains("points") ||
      !existing["points"].is_array())
    throw ResumeMismatch("not a " + std::string(kSchema) + " document");
  json want = cfg.parameters(), have = existing["parameters"];
  want.erase("values");
  if (have.is_object()) have.erase("values");
  std::vector<std::string> diffs;
  for (const auto& [k, v] : want.items()) {
    if (!have.contains(k))
      diffs.push_back(k + " (missing in the file)");
    else if (have[k] != v)
      diffs.push_back(k + ": file has " + have[k].dump() + ", requested " + v.dump());
  }
  if (have.is_object())
    for (const auto& [k, v] : have.items())
      if (!want.contains(k)) diffs.push_back(k + " (only in the file)");
  if (!diffs.empty()) {
    std::string msg = "parameters differ from the existing file:";
    for (const auto& d : diffs) msg += "\n  " + d;
    throw ResumeMismatch(msg);
  }
  SweepDoc d;
  d.cfg_ = cfg;
  d.doc_ = std::move(existing);
  // The value list may have grown or changed; the file records the latest one. The machine is
  // that of the latest session (each session also records its own load average).
  d.doc_["parameters"]["values"] = cfg.values;
  if (!d.doc_.contains("sessions")) d.doc_["sessions"] = json::array();
  if (!machine.is_null()) d.doc_["machine"] = std::move(machine);
  return d;
}

const json* SweepDoc::find_point(long x) const {
  for (const auto& p : doc_["points"])
    if (p.value("x", -1L) == x) return &p;
  return nullptr;
}

bool SweepDoc::has_point(long x) const { return find_point(x) != nullptr; }

bool SweepDoc::all_present() const {
  for (long x : cfg_.values)
    if (!has_point(x)) return false;
  return true;
}

std::vector<long> SweepDoc::pending() const {
  std::vector<long> out;
  for (long x : cfg_.values) {
    const json* p = find_point(x);
    if (!p || (redo_above_ >= 0 && p->value("other_cpu_fraction", 0.0) > redo_above_))
      out.push_back(x);
  }
  return out;
}

std::string SweepDoc::cap_reason(const Series& s, long x) const {
  if (cfg_.max_seconds <= 0) return "";
  for (const auto& p : doc_["points"]) {
    const long px = p.value("x", -1L);
    if (px >= x) continue;
    for (const auto& r : p["results"]) {
      if (r.value("impl", "") != s.impl || r.value("method", "") != s.method ||
          r.value("backend", "") != s.backend || r.value("precision", "") != s.precision ||
          r.value("status", "") != "ok")
        continue;
      const double med = r.value("median", 0.0);
      if (med > cfg_.max_seconds) {
        std::ostringstream os;
        os << "median " << med << " s at " << cfg_.sweep << " = " << px
           << " exceeded --max-seconds " << cfg_.max_seconds;
        return os.str();
      }
    }
  }
  return "";
}

void SweepDoc::add_point(long x, std::vector<json> results, const json& extra) {
  const Shape s = cfg_.shape_at(x);
  json p;
  p["x"] = x;
  p["a"] = s.a;
  p["l"] = s.l;
  p["c"] = s.c;
  for (const auto& [k, v] : extra.items()) p[k] = v;
  p["results"] = std::move(results);
  auto& pts = doc_["points"];
  for (auto old = pts.begin(); old != pts.end(); ++old)
    if (old->value("x", -1L) == x) {
      pts.erase(old);
      break;
    }
  auto it = pts.begin();
  while (it != pts.end() && it->value("x", -1L) < x) ++it;
  pts.insert(it, std::move(p));
}

void SweepDoc::begin_session(const json& session) { doc_["sessions"].push_back(session); }

void SweepDoc::end_session(const json& fields) {
  if (doc_["sessions"].empty()) return;
  for (const auto& [k, v] : fields.items()) doc_["sessions"].back()[k] = v;
}

void SweepDoc::set_complete(bool complete) { doc_["complete"] = complete; }

std::string SweepDoc::csv() const {
  std::ostringstream os;
  os << std::setprecision(9);
  os << "sweep,x,a,l,c,impl,method,backend,precision,status,repetitions,median_s,min_s,max_s,"
        "load1_start,reason\n";
  for (const auto& p : doc_["points"]) {
    std::string load = "";
    if (p.contains("load_average_start") && p["load_average_start"].is_array() &&
        !p["load_average_start"].empty()) {
      std::ostringstream l;
      l << p["load_average_start"][0].get<double>();
      load = l.str();
    }
    for (const auto& r : p["results"]) {
      std::string reason = r.value("reason", "");
      // CSV quoting: double the quotes inside a quoted field.
      std::string q = "\"";
      for (char ch : reason) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
      q += "\"";
      os << cfg_.sweep << ',' << p["x"].get<long>() << ',' << p["a"].get<long>() << ','
         << p["l"].get<long>() << ',' << p["c"].get<long>() << ',' << r.value("impl", "") << ','
         << r.value("method", "") << ',' << r.value("backend", "") << ','
         << r.value("precision", "") << ',' << r.value("status", "") << ',';
      if (r.value("status", "") == "ok")
        os << r["seconds"].size() << ',' << r["median"].get<double>() << ','
           << r["min"].get<double>() << ',' << r["max"].get<double>();
      else
        os << ",,,";
      os << ',' << load << ',' << (reason.empty() ? "" : q) << '\n';
    }
  }
  return os.str();
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
    f << content;
    f.flush();
    if (!f) throw std::runtime_error("write to " + tmp + " failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + why);
  }
}

json read_document(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw ResumeMismatch("cannot read " + path);
  json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ResumeMismatch(path + " is not valid JSON");
  return j;
}

std::string format_duration(double seconds) {
  long s = std::lround(std::max(0.0, seconds));
  std::ostringstream os;
  os << s / 3600 << ':' << std::setw(2) << std::setfill('0') << (s / 60) % 60 << ':' << std::setw(2)
     << std::setfill('0') << s % 60;
  return os.str();
}

int run_sweep(SweepDoc& doc, const SweepConfig& cfg, const std::vector<Runner*>& runners,
              const std::string& json_path, const std::string& csv_path, std::ostream& log,
              const LoopHooks& hooks) {
  const auto pending = doc.pending();
  const size_t total = cfg.values.size();
  const size_t done_before = total - pending.size();
  const double t_start = hooks.clock();
  double last_point = 0;
  int measured = 0;
  if (done_before > 0)
    log << "[sweep] resuming: " << done_before << " of " << total
        << " points already in the file\n";
  auto save = [&] {
    write_file_atomic(json_path, doc.doc().dump(1) + "\n");
    if (!csv_path.empty()) write_file_atomic(csv_path, doc.csv());
  };
  for (size_t i = 0; i < pending.size(); ++i) {
    const long x = pending[i];
    const Shape shape = cfg.shape_at(x);
    log << "[sweep] point " << done_before + i + 1 << " of " << total << ": " << cfg.sweep << " = "
        << x << " (a, l, c) = (" << shape.a << ", " << shape.l << ", " << shape.c << ")\n";
    log.flush();
    json extra = hooks.before_point ? hooks.before_point() : json::object();
    const double t0 = hooks.clock();
    std::vector<json> results;
    for (Runner* runner : runners) {
      std::vector<Series> todo;
      for (const auto& s : cfg.series()) {
        if (!runner->handles(s)) continue;
        const std::string why = doc.cap_reason(s, x);
        if (why.empty())
          todo.push_back(s);
        else
          results.push_back(make_failed(s, "skipped", why));
      }
      if (todo.empty()) continue;
      for (auto& r : runner->run(shape, todo)) {
        if (r.value("status", "") == "ok")
          log << "  " << r["impl"].get<std::string>() << "/" << r["method"].get<std::string>()
              << "/" << r["backend"].get<std::string>() << "/" << r["precision"].get<std::string>()
              << ": median " << r["median"].get<double>() << " s (min " << r["min"].get<double>()
              << ", max " << r["max"].get<double>() << ")\n";
        else
          log << "  " << r.value("impl", "?") << "/" << r.value("method", "?") << ": "
              << r.value("status", "?") << ": " << r.value("reason", "") << "\n";
        results.push_back(std::move(r));
      }
    }
    json after = hooks.after_point ? hooks.after_point() : json::object();
    for (const auto& [k, v] : after.items()) extra[k] = v;
    last_point = hooks.clock() - t0;
    extra["wall_seconds"] = last_point;
    doc.add_point(x, std::move(results), extra);
    ++measured;
    doc.set_complete(doc.all_present());
    save();
    const double elapsed = hooks.clock() - t_start;
    const size_t left = pending.size() - i - 1;
    log << "[sweep] point " << done_before + i + 1 << " of " << total << " done in "
        << format_duration(last_point) << "; elapsed " << format_duration(elapsed);
    if (extra.contains("other_cpu_fraction"))
      log << "; other processes used " << std::setprecision(2)
          << extra["other_cpu_fraction"].get<double>() * 100 << std::setprecision(6)
          << "% of the CPUs";
    if (left > 0)
      // A rough estimate: points usually grow along a sweep (more left), while series that hit
      // the time cap drop out (less left).
      log << "; " << left << " left, about " << format_duration(last_point * left)
          << " at the last point's pace";
    log << "\n";
    log.flush();
  }
  doc.set_complete(doc.all_present());
  save();
  return measured;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string utc_timestamp() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace dcalign::bench
