#pragma once
// bm_service_load's shared parts (bench/service/service_load.cpp): its options, the clock and
// the run's deadline, statistics and the recorder of call times, the machine's description,
// dcalign-server as a child process, the collaborations' data and specs, the server's log, and
// the phases (load_phase.cpp, solo_and_report.cpp).
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

namespace dcalign::bench_service_load {

namespace fs = std::filesystem;
namespace v1 = dcalign::service::v1;
using dcalign::index_t;
using dcalign::Matrix;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

inline const std::string kAnalystToken = "bench-service-load-analyst-token-0123456789";

struct Options {
  int cpu_workers = 0;        ///< the server's --cpu-workers (0: its default)
  int distributed_ranks = 0;  ///< spec.distributed.ranks (0: jobs in the server's process)
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

// The run's clock and deadline (load_common.cpp).
extern SteadyClock::time_point g_start;
extern SteadyClock::time_point g_deadline;
extern std::atomic<bool> g_abort;
extern std::string g_abort_reason;
/// Seconds since the benchmark started (steady clock).
double now_s();
/// The system clock in seconds since the epoch (the server log's "ts").
double epoch_s();
double remaining_s();
void abort_run(const std::string& why);
bool over_time();
/// Linear interpolation between order statistics (NumPy's default), q in [0, 1].
double percentile(std::vector<double> v, double q);
json summary(const std::vector<double>& v);

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

/// A whole (small) file, e.g. under /proc; "" when it cannot be read.
std::string read_text(const fs::path& p);
/// A "Name: N kB" field of a /proc status file, in KiB (-1 when absent).
long long proc_kib_field(const std::string& file, const std::string& field);
json machine_info();

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
    if (o.cpu_workers > 0) {
      args_.push_back("--cpu-workers");
      args_.push_back(std::to_string(o.cpu_workers));
    }
    if (o.distributed_ranks > 0)  // mpirun may place more ranks than this machine has cores
      args_.insert(args_.end(), {"--mpi-max-ranks", std::to_string(o.distributed_ranks),
                                 "--mpi-arg=--oversubscribe"});
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

bool trains(const Options& o);
/// The release of participant `p` of collaboration `k`: i.i.d. N(0, 1), rows x dim.
Matrix<double> release_matrix(const Options& o, std::uint64_t k, std::uint64_t p, index_t rows,
                              std::uint64_t salt);
/// The labels of a release (regression values or class indices).
Matrix<double> labels_for(const Options& o, std::uint64_t k, std::uint64_t p,
                          const Matrix<double>& X);
v1::CollaborationSpec spec_for(const Options& o, const std::string& name, int participants);
dcalign::AlignOptions align_options_for(const Options& o);
dcalign::service::ClientOptions client_options(const Options& o, int port,
                                               const std::string& token);

struct JobTimes {
  double started = std::nan(""), done = std::nan("");  // epoch seconds
};
double report_total_seconds(const std::string& report_json);
std::map<std::string, JobTimes> job_times_from_log(const fs::path& log);

/// Uploads every part a participant sends (anchor, and data and labels where given); true if all
/// went through.
bool upload_release(const Options& o, int port, Recorder& rec, const std::string& id,
                    const std::string& token, const Matrix<double>& anchor,
                    const Matrix<double>* data, const Matrix<double>* labels);
/// Fetches a participant's results into `dest`; true if it went through.
bool fetch_result(const Options& o, int port, Recorder& rec, const std::string& id,
                  const std::string& token, const fs::path& dest);

/// The load phase: many collaborations at once (load_phase.cpp).
json run_load(const Options& o, ServerProcess& server, Recorder& rec, const fs::path& work,
              long long* peak_rss_sampled);

struct SoloRun {
  bool ok = false;
  double create = 0, uploads = 0, wait_done = 0, fetches = 0, total = 0;
  double job_seconds = std::nan(""), align_report_seconds = std::nan("");
  double in_process = std::nan(""), in_process_align_report = std::nan("");
  double in_process_align = std::nan(""), in_process_train = std::nan("");
  std::string error;
};

/// One collaboration alone, end to end (solo_and_report.cpp).
SoloRun run_solo(const Options& o, ServerProcess& server, Recorder& rec, const fs::path& work,
                 int rep, dcalign::Backend& backend);
/// A number for the report's tables ("-" for NaN).
std::string fmt(double v, int digits = 2);
/// The report as Markdown.
std::string markdown(json r);
void write_json(const std::string& path, const json& j);

}  // namespace dcalign::bench_service_load
