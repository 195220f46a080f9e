// bm_service_load's shared parts (bench/service/load_common.hpp).
#include "load_common.hpp"

namespace dcalign::bench_service_load {

SteadyClock::time_point g_start;
SteadyClock::time_point g_deadline;
std::atomic<bool> g_abort{false};
std::string g_abort_reason;
std::mutex g_abort_mu;

/// Seconds since the benchmark started (steady clock).
double now_s() { return std::chrono::duration<double>(SteadyClock::now() - g_start).count(); }
/// The system clock in seconds since the epoch (the server log's "ts").
double epoch_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
double remaining_s() {
  return std::chrono::duration<double>(g_deadline - SteadyClock::now()).count();
}
void abort_run(const std::string& why) {
  std::lock_guard<std::mutex> lock(g_abort_mu);
  if (!g_abort.exchange(true)) g_abort_reason = why;
}
bool over_time() {
  if (g_abort) return true;
  if (remaining_s() <= 0) abort_run("the --max-seconds limit was reached");
  return g_abort;
}

/// Linear interpolation between order statistics (NumPy's default), q in [0, 1].
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

json summary(const std::vector<double>& v) {
  json j = {{"count", v.size()}};
  if (v.empty()) return j;
  double sum = 0;
  for (double x : v) sum += x;
  j["p50"] = percentile(v, 0.5);
  j["p90"] = percentile(v, 0.9);
  j["p99"] = percentile(v, 0.99);
  j["min"] = *std::min_element(v.begin(), v.end());
  j["max"] = *std::max_element(v.begin(), v.end());
  j["mean"] = sum / static_cast<double>(v.size());
  return j;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string cpu_model() {
  std::istringstream in(read_text("/proc/cpuinfo"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto s = line.substr(colon + 1);
        s.erase(0, s.find_first_not_of(' '));
        return s;
      }
    }
  return "unknown";
}

/// A field of /proc/<pid>/status in bytes (VmHWM, VmRSS, MemTotal of /proc/meminfo), or -1.
long long proc_kib_field(const std::string& file, const std::string& field) {
  std::istringstream in(read_text(file));
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream f(line.substr(field.size() + 1));
      long long kib = -1;
      f >> kib;
      return kib < 0 ? -1 : kib * 1024;
    }
  return -1;
}

json machine_info() {
  utsname u{};
  ::uname(&u);
  std::string load = read_text("/proc/loadavg");
  while (!load.empty() && load.back() == '\n') load.pop_back();
  return {{"cpu_model", cpu_model()},
          {"logical_cpus", std::thread::hardware_concurrency()},
          {"memory_bytes", proc_kib_field("/proc/meminfo", "MemTotal")},
          {"kernel", std::string(u.sysname) + " " + u.release},
          {"loadavg_at_start", load}};
}

bool trains(const Options& o) { return o.model != "none"; }

/// The release of participant `p` of collaboration `k`: i.i.d. N(0, 1), a x l.
Matrix<double> release_matrix(const Options& o, std::uint64_t k, std::uint64_t p, index_t rows,
                              std::uint64_t salt) {
  std::seed_seq seq{static_cast<std::uint64_t>(o.seed), k, p, salt};
  std::mt19937_64 gen(seq);
  std::normal_distribution<double> d;
  Matrix<double> m(rows, o.dim);
  for (index_t i = 0; i < m.size(); ++i) m.data()[i] = d(gen);
  return m;
}

/// The labels of X~_i (rows x 1): regression, X w + 0.1 e (w fixed by the seed, e by the seed,
/// k and p); classification, class indices drawn uniformly from 0..K-1.
Matrix<double> labels_for(const Options& o, std::uint64_t k, std::uint64_t p,
                          const Matrix<double>& X) {
  std::seed_seq seq{static_cast<std::uint64_t>(o.seed), k, p, std::uint64_t{3}};
  std::mt19937_64 gen(seq);
  Matrix<double> y(X.rows(), 1);
  if (o.num_classes > 0) {
    std::uniform_int_distribution<int> d(0, o.num_classes - 1);
    for (index_t r = 0; r < X.rows(); ++r) y(r, 0) = d(gen);
    return y;
  }
  std::vector<double> w(static_cast<std::size_t>(X.cols()));
  {
    std::seed_seq wseq{static_cast<std::uint64_t>(o.seed), std::uint64_t{4}};
    std::mt19937_64 wgen(wseq);
    std::normal_distribution<double> d;
    for (auto& x : w) x = d(wgen);
  }
  std::normal_distribution<double> noise;
  for (index_t r = 0; r < X.rows(); ++r) {
    double v = 0;
    for (index_t c = 0; c < X.cols(); ++c) v += X(r, c) * w[static_cast<std::size_t>(c)];
    y(r, 0) = v + 0.1 * noise(gen);
  }
  return y;
}

v1::CollaborationSpec spec_for(const Options& o, const std::string& name, int participants) {
  v1::CollaborationSpec s;
  s.set_name(name);
  s.set_method("odc");
  s.set_dim(static_cast<std::uint32_t>(o.dim));
  s.mutable_anchor()->set_kind("uniform");
  s.mutable_anchor()->set_rows(static_cast<std::uint64_t>(o.anchor_rows));
  s.mutable_anchor()->set_features(static_cast<std::uint64_t>(o.dim));
  s.mutable_anchor()->set_seed(o.seed);
  for (int i = 0; i < participants; ++i) s.add_participants("p" + std::to_string(i));
  s.set_model(o.model);
  s.set_num_classes(static_cast<std::uint32_t>(o.num_classes));
  s.set_max_rows(static_cast<std::uint64_t>(o.data_rows));
  s.set_seed(o.seed);
  if (o.distributed_ranks > 0)
    s.mutable_distributed()->set_ranks(static_cast<std::uint32_t>(o.distributed_ranks));
  return s;
}

/// The AlignOptions the server derives from spec_for's spec (src/service/spec.cpp).
dcalign::AlignOptions align_options_for(const Options& o) {
  dcalign::AlignOptions a;
  a.method = dcalign::Method::odc;
  a.seed = o.seed;
  a.svd.seed = o.seed ^ 0x5eedULL;  // as every entry point derives the sketch's seed
  return a;
}

dcalign::service::ClientOptions client_options(const Options& o, int port,
                                               const std::string& token) {
  dcalign::service::ClientOptions c;
  c.target = "127.0.0.1:" + std::to_string(port);
  c.token = token;
  c.insecure = true;
  c.deadline_seconds = std::max(1.0, std::min(o.rpc_deadline, remaining_s() + 1));
  c.chunk_bytes = static_cast<std::uint64_t>(o.chunk_bytes);
  return c;
}

/// seconds.total of an alignment report (AlignReport::to_json), or NaN.
double report_total_seconds(const std::string& report_json) {
  const json r = json::parse(report_json, nullptr, false);
  if (r.is_object() && r.contains("seconds") && r["seconds"].is_object() &&
      r["seconds"].contains("total") && r["seconds"]["total"].is_number())
    return r["seconds"]["total"].get<double>();
  return std::nan("");
}

std::map<std::string, JobTimes> job_times_from_log(const fs::path& log) {
  std::map<std::string, JobTimes> jobs;
  std::istringstream in(read_text(log));
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("event") || !j.contains("collaboration")) continue;
    const std::string ev = j.value("event", ""), id = j.value("collaboration", "");
    if (ev == "job_started") jobs[id].started = j.value("ts", std::nan(""));
    if (ev == "job_done") jobs[id].done = j.value("ts", std::nan(""));
  }
  return jobs;
}

void write_json(const std::string& path, const json& j) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

/// Uploads every part participant `p` of `c` sends; true if all went through.
bool upload_release(const Options& o, int port, Recorder& rec, const std::string& id,
                    const std::string& token, const Matrix<double>& anchor,
                    const Matrix<double>* data, const Matrix<double>* labels) {
  dcalign::service::Client client(client_options(o, port, token));
  if (!timed(rec, "Upload(anchor)", [&] { client.upload(id, v1::PART_ANCHOR, anchor); }))
    return false;
  if (data != nullptr &&
      !timed(rec, "Upload(data)", [&] { client.upload(id, v1::PART_DATA, *data); }))
    return false;
  if (labels != nullptr &&
      !timed(rec, "Upload(labels)", [&] { client.upload(id, v1::PART_LABELS, *labels); }))
    return false;
  return true;
}

bool fetch_result(const Options& o, int port, Recorder& rec, const std::string& id,
                  const std::string& token, const fs::path& dest) {
  dcalign::service::Client client(client_options(o, port, token));
  fs::create_directories(dest.parent_path());
  return timed(rec, "Fetch", [&] { client.fetch(id, dest.string()); });
}

}  // namespace dcalign::bench_service_load
