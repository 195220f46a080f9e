// bm_service_load: dcalign-server under the load of many collaborations (bench/README.md,
// "Service load"). Not a test: it measures.
//
// The server runs as a child process on 127.0.0.1 (--insecure-localhost, a fresh data directory,
// --device cpu). Then, with --threads client threads:
//   0. with --quiet-load, it first waits (at most --quiet-wait seconds, polling every 20 s) until
//      the 1-minute load average of /proc/loadavg is below it; the JSON records the wait and the
//      load averages at the start and the end;
//   1. the analyst creates --collaborations collaborations of --participants participants each
//      (ODC, l = --dim, a = --anchor-rows, spec.model = --model, spec.num_classes =
//      --num-classes);
//   2. every participant uploads its anchor A_i (a x l float64) and, when the spec has a model,
//      its data X~_i (--data-rows x l) and labels (--data-rows x 1) - collaboration after
//      collaboration, the threads taking the next participant as they finish one - while the
//      analyst polls GetStatus of every collaboration whose uploads are in, and as soon as a job
//      is done (aligned, and h fitted on the stacked X~_i G_i) its participants fetch their G_i
//      and model/ (fetches go before further uploads);
//   3. --e2e-repetitions times, one collaboration alone on the idle server, create -> uploads ->
//      job done -> all fetches, each followed by the same work in this process: dcalign::align
//      (Stack<double>, the server's AlignOptions: ODC, the spec's seed) and, built with the
//      learning layer, X~_i G_i stacked and learn::make_model(model, {seed, standardize_target =
//      regression})->fit, as the server's job does (src/service/train.cpp);
//   4. the server's peak RSS (VmHWM of /proc/<pid>/status) is read, then SIGTERM.
// Labels: regression (--num-classes 0), y = X~_i w + 0.1 e with w and e from the seed;
// classification, class indices 0..K-1 drawn uniformly from the seed.
//
// Output: a Markdown table on stdout, everything in --out (JSON, schema
// dcalign-service-load/1). Progress on stderr. Exit status 0; 1 when some RPC failed or the
// --max-seconds limit stopped the run (the JSON then says so and holds what was measured); 2 for
// usage errors.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "service/client.hpp"
#ifdef DCALIGN_BENCH_WITH_LEARN
#include "dcalign/learn.hpp"
#include "dcalign/user.hpp"
#endif

namespace {

namespace fs = std::filesystem;
namespace v1 = dcalign::service::v1;
using dcalign::index_t;
using dcalign::Matrix;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

const std::string kAnalystToken = "bench-service-load-analyst-token-0123456789";

// ---------------------------------------------------------------- options

struct Options {
  int collaborations = 50;
  int participants = 10;
  long long anchor_rows = 2000;
  int dim = 50;
  long long data_rows = 5000;
  int threads = 10;
  int e2e_repetitions = 5;
  double max_seconds = 900;
  double rpc_deadline = 120;
  long long chunk_bytes = 1 << 20;
  int poll_ms = 20;
  int e2e_poll_ms = 2;
  long long max_memory_mb = 4096;
  std::string model = "linear";
  int num_classes = 0;
  double quiet_load = 0;  // 0: do not wait
  double quiet_wait = 1500;
  unsigned long long seed = 20240601;
  std::string server = DCALIGN_SERVER_BINARY;
  std::string work_dir;
  std::string out;
  std::string markdown;
  bool keep = false;
};

// ---------------------------------------------------------------- time and statistics

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

/// Latencies (seconds) of every RPC by kind, and the errors.
struct Recorder {
  std::mutex mu;
  std::map<std::string, std::vector<double>> latency;
  std::map<std::string, int> errors;
  std::vector<std::string> error_samples;

  void add(const std::string& kind, double seconds) {
    std::lock_guard<std::mutex> lock(mu);
    latency[kind].push_back(seconds);
  }
  void error(const std::string& kind, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    ++errors[kind];
    if (error_samples.size() < 20) error_samples.push_back(kind + ": " + what);
  }
  int error_count() {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (const auto& [k, c] : errors) n += c;
    return n;
  }
};

/// Times `body` as one RPC of `kind`; false (and the error recorded) if it threw.
template <typename F>
bool timed(Recorder& rec, const std::string& kind, F&& body) {
  const auto t0 = SteadyClock::now();
  try {
    body();
  } catch (const std::exception& e) {
    rec.error(kind, e.what());
    return false;
  }
  rec.add(kind, std::chrono::duration<double>(SteadyClock::now() - t0).count());
  return true;
}

// ---------------------------------------------------------------- machine

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

// ---------------------------------------------------------------- the server process

class ServerProcess {
 public:
  ServerProcess(const Options& o, const fs::path& dir) : dir_(dir) {
    const fs::path token = dir / "analyst.token", port = dir / "port";
    { std::ofstream(token) << kAnalystToken << "\n"; }
    fs::permissions(token, fs::perms::owner_read | fs::perms::owner_write);
    const int streams = std::max(64, 4 * o.threads + 16);
    args_ = {o.server, "--listen", "127.0.0.1:0", "--data-dir", (dir / "data").string(),
             "--analyst-token-file", token.string(), "--insecure-localhost", "--port-file",
             port.string(), "--device", "cpu", "--max-upload-streams", std::to_string(streams),
             // Every client thread is on 127.0.0.1: one address, as far as the server can tell.
             "--max-fetch-streams", std::to_string(streams), "--max-streams-per-peer",
             std::to_string(2 * streams), "--max-connections-per-peer",
             std::to_string(2 * streams + 64), "--max-connections",
             std::to_string(2 * streams + 64), "--max-chunk-bytes", std::to_string(o.chunk_bytes),
             "--shutdown-grace", "10"};
    const std::string log = (dir / "server.log").string();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
      if (std::freopen(log.c_str(), "a", stderr) == nullptr) ::_exit(120);
      if (std::freopen("/dev/null", "w", stdout) == nullptr) ::_exit(120);
      std::vector<char*> argv;
      for (auto& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 1200 && !fs::exists(port); ++i) {  // at most 30 s
      if (exited()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    std::ifstream(port) >> port_;
    if (port_ <= 0)
      throw std::runtime_error("dcalign-server did not start (" + o.server + "); its log: " + log +
                               "\n" + read_text(log));
  }
  ~ServerProcess() {
    if (!done_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::vector<std::string>& args() const { return args_; }
  fs::path log_path() const { return dir_ / "server.log"; }
  /// User + system CPU seconds of the process so far (/proc/<pid>/stat), or NaN.
  double cpu_seconds() const {
    const std::string stat = read_text("/proc/" + std::to_string(pid_) + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return std::nan("");
    std::istringstream in(stat.substr(close + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && in >> field; ++i)
      if (i == 14 || i == 15) ticks += std::stod(field);
    return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  long long status_bytes(const char* field) const {
    return proc_kib_field("/proc/" + std::to_string(pid_) + "/status", field);
  }
  bool exited() {
    if (done_) return true;
    if (::waitpid(pid_, &status_, WNOHANG) == pid_) done_ = true;
    return done_;
  }
  int wait() {
    if (!done_) {
      ::waitpid(pid_, &status_, 0);
      done_ = true;
    }
    return status_;
  }
  /// SIGTERM, then SIGKILL after `grace` seconds; a description of how it ended.
  std::string terminate(double grace) {
    if (exited()) return "exited before SIGTERM";
    ::kill(pid_, SIGTERM);
    const auto until = SteadyClock::now() + std::chrono::duration<double>(grace);
    while (!exited() && SteadyClock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!exited()) {
      ::kill(pid_, SIGKILL);
      wait();
      return "killed (SIGTERM not answered in time)";
    }
    if (WIFEXITED(status_)) return "exit " + std::to_string(WEXITSTATUS(status_));
    return "signal " + std::to_string(WTERMSIG(status_));
  }

 private:
  fs::path dir_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
  int port_ = 0, status_ = 0;
  bool done_ = false;
};

// ---------------------------------------------------------------- data

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
  return s;
}

/// The AlignOptions the server derives from spec_for's spec (src/service/spec.cpp).
dcalign::AlignOptions align_options_for(const Options& o) {
  dcalign::AlignOptions a;
  a.method = dcalign::Method::odc;
  a.seed = o.seed;
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

// ---------------------------------------------------------------- the server's log

/// seconds.total of an alignment report (AlignReport::to_json), or NaN.
double report_total_seconds(const std::string& report_json) {
  const json r = json::parse(report_json, nullptr, false);
  if (r.is_object() && r.contains("seconds") && r["seconds"].is_object() &&
      r["seconds"].contains("total") && r["seconds"]["total"].is_number())
    return r["seconds"]["total"].get<double>();
  return std::nan("");
}

struct JobTimes {
  double started = std::nan(""), done = std::nan("");  // epoch seconds
};

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

// ---------------------------------------------------------------- the load phase

struct Collab {
  std::string id;
  std::vector<std::string> tokens;
  bool created = false;
  double create_start = 0, create_end = 0;  // now_s()
  std::atomic<int> uploads_ok{0}, uploads_failed{0}, fetches_ok{0}, fetches_failed{0};
  double last_upload_end = 0;
  double done_seen = 0, last_fetch_end = 0;
  std::string job_state;  // done, failed, or empty while pending
  double align_seconds = std::nan("");
  std::mutex mu;
};

struct FetchTask {
  int collab, participant;
};

struct LoadResult {
  json j;
  int uploads_ok = 0;
};

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

json run_load(const Options& o, ServerProcess& server, Recorder& rec, const fs::path& work,
              long long* peak_rss_sampled) {
  const bool with_data = trains(o);
  const int N = o.collaborations, P = o.participants;
  const int port = server.port();
  std::vector<std::unique_ptr<Collab>> cs;
  for (int k = 0; k < N; ++k) cs.push_back(std::make_unique<Collab>());

  // The releases, generated before anything is timed.
  std::cerr << "generating " << N * P << " anchors of " << o.anchor_rows << " x " << o.dim
            << (with_data ? ", data parts and labels" : "") << "\n";
  const double gen0 = now_s();
  std::vector<Matrix<double>> anchors(static_cast<std::size_t>(N * P));
  std::vector<Matrix<double>> datas(with_data ? static_cast<std::size_t>(N * P) : 0);
  std::vector<Matrix<double>> labels(with_data ? static_cast<std::size_t>(N * P) : 0);
  {
    std::atomic<int> next{0};
    std::vector<std::thread> ts;
    const int gen_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int t = 0; t < gen_threads; ++t)
      ts.emplace_back([&] {
        for (int u; (u = next++) < N * P;) {
          anchors[static_cast<std::size_t>(u)] =
              release_matrix(o, static_cast<std::uint64_t>(u / P),
                             static_cast<std::uint64_t>(u % P), o.anchor_rows, 1);
          if (with_data) {
            datas[static_cast<std::size_t>(u)] =
                release_matrix(o, static_cast<std::uint64_t>(u / P),
                               static_cast<std::uint64_t>(u % P), o.data_rows, 2);
            labels[static_cast<std::size_t>(u)] =
                labels_for(o, static_cast<std::uint64_t>(u / P), static_cast<std::uint64_t>(u % P),
                           datas[static_cast<std::size_t>(u)]);
          }
        }
      });
    for (auto& t : ts) t.join();
  }
  const double gen_seconds = now_s() - gen0;

  // 1. The analyst creates every collaboration (the threads share the work).
  std::cerr << "creating " << N << " collaborations\n";
  const double create0 = now_s();
  {
    std::atomic<int> next{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < std::min(o.threads, N); ++t)
      ts.emplace_back([&] {
        dcalign::service::Client analyst(client_options(o, port, kAnalystToken));
        for (int k; !over_time() && (k = next++) < N;) {
          Collab& c = *cs[static_cast<std::size_t>(k)];
          v1::CreateCollaborationResponse r;
          c.create_start = now_s();
          if (!timed(rec, "CreateCollaboration",
                     [&] { r = analyst.create(spec_for(o, "load-" + std::to_string(k), P)); }))
            continue;
          c.create_end = now_s();
          c.id = r.collaboration_id();
          for (const auto& tk : r.tokens()) c.tokens.push_back(tk.token());
          c.created = static_cast<int>(c.tokens.size()) == P;
        }
      });
    for (auto& t : ts) t.join();
  }
  const double create1 = now_s();

  // 2. Uploads, status polls and fetches, concurrently.
  std::cerr << "uploading " << N * P << " releases with " << o.threads << " threads\n";
  std::mutex qmu;
  std::condition_variable qcv;
  std::deque<FetchTask> fetches;
  std::atomic<int> next_upload{0}, resolved{0};
  std::mutex time_mu;
  double first_up = -1, last_up = 0, last_fetch = 0, first_done_seen = -1, last_done_seen = 0;
  long long upload_bytes = 0;
  for (auto& c : cs)
    if (!c->created) ++resolved;

  const auto worker = [&] {
    for (;;) {
      if (over_time()) return;
      std::optional<FetchTask> f;
      {
        std::lock_guard<std::mutex> lock(qmu);
        if (!fetches.empty()) {
          f = fetches.front();
          fetches.pop_front();
        }
      }
      if (f) {
        Collab& c = *cs[static_cast<std::size_t>(f->collab)];
        const fs::path dest =
            work / "fetched" / std::to_string(f->collab) / ("p" + std::to_string(f->participant));
        const bool ok = fetch_result(o, port, rec, c.id,
                                     c.tokens[static_cast<std::size_t>(f->participant)], dest);
        const double t = now_s();
        (ok ? c.fetches_ok : c.fetches_failed)++;
        std::lock_guard<std::mutex> lock(c.mu);
        c.last_fetch_end = std::max(c.last_fetch_end, t);
        std::lock_guard<std::mutex> tl(time_mu);
        last_fetch = std::max(last_fetch, t);
        continue;
      }
      const int u = next_upload++;
      if (u < N * P) {
        Collab& c = *cs[static_cast<std::size_t>(u / P)];
        if (!c.created) continue;
        const double t0 = now_s();
        {
          std::lock_guard<std::mutex> tl(time_mu);
          if (first_up < 0) first_up = t0;
        }
        const bool ok =
            upload_release(o, port, rec, c.id, c.tokens[static_cast<std::size_t>(u % P)],
                           anchors[static_cast<std::size_t>(u)],
                           with_data ? &datas[static_cast<std::size_t>(u)] : nullptr,
                           with_data ? &labels[static_cast<std::size_t>(u)] : nullptr);
        const double t1 = now_s();
        if (ok) {
          std::lock_guard<std::mutex> tl(time_mu);
          last_up = std::max(last_up, t1);
          upload_bytes += static_cast<long long>(anchors[static_cast<std::size_t>(u)].size() * 8);
          if (with_data)
            upload_bytes += static_cast<long long>((datas[static_cast<std::size_t>(u)].size() +
                                                    labels[static_cast<std::size_t>(u)].size()) *
                                                   8);
        }
        {
          std::lock_guard<std::mutex> lock(c.mu);
          c.last_upload_end = std::max(c.last_upload_end, t1);
        }
        (ok ? c.uploads_ok : c.uploads_failed)++;
        continue;
      }
      // No upload left: wait for fetches until every collaboration is resolved and fetched.
      std::unique_lock<std::mutex> lock(qmu);
      if (resolved == N && fetches.empty()) {
        bool all_fetched = true;
        for (auto& c : cs)
          if (c->job_state == "done" && c->fetches_ok + c->fetches_failed < P) all_fetched = false;
        if (all_fetched) return;
      }
      qcv.wait_for(lock, std::chrono::milliseconds(5));
    }
  };

  // The analyst: polls the collaborations whose uploads are all in.
  long long rss_max = 0;
  const auto poller = [&] {
    dcalign::service::Client analyst(client_options(o, port, kAnalystToken));
    while (!over_time() && resolved < N) {
      for (int k = 0; k < N && !g_abort; ++k) {
        Collab& c = *cs[static_cast<std::size_t>(k)];
        if (!c.created || !c.job_state.empty()) continue;
        if (c.uploads_failed > 0) {
          std::lock_guard<std::mutex> lock(qmu);
          c.job_state = "upload failed";
          ++resolved;
          continue;
        }
        if (c.uploads_ok < P) continue;
        v1::GetStatusResponse st;
        if (!timed(rec, "GetStatus", [&] { st = analyst.status(c.id); })) continue;
        if (st.job_state() == "done" || st.job_state() == "failed") {
          const double t = now_s();
          c.done_seen = t;
          if (first_done_seen < 0) first_done_seen = t;
          last_done_seen = std::max(last_done_seen, t);
          c.align_seconds = report_total_seconds(st.job_report());
          {
            std::lock_guard<std::mutex> lock(qmu);
            c.job_state = st.job_state();
            if (st.job_state() == "done")
              for (int p = 0; p < P; ++p) fetches.push_back({k, p});
            else
              rec.error("job", c.id + ": " + st.job_error());
            ++resolved;
          }
          qcv.notify_all();
        }
      }
      rss_max = std::max(rss_max, server.status_bytes("VmRSS"));
      std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
    }
  };

  const double load0 = now_s();
  std::thread poll_thread(poller);
  std::vector<std::thread> ts;
  for (int t = 0; t < o.threads; ++t) ts.emplace_back(worker);
  for (auto& t : ts) t.join();
  poll_thread.join();
  const double load1 = now_s();
  *peak_rss_sampled = rss_max;

  // The server's own job times (its log, epoch seconds) against ours (now_s()).
  const double epoch_minus_now = epoch_s() - now_s();
  const auto jobs = job_times_from_log(server.log_path());
  std::vector<double> job_seconds, align_seconds, beyond_align, e2e, upload_to_done,
      done_to_fetched;
  double first_started = 1e300, last_done = -1e300;
  int done = 0, done_after_last_upload = 0, uploads_ok = 0, fetches_ok = 0;
  for (auto& c : cs) {
    uploads_ok += c->uploads_ok;
    fetches_ok += c->fetches_ok;
    if (c->job_state != "done") continue;
    ++done;
    if (!std::isnan(c->align_seconds)) align_seconds.push_back(c->align_seconds);
    const auto it = jobs.find(c->id);
    double done_at = c->done_seen;  // now_s()
    if (it != jobs.end() && !std::isnan(it->second.done) && !std::isnan(it->second.started)) {
      job_seconds.push_back(it->second.done - it->second.started);
      if (!std::isnan(c->align_seconds))
        beyond_align.push_back(it->second.done - it->second.started - c->align_seconds);
      first_started = std::min(first_started, it->second.started - epoch_minus_now);
      done_at = it->second.done - epoch_minus_now;
    }
    last_done = std::max(last_done, done_at);
    if (done_at > last_up) ++done_after_last_upload;
    upload_to_done.push_back(done_at - c->last_upload_end);
    if (c->fetches_ok == P) {
      e2e.push_back(c->last_fetch_end - c->create_start);
      done_to_fetched.push_back(c->last_fetch_end - done_at);
    }
  }
  double job_busy = 0;
  for (double s : job_seconds) job_busy += s;
  const double upload_window = last_up - first_up;
  const double tail = last_done - last_up;
  json j;
  j["generate_seconds"] = gen_seconds;
  j["create_phase_seconds"] = create1 - create0;
  j["load_phase_seconds"] = load1 - load0;
  j["collaborations_created"] =
      std::count_if(cs.begin(), cs.end(), [](auto& c) { return c->created; });
  j["uploads"] = {
      {"ok", uploads_ok},
      {"expected", N * P},
      {"parts_per_release", with_data ? 3 : 1},
      {"bytes", upload_bytes},
      {"window_seconds", upload_window},
      {"releases_per_second", upload_window > 0 ? uploads_ok / upload_window : std::nan("")},
      {"bytes_per_second",
       upload_window > 0 ? static_cast<double>(upload_bytes) / upload_window : std::nan("")}};
  j["jobs"] = {
      {"done", done},
      {"expected", N},
      {"from_server_log", job_seconds.size()},
      {"done_after_last_upload", done_after_last_upload},
      {"last_upload_to_last_done_seconds", tail},
      {"jobs_per_second_after_last_upload",
       tail > 0 ? done_after_last_upload / tail : std::nan("")},
      {"first_start_to_last_done_seconds", last_done - first_started},
      {"jobs_per_second_overall",
       last_done > first_started ? job_seconds.size() / (last_done - first_started) : std::nan("")},
      {"jobs_per_busy_second", job_busy > 0 ? job_seconds.size() / job_busy : std::nan("")},
      {"job_seconds", summary(job_seconds)},
      {"align_report_total_seconds", summary(align_seconds)},
      {"job_beyond_align_seconds", summary(beyond_align)},
      {"job_beyond_align",
       "job_started -> job_done of the server's log less the alignment "
       "report's seconds.total: reading the parts, X~_i G_i, the fit of h, "
       "its save and score, writing and publishing the results"},
      {"last_upload_to_done_seconds", summary(upload_to_done)}};
  j["fetches"] = {{"ok", fetches_ok}, {"expected", N * P}};
  j["collaboration_e2e_seconds"] = summary(e2e);
  j["done_to_all_fetched_seconds"] = summary(done_to_fetched);
  j["first_done_seen"] = first_done_seen;
  j["last_done_seen"] = last_done_seen;
  return j;
}

// ---------------------------------------------------------------- one collaboration alone

struct SoloRun {
  bool ok = false;
  double create = 0, uploads = 0, wait_done = 0, fetches = 0, total = 0;
  double job_seconds = std::nan(""), align_report_seconds = std::nan("");
  double in_process = std::nan(""), in_process_align_report = std::nan("");
  double in_process_align = std::nan(""), in_process_train = std::nan("");
  std::string error;
};

template <typename F>
bool run_parallel(int n, int threads, F&& body) {
  std::atomic<int> next{0};
  std::atomic<bool> ok{true};
  std::vector<std::thread> ts;
  for (int t = 0; t < std::min(threads, n); ++t)
    ts.emplace_back([&] {
      for (int i; (i = next++) < n;)
        if (!body(i)) ok = false;
    });
  for (auto& t : ts) t.join();
  return ok;
}

SoloRun run_solo(const Options& o, ServerProcess& server, Recorder& rec, const fs::path& work,
                 int rep, dcalign::Backend& backend) {
  const bool with_data = trains(o);
  SoloRun r;
  const int P = o.participants, port = server.port();
  const std::uint64_t key = static_cast<std::uint64_t>(o.collaborations + rep);
  std::vector<Matrix<double>> anchors, datas, labels;
  for (int p = 0; p < P; ++p) {
    anchors.push_back(release_matrix(o, key, static_cast<std::uint64_t>(p), o.anchor_rows, 1));
    if (with_data) {
      datas.push_back(release_matrix(o, key, static_cast<std::uint64_t>(p), o.data_rows, 2));
      labels.push_back(labels_for(o, key, static_cast<std::uint64_t>(p), datas.back()));
    }
  }
  Recorder solo_rec;  // the solo runs' RPCs are not mixed into the load's latencies
  dcalign::service::Client analyst(client_options(o, port, kAnalystToken));
  const auto t0 = SteadyClock::now();
  const auto since = [&] { return std::chrono::duration<double>(SteadyClock::now() - t0).count(); };
  v1::CreateCollaborationResponse created;
  if (!timed(solo_rec, "CreateCollaboration",
             [&] { created = analyst.create(spec_for(o, "solo-" + std::to_string(rep), P)); })) {
    r.error = solo_rec.error_samples.empty() ? "create failed" : solo_rec.error_samples[0];
    return r;
  }
  const std::string id = created.collaboration_id();
  r.create = since();
  const bool up_ok = run_parallel(P, o.threads, [&](int p) {
    return upload_release(o, port, solo_rec, id, created.tokens(p).token(),
                          anchors[static_cast<std::size_t>(p)],
                          with_data ? &datas[static_cast<std::size_t>(p)] : nullptr,
                          with_data ? &labels[static_cast<std::size_t>(p)] : nullptr);
  });
  r.uploads = since() - r.create;
  if (!up_ok) {
    r.error = "upload failed: " + solo_rec.error_samples.at(0);
    return r;
  }
  v1::GetStatusResponse st;
  for (;;) {
    if (over_time()) {
      r.error = "time limit";
      return r;
    }
    if (!timed(solo_rec, "GetStatus", [&] { st = analyst.status(id); })) {
      r.error = "status failed: " + solo_rec.error_samples.at(0);
      return r;
    }
    if (st.job_state() == "done" || st.job_state() == "failed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(o.e2e_poll_ms));
  }
  r.wait_done = since() - r.create - r.uploads;
  if (st.job_state() != "done") {
    r.error = "job failed: " + st.job_error();
    return r;
  }
  const bool fetch_ok = run_parallel(P, o.threads, [&](int p) {
    return fetch_result(o, port, solo_rec, id, created.tokens(p).token(),
                        work / "solo" / std::to_string(rep) / ("p" + std::to_string(p)));
  });
  r.total = since();
  r.fetches = r.total - r.create - r.uploads - r.wait_done;
  if (!fetch_ok) {
    r.error = "fetch failed: " + solo_rec.error_samples.at(0);
    return r;
  }
  r.align_report_seconds = report_total_seconds(st.job_report());
  const auto jobs = job_times_from_log(server.log_path());
  if (const auto it = jobs.find(id); it != jobs.end())
    r.job_seconds = it->second.done - it->second.started;

  // The same alignment in this process: from the matrices in memory to G.
  const auto a0 = SteadyClock::now();
  const auto stack = dcalign::Stack<double>::from_matrices(anchors);
  const auto result = dcalign::align(stack, align_options_for(o), backend);
  r.in_process_align = std::chrono::duration<double>(SteadyClock::now() - a0).count();
  r.in_process_align_report = result.report.total_seconds;
#ifdef DCALIGN_BENCH_WITH_LEARN
  // The same fit of h in this process (src/service/train.cpp: stacked X~_i G_i, the spec's
  // seed, standardised targets in regression); its training score is not computed.
  if (with_data) {
    const auto t0_train = SteadyClock::now();
    index_t rows = 0;
    for (const auto& m : datas) rows += m.rows();
    const index_t l = o.dim;
    Matrix<double> all(rows, l);
    std::vector<double> y;
    y.reserve(static_cast<std::size_t>(rows));
    index_t at = 0;
    for (int p = 0; p < P; ++p) {
      const auto i = static_cast<std::size_t>(p);
      const Matrix<double> XG = dcalign::apply_change_of_basis(datas[i], result.G.matrix(p));
      for (index_t c = 0; c < l; ++c)
        for (index_t row = 0; row < XG.rows(); ++row) all(at + row, c) = XG(row, c);
      at += XG.rows();
      y.insert(y.end(), labels[i].data(), labels[i].data() + labels[i].rows());
    }
    dcalign::learn::ModelOptions mo;
    mo.seed = o.seed;
    mo.standardize_target = o.num_classes == 0;
    auto model = dcalign::learn::make_model(o.model, mo);
    model->fit(all, y, o.num_classes);
    r.in_process_train = std::chrono::duration<double>(SteadyClock::now() - t0_train).count();
  }
#endif
  r.in_process = std::chrono::duration<double>(SteadyClock::now() - a0).count();
  r.ok = true;
  for (const auto& [kind, v] : solo_rec.latency)
    for (double x : v) rec.add("solo " + kind, x);
  return r;
}

// ---------------------------------------------------------------- output

std::string fmt(double v, int digits = 2) {
  if (std::isnan(v)) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

double num(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

std::string markdown(json r) {  // a copy: operator[] may add nulls
  std::ostringstream md;
  const json& p = r["parameters"];
  const json& load = r["load"];
  md << "Load: " << p["collaborations"] << " collaborations x " << p["participants"]
     << " participants, anchors " << p["anchor_rows"] << " x " << p["dim"] << " float64";
  if (p.value("model", std::string("none")) != "none")
    md << " + X~_i " << p["data_rows"] << " x " << p["dim"] << " + labels " << p["data_rows"]
       << " x 1, model " << p["model"].get<std::string>() << " (num_classes " << p["num_classes"]
       << ")";
  else
    md << ", alignment only";
  md << ", " << p["threads"] << " client threads; " << r["machine"]["cpu_model"].get<std::string>()
     << ", " << r["machine"]["logical_cpus"] << " logical CPUs (client and server share them).\n\n";
  md << "| measure | value |\n|---|---|\n";
  if (load.is_object()) {
    const json& u = load["uploads"];
    md << "| uploads (releases) | " << u["ok"] << " of " << u["expected"] << ", "
       << fmt(num(u, "bytes") / 1e6, 1) << " MB in " << fmt(num(u, "window_seconds")) << " s |\n";
    md << "| uploads per second | " << fmt(num(u, "releases_per_second"), 1) << " ("
       << fmt(num(u, "bytes_per_second") / 1e6, 1) << " MB/s) |\n";
    const json& jb = load["jobs"];
    md << "| jobs done | " << jb["done"] << " of " << jb["expected"] << " |\n";
    md << "| alignment throughput after the last upload | "
       << fmt(num(jb, "jobs_per_second_after_last_upload"), 1) << " jobs/s ("
       << jb["done_after_last_upload"] << " jobs in "
       << fmt(num(jb, "last_upload_to_last_done_seconds"), 3) << " s) |\n";
    md << "| alignment throughput, first start to last done | "
       << fmt(num(jb, "jobs_per_second_overall"), 1) << " jobs/s |\n";
    md << "| job worker, jobs per busy second | " << fmt(num(jb, "jobs_per_busy_second"), 1)
       << " (job p50 " << fmt(num(jb["job_seconds"], "p50") * 1e3, 1) << " ms, of which align() "
       << fmt(num(jb["align_report_total_seconds"], "p50") * 1e3, 1) << " ms, the rest "
       << fmt(num(jb["job_beyond_align_seconds"], "p50") * 1e3, 1) << " ms) |\n";
    md << "| server CPU time during the load | " << fmt(num(load, "server_cpu_seconds")) << " s in "
       << fmt(num(load, "load_phase_seconds")) << " s |\n";
    md << "| collaboration create -> all fetched, under load | p50 "
       << fmt(num(load["collaboration_e2e_seconds"], "p50")) << " s, max "
       << fmt(num(load["collaboration_e2e_seconds"], "max")) << " s |\n";
  }
  md << "| server peak RSS (VmHWM) | " << fmt(num(r["server"], "peak_rss_bytes") / 1048576.0, 1)
     << " MiB |\n";
  const json& e = r["e2e"];
  if (e.is_object() && e.contains("service_median_seconds")) {
    md << "| one collaboration alone, service (median of " << e["repetitions_ok"] << ") | "
       << fmt(num(e, "service_median_seconds") * 1e3, 1) << " ms |\n";
    md << "| same work in process (" << e.value("in_process_work", std::string("?"))
       << ", median) | " << fmt(num(e, "in_process_median_seconds") * 1e3, 1) << " ms |\n";
    md << "| service / in process | " << fmt(num(e, "ratio"), 1)
       << "x (against align() alone: " << fmt(num(e, "ratio_vs_align_report"), 1) << "x) |\n";
  }
  md << "\n| RPC | count | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n";
  for (const auto& [kind, s] : r["latency_seconds"].items())
    md << "| " << kind << " | " << s["count"] << " | " << fmt(num(s, "p50") * 1e3) << " | "
       << fmt(num(s, "p99") * 1e3) << " | " << fmt(num(s, "max") * 1e3) << " |\n";
  if (e.is_object() && e.contains("phase_medians_seconds")) {
    const json& ph = e["phase_medians_seconds"];
    md << "\nOne collaboration alone, medians (ms): create " << fmt(num(ph, "create") * 1e3, 1)
       << ", uploads " << fmt(num(ph, "uploads") * 1e3, 1) << ", last upload -> done seen "
       << fmt(num(ph, "wait_done") * 1e3, 1) << " (server job "
       << fmt(num(ph, "server_job") * 1e3, 1) << ", its align() "
       << fmt(num(ph, "server_align_report") * 1e3, 1) << "), fetches "
       << fmt(num(ph, "fetches") * 1e3, 1) << "; in process align() "
       << fmt(num(ph, "in_process_align_report") * 1e3, 1) << " (with the stacking "
       << fmt(num(ph, "in_process_align") * 1e3, 1) << "), fit of h "
       << fmt(num(ph, "in_process_train") * 1e3, 1) << ".\n";
  }
  md << "\nLoad average (1, 5, 15 min) at the start: "
     << r["machine"].value("loadavg_at_start", std::string("?"))
     << "; at the end: " << r["machine"].value("loadavg_at_end", std::string("?")) << "\n";
  md << "\nStatus: " << r["status"].get<std::string>() << "\n";
  return md.str();
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

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bm_service_load: dcalign-server under the load of many collaborations"};
  app.add_option("--collaborations", o.collaborations, "collaborations created by the analyst")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--participants", o.participants, "participants per collaboration")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--anchor-rows", o.anchor_rows, "a, the anchor's rows")
      ->check(CLI::Range(1LL, 1000000LL))
      ->capture_default_str();
  app.add_option("--dim", o.dim, "l, the dimension of every release")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--data-rows", o.data_rows, "rows of X~_i and its labels (with a model)")
      ->check(CLI::Range(1LL, 100000000LL))
      ->capture_default_str();
  app.add_option("--model", o.model,
                 "spec.model: none (alignment only) or a learning-layer model the server takes "
                 "(linear, logreg, mlp; knn, svm and forest keep training rows and are refused); "
                 "with one, X~_i and labels are uploaded too")
      ->capture_default_str();
  app.add_option("--num-classes", o.num_classes, "spec.num_classes: 0 regression, K >= 2 classes")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--quiet-load", o.quiet_load,
                 "first wait until the 1-minute load average is below this (0: do not wait)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  app.add_option("--quiet-wait", o.quiet_wait, "seconds to wait for --quiet-load at most")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "concurrent client threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--e2e-repetitions", o.e2e_repetitions,
                 "single-collaboration runs, each with the in-process alignment")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  app.add_option("--max-seconds", o.max_seconds, "the whole run's limit; then it stops cleanly")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--rpc-deadline", o.rpc_deadline, "seconds, every RPC's deadline")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--chunk-bytes", o.chunk_bytes, "upload chunk (also the server's limit)")
      ->check(CLI::Range(1024LL, 64LL << 20))
      ->capture_default_str();
  app.add_option("--poll-ms", o.poll_ms, "the analyst's GetStatus sweep interval under load")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--e2e-poll-ms", o.e2e_poll_ms, "GetStatus interval of the single runs")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--max-memory-mb", o.max_memory_mb, "bound on the releases held in memory")
      ->check(CLI::Range(1LL, 1LL << 20))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "releases and the alignment's seed")->capture_default_str();
  app.add_option("--server-binary,--server", o.server,
                 "the dcalign-server binary (built with the learning layer to train)")
      ->capture_default_str();
  app.add_option("--work-dir", o.work_dir,
                 "where the temporary data directory goes (default: TMPDIR)");
  app.add_option("--out", o.out, "the JSON results");
  app.add_option("--markdown", o.markdown, "also write the table here");
  app.add_flag("--keep", o.keep, "keep the data directory and the server's log");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (o.anchor_rows < o.dim) {
    std::cerr << "bm_service_load: --anchor-rows must be at least --dim\n";
    return 2;
  }
  const double release_bytes =
      static_cast<double>(o.anchor_rows) * o.dim * 8.0 +
      (trains(o) ? static_cast<double>(o.data_rows) * (o.dim + 1) * 8.0 : 0.0);
  const double held = release_bytes * o.collaborations * o.participants;
  if (held > static_cast<double>(o.max_memory_mb) * 1048576.0) {
    std::cerr << "bm_service_load: the releases need " << held / 1048576.0
              << " MiB in memory, over --max-memory-mb " << o.max_memory_mb << "\n";
    return 2;
  }
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);

  // A quiet machine first: the 1-minute load average below --quiet-load (polled every 20 s).
  json quiet = {{"threshold", o.quiet_load}, {"max_wait_seconds", o.quiet_wait}};
  if (o.quiet_load > 0) {
    const auto w0 = SteadyClock::now();
    const auto waited = [&] {
      return std::chrono::duration<double>(SteadyClock::now() - w0).count();
    };
    std::vector<std::string> samples;
    for (;;) {
      std::string load = read_text("/proc/loadavg");
      while (!load.empty() && load.back() == '\n') load.pop_back();
      const double one = std::atof(load.c_str());
      samples.push_back(load);
      if (one < o.quiet_load) {
        quiet["reached"] = true;
        break;
      }
      if (waited() + 20 > o.quiet_wait) {
        quiet["reached"] = false;
        std::cerr << "bm_service_load: the load average stayed at or above " << o.quiet_load
                  << " for " << waited() << " s; measuring anyway (the JSON says so)\n";
        break;
      }
      std::cerr << "waiting for a quiet machine: load " << load << "\n";
      std::this_thread::sleep_for(std::chrono::seconds(20));
    }
    quiet["waited_seconds"] = waited();
    quiet["samples"] = samples;
  }

  g_start = SteadyClock::now();
  g_deadline = g_start + std::chrono::duration_cast<SteadyClock::duration>(
                             std::chrono::duration<double>(o.max_seconds));
  const double started_epoch = epoch_s();
  json r;
  r["schema"] = "dcalign-service-load/1";
  r["command"] = command;
  r["started_epoch"] = started_epoch;
  r["parameters"] = {
      {"collaborations", o.collaborations},
      {"participants", o.participants},
      {"anchor_rows", o.anchor_rows},
      {"dim", o.dim},
      {"data_rows", o.data_rows},
      {"model", o.model},
      {"num_classes", o.num_classes},
      {"labels", trains(o) ? (o.num_classes == 0 ? "X~_i w + 0.1 e, w and e N(0, 1) from the seed"
                                                 : "class indices uniform on 0..K-1 from the seed")
                           : "none"},
      {"threads", o.threads},
      {"e2e_repetitions", o.e2e_repetitions},
      {"max_seconds", o.max_seconds},
      {"rpc_deadline", o.rpc_deadline},
      {"chunk_bytes", o.chunk_bytes},
      {"poll_ms", o.poll_ms},
      {"e2e_poll_ms", o.e2e_poll_ms},
      {"seed", o.seed},
      {"method", "odc"},
      {"releases", "i.i.d. N(0, 1) float64, generated before the timing"}};
  r["machine"] = machine_info();
  r["quiet_wait"] = quiet;
  r["versions"] = {{"dcalign", DCALIGN_VERSION},
                   {"build_type", DCALIGN_BUILD_TYPE},
                   {"grpc", grpc::Version()},
                   {"blas", nlohmann::json::object()}};
  r["status"] = "running";

  fs::path work = o.work_dir.empty() ? fs::temp_directory_path() : fs::path(o.work_dir);
  std::string tmpl = (work / "dcalign-service-load-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::cerr << "bm_service_load: cannot create a directory in " << work << "\n";
    return 1;
  }
  work = tmpl;
  r["work_dir"] = work.string();
  Recorder rec;
  int exit_status = 0;
  try {
    ServerProcess server(o, work);
    r["server"] = {{"pid", server.pid()},
                   {"args", server.args()},
                   {"rss_after_start_bytes", server.status_bytes("VmRSS")}};
    std::cerr << "dcalign-server pid " << server.pid() << " on 127.0.0.1:" << server.port() << "\n";
    long long rss_sampled = 0;
    const double cpu0 = server.cpu_seconds();
    r["load"] = run_load(o, server, rec, work, &rss_sampled);
    r["load"]["server_cpu_seconds"] = server.cpu_seconds() - cpu0;
    std::cerr << "load phase done\n";

    // One collaboration alone, against the same alignment in this process.
    auto backend = dcalign::make_backend(dcalign::Device::cpu);
    r["versions"]["blas"] = backend->description();
    std::vector<json> reps;
    std::vector<double> svc, inproc, create, uploads, wait_done, fetches, job, align_srv, align_in,
        align_in_all, train_in;
    for (int rep = 0; rep < o.e2e_repetitions && !over_time(); ++rep) {
      const SoloRun s = run_solo(o, server, rec, work, rep, *backend);
      reps.push_back({{"ok", s.ok},
                      {"error", s.error},
                      {"service_seconds", s.total},
                      {"create", s.create},
                      {"uploads", s.uploads},
                      {"wait_done", s.wait_done},
                      {"fetches", s.fetches},
                      {"server_job_seconds", s.job_seconds},
                      {"server_align_report_seconds", s.align_report_seconds},
                      {"in_process_seconds", s.in_process},
                      {"in_process_align_seconds", s.in_process_align},
                      {"in_process_train_seconds", s.in_process_train},
                      {"in_process_align_report_seconds", s.in_process_align_report}});
      if (!s.ok) {
        rec.error("e2e", s.error);
        continue;
      }
      std::cerr << "e2e " << rep << ": service " << fmt(s.total * 1e3, 1) << " ms, in process "
                << fmt(s.in_process * 1e3, 1) << " ms\n";
      svc.push_back(s.total);
      inproc.push_back(s.in_process);
      create.push_back(s.create);
      uploads.push_back(s.uploads);
      wait_done.push_back(s.wait_done);
      fetches.push_back(s.fetches);
      if (!std::isnan(s.job_seconds)) job.push_back(s.job_seconds);
      if (!std::isnan(s.align_report_seconds)) align_srv.push_back(s.align_report_seconds);
      align_in.push_back(s.in_process_align_report);
      align_in_all.push_back(s.in_process_align);
      if (!std::isnan(s.in_process_train)) train_in.push_back(s.in_process_train);
    }
    json e = {{"repetitions", reps}, {"repetitions_ok", svc.size()}};
    if (!svc.empty()) {
      e["service_median_seconds"] = percentile(svc, 0.5);
      e["in_process_median_seconds"] = percentile(inproc, 0.5);
      e["ratio"] = percentile(svc, 0.5) / percentile(inproc, 0.5);
      e["ratio_vs_align_report"] = percentile(svc, 0.5) / percentile(align_in, 0.5);
      e["phase_medians_seconds"] = {{"create", percentile(create, 0.5)},
                                    {"uploads", percentile(uploads, 0.5)},
                                    {"wait_done", percentile(wait_done, 0.5)},
                                    {"fetches", percentile(fetches, 0.5)},
                                    {"server_job", percentile(job, 0.5)},
                                    {"server_align_report", percentile(align_srv, 0.5)},
                                    {"in_process_align_report", percentile(align_in, 0.5)},
                                    {"in_process_align", percentile(align_in_all, 0.5)},
                                    {"in_process_train", percentile(train_in, 0.5)}};
      e["service"] =
          "create -> every participant's uploads (anchor, and with a model data and labels; "
          "participants concurrently, --threads) -> GetStatus every --e2e-poll-ms until done -> "
          "every participant's fetch (G_i, report, and with a model model/)";
      e["in_process"] =
          "Stack<double>::from_matrices of the same anchors + dcalign::align "
          "(ODC, the spec's seed, evaluate as the server) on a CPU backend"
#ifdef DCALIGN_BENCH_WITH_LEARN
          "; with a model, X~_i G_i stacked + learn::make_model(model, {seed, "
          "standardize_target = regression})->fit as src/service/train.cpp (without its save "
          "and training score)"
#endif
          ;
#ifdef DCALIGN_BENCH_WITH_LEARN
      e["in_process_work"] = trains(o) ? "align + fit of h" : "align";
#else
      e["in_process_work"] = trains(o) ? "align only: built without the learning layer" : "align";
#endif
    }
    r["e2e"] = e;

    // Peak RSS just before SIGTERM.
    r["server"]["peak_rss_bytes"] = server.status_bytes("VmHWM");
    r["server"]["rss_before_sigterm_bytes"] = server.status_bytes("VmRSS");
    r["server"]["max_sampled_rss_under_load_bytes"] = rss_sampled;
    r["server"]["cpu_seconds_before_sigterm"] = server.cpu_seconds();
    r["server"]["termination"] = server.terminate(30);
    r["client_peak_rss_bytes"] = proc_kib_field("/proc/self/status", "VmHWM");
  } catch (const std::exception& e) {
    abort_run(std::string("error: ") + e.what());
  }

  json lat = json::object();
  for (const auto& [kind, v] : rec.latency) lat[kind] = summary(v);
  r["latency_seconds"] = lat;
  r["errors"] = rec.errors;
  r["error_samples"] = rec.error_samples;
  r["wall_seconds"] = now_s();
  {
    std::string load = read_text("/proc/loadavg");
    while (!load.empty() && load.back() == '\n') load.pop_back();
    r["machine"]["loadavg_at_end"] = load;
  }
  if (g_abort) {
    r["status"] = "stopped: " + g_abort_reason;
    exit_status = 1;
  } else if (rec.error_count() > 0) {
    r["status"] = "errors";
    exit_status = 1;
  } else {
    r["status"] = "ok";
  }
  if (!o.keep) {
    std::error_code ec;
    fs::remove_all(work, ec);
  }
  try {
    write_json(o.out, r);
    const std::string md = markdown(r);
    std::cout << md;
    if (!o.markdown.empty()) std::ofstream(o.markdown) << md;
  } catch (const std::exception& e) {
    std::cerr << "bm_service_load: " << e.what() << "\n";
    return 1;
  }
  return exit_status;
}
