// dcalign_sweep: the timing study of paper 001, section 6 (Fig. 6, Table 5), with the plain
// NumPy implementation of the same procedures timed point by point in the same run.
//
//   dcalign_sweep --sweep c --out bench/results/cpu/sweep_c.json
//   dcalign_sweep --sweep a --values 1000,20000 --repetitions 10 --out issue2_a.json
//
// For every point of the sweep: uniform random anchors from the seed, then for each series
// (dcalign method x backend x precision, then each peer's method x precision) warm-up runs and
// timed repetitions. After every point the JSON (schema in bench/README.md) and a CSV are
// rewritten atomically, so an interrupted sweep resumes where it stopped when run again with
// the same arguments.
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"
#include "dcalign/random.hpp"
#include "sweep/sweep.hpp"

extern "C" {
char* openblas_get_config(void);
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

#ifndef DCALIGN_BENCH_DIR
#define DCALIGN_BENCH_DIR "bench"
#endif
#ifndef DCALIGN_SOURCE_DIR
#define DCALIGN_SOURCE_DIR "."
#endif
#ifndef DCALIGN_VERSION
#define DCALIGN_VERSION "unknown"
#endif
#ifndef DCALIGN_BUILD_TYPE
#define DCALIGN_BUILD_TYPE "unknown"
#endif

namespace fs = std::filesystem;
using dcalign::bench::json;
using dcalign::bench::Series;
using dcalign::bench::Shape;
using dcalign::bench::SweepConfig;

namespace {

using dcalign::bench::now_seconds;
using dcalign::bench::utc_timestamp;

json load_average() {
  std::ifstream f("/proc/loadavg");
  double l1 = 0, l5 = 0, l15 = 0;
  if (!(f >> l1 >> l5 >> l15)) return nullptr;
  return json::array({l1, l5, l15});
}

// CPU time of the whole machine and of this process (with its waited-for children, i.e. the
// peers), in seconds. The difference over a point is what other processes used meanwhile.
struct CpuSample {
  double wall = 0, busy = 0, own = 0;
};

CpuSample sample_cpu() {
  CpuSample s;
  s.wall = now_seconds();
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::ifstream st("/proc/stat");
  std::string label;
  long long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  st >> label;
  for (auto& x : v) st >> x;
  // user nice system idle iowait irq softirq steal: everything but idle and iowait is busy.
  s.busy = static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tick;
  std::ifstream self("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
  const auto close = all.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(all.substr(close + 2));
    std::vector<std::string> f;
    std::string tok;
    while (rest >> tok) f.push_back(tok);
    // Fields 14-17 of proc(5) (utime, stime, cutime, cstime) are 11-14 after the ')'.
    if (f.size() > 14)
      s.own = static_cast<double>(std::stoll(f[11]) + std::stoll(f[12]) + std::stoll(f[13]) +
                                  std::stoll(f[14])) /
              tick;
  }
  return s;
}

// CPU time other processes used between two samples, as a fraction of all logical CPUs.
double other_cpu_fraction(const CpuSample& a, const CpuSample& b) {
  const double cpus = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  const double wall = b.wall - a.wall;
  if (wall <= 0) return 0;
  const double f = ((b.busy - a.busy) - (b.own - a.own)) / (wall * cpus);
  return std::min(1.0, std::max(0.0, f));
}

// Output of a shell command (stdout), or "" when it fails. Only for descriptive fields.
std::string command_output(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    if (status) *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (status) *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

std::string chomp(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

json describe_cpu() {
  json cpu;
  std::ifstream f("/proc/cpuinfo");
  std::string line, model;
  std::set<std::pair<std::string, std::string>> cores;
  std::string phys, core;
  while (std::getline(f, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string val = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model.empty()) model = val;
    if (key == "physical id") phys = val;
    if (key == "core id") {
      core = val;
      cores.insert({phys, core});
    }
  }
  cpu["model"] = model;
  cpu["logical_cpus"] = sysconf(_SC_NPROCESSORS_ONLN);
  cpu["physical_cores"] = cores.empty() ? json(nullptr) : json(cores.size());
  std::ifstream m("/proc/meminfo");
  std::string k;
  long kb = 0;
  if (m >> k >> kb && k == "MemTotal:") cpu["memory_gib"] = static_cast<double>(kb) / 1048576.0;
  return cpu;
}

std::string compiler_name() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("gcc ") + __VERSION__;
#else
  return "unknown";
#endif
}

// ---------------------------------------------------------------------------------------------
// dcalign runner: one align() call per repetition, timed from outside with the steady clock.

class DcalignRunner final : public dcalign::bench::Runner {
 public:
  DcalignRunner(const SweepConfig& cfg,
                std::map<std::string, std::shared_ptr<dcalign::Backend>> backends)
      : cfg_(cfg), backends_(std::move(backends)) {}

  bool handles(const Series& s) const override { return s.impl == "dcalign"; }

  std::vector<json> run(const Shape& shape, const std::vector<Series>& todo) override {
    bool f32 = false, f64 = false;
    for (const auto& s : todo) (s.precision == "float32" ? f32 : f64) = true;
    // Anchors depend on the seed and the point only, so a resumed sweep or a different value
    // list measures the same matrices at the same point.
    dcalign::Stack<double> A64 = anchors(shape);
    dcalign::Stack<float> A32;
    if (f32) {
      A32 = dcalign::Stack<float>(shape.c, shape.a, shape.l);
      for (dcalign::index_t i = 0; i < A64.size(); ++i)
        A32.data()[i] = static_cast<float>(A64.data()[i]);
    }
    if (!f64) A64 = dcalign::Stack<double>();
    std::vector<json> out;
    for (const auto& s : todo) {
      try {
        auto& backend = *backends_.at(s.backend);
        out.push_back(s.precision == "float32" ? measure(A32, s, backend)
                                               : measure(A64, s, backend));
      } catch (const std::exception& e) {
        out.push_back(dcalign::bench::make_failed(s, "error", e.what()));
      }
    }
    return out;
  }

 private:
  dcalign::Stack<double> anchors(const Shape& s) const {
    dcalign::Stack<double> A(s.c, s.a, s.l);
    const std::uint64_t id = (static_cast<std::uint64_t>(s.a) << 42) ^
                             (static_cast<std::uint64_t>(s.l) << 21) ^
                             static_cast<std::uint64_t>(s.c);
    dcalign::Rng rng = dcalign::Rng::stream(cfg_.seed, id);
    for (dcalign::index_t i = 0; i < A.size(); ++i) A.data()[i] = rng.uniform();
    return A;
  }

  dcalign::AlignOptions options(const Series& s) const {
    dcalign::AlignOptions o;
    o.method = dcalign::parse_method(s.method);
    o.seed = cfg_.seed;
    o.evaluate = false;  // the metrics pass is not part of the method
    o.svd.algorithm = dcalign::parse_svd_algorithm(cfg_.svd);
    o.svd.oversampling = cfg_.oversampling;
    o.svd.power_iterations = cfg_.power_iterations;
    o.svd.seed = cfg_.seed;
    o.polar = dcalign::parse_polar_method(cfg_.polar);
    return o;
  }

  template <typename T>
  json measure(const dcalign::Stack<T>& A, const Series& s, dcalign::Backend& backend) {
    const dcalign::AlignOptions o = options(s);
    std::vector<double> warm, times;
    std::map<std::string, std::vector<double>> phases;
    std::vector<std::string> order;
    for (int r = 0; r < cfg_.warmup + cfg_.repetitions; ++r) {
      const double t0 = now_seconds();
      auto result = dcalign::align(A, o, backend);
      const double t = now_seconds() - t0;
      if (r < cfg_.warmup) {
        warm.push_back(t);
        continue;
      }
      times.push_back(t);
      for (const auto& [name, sec] : result.report.seconds) {
        if (!phases.count(name)) order.push_back(name);
        phases[name].push_back(sec);
      }
    }
    json r = dcalign::bench::make_result(s, warm, times);
    // Median of each phase of the library's own report, for profiling (they need not add up
    // to the median total).
    json ph = json::object();
    for (const auto& name : order) ph[name] = dcalign::bench::summarize(phases[name]).median;
    r["phase_medians"] = ph;
    return r;
  }

  const SweepConfig& cfg_;
  std::map<std::string, std::shared_ptr<dcalign::Backend>> backends_;
};

// ---------------------------------------------------------------------------------------------
// Peer runner: one process of bench/<peer>_peer.py per point. The protocol: arguments describe
// the point and the series, the script prints one JSON object {"results": [{method, precision,
// status, warmup_seconds, seconds | reason}]} on stdout. Statistics are computed here, with the
// same code as for dcalign.

class PeerRunner final : public dcalign::bench::Runner {
 public:
  PeerRunner(const SweepConfig& cfg, std::string peer, std::string python, std::string dir)
      : cfg_(cfg), peer_(std::move(peer)), python_(std::move(python)), dir_(std::move(dir)) {}

  bool handles(const Series& s) const override { return s.impl == peer_; }
  const std::string& name() const { return peer_; }

  std::string base_command() const {
    const std::string n = std::to_string(cfg_.threads);
    // One thread count for both: OpenBLAS (NumPy's BLAS here), OpenMP and MKL if present.
    return "env OPENBLAS_NUM_THREADS=" + n + " OMP_NUM_THREADS=" + n + " MKL_NUM_THREADS=" + n +
           " " + shell_quote(python_) + " " + shell_quote(dir_ + "/" + peer_ + "_peer.py");
  }

  json describe() const {
    int rc = 0;
    const std::string out = command_output(base_command() + " --describe", &rc);
    json j = json::parse(out, nullptr, false);
    if (rc != 0 || j.is_discarded())
      return json{{"error",
                   "'" + base_command() + " --describe' failed (exit " + std::to_string(rc) + ")"}};
    return j;
  }

  std::vector<json> run(const Shape& shape, const std::vector<Series>& todo) override {
    std::string series;
    for (const auto& s : todo) series += (series.empty() ? "" : ",") + s.method + ":" + s.precision;
    std::ostringstream cmd;
    cmd << base_command() << " --a " << shape.a << " --l " << shape.l << " --c " << shape.c
        << " --series " << series << " --warmup " << cfg_.warmup << " --repetitions "
        << cfg_.repetitions << " --seed " << cfg_.seed << " --svd " << cfg_.svd
        << " --oversampling " << cfg_.oversampling << " --power-iterations "
        << cfg_.power_iterations;
    int rc = 0;
    const std::string out = command_output(cmd.str(), &rc);
    json j = json::parse(out, nullptr, false);
    std::vector<json> results;
    if (rc != 0 || j.is_discarded() || !j.contains("results")) {
      const std::string why = "peer exited with status " + std::to_string(rc) +
                              (j.is_discarded() ? " without a JSON answer" : "") +
                              " (its stderr is in the driver's log): " + cmd.str();
      for (const auto& s : todo) results.push_back(dcalign::bench::make_failed(s, "error", why));
      return results;
    }
    for (const auto& s : todo) {
      json found;
      for (const auto& r : j["results"])
        if (r.value("method", "") == s.method && r.value("precision", "") == s.precision) found = r;
      if (found.is_null()) {
        results.push_back(dcalign::bench::make_failed(s, "error", "peer gave no result"));
      } else if (found.value("status", "") != "ok") {
        results.push_back(dcalign::bench::make_failed(s, found.value("status", "error"),
                                                      found.value("reason", "")));
      } else {
        json r = dcalign::bench::make_result(s, found["warmup_seconds"].get<std::vector<double>>(),
                                             found["seconds"].get<std::vector<double>>());
        if (found.contains("notes")) r["notes"] = found["notes"];
        results.push_back(r);
      }
    }
    return results;
  }

 private:
  const SweepConfig& cfg_;
  std::string peer_, python_, dir_;
};

json describe_machine(const SweepConfig& cfg,
                      const std::map<std::string, std::shared_ptr<dcalign::Backend>>& backends,
                      const std::vector<std::unique_ptr<PeerRunner>>& peers) {
  json m;
  m["cpu"] = describe_cpu();
  struct utsname u;
  if (uname(&u) == 0) m["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  m["threads"] = cfg.threads;
  m["openblas_config"] = openblas_get_config();
  m["openblas_threads"] = openblas_get_num_threads();
  m["compiler"] = compiler_name();
  m["build_type"] = DCALIGN_BUILD_TYPE;
  m["dcalign_version"] = DCALIGN_VERSION;
  int rc = 0;
  const std::string src = shell_quote(DCALIGN_SOURCE_DIR);
  std::string commit = chomp(command_output("git -C " + src + " rev-parse HEAD 2>/dev/null", &rc));
  if (rc == 0 && !commit.empty()) {
    const std::string dirty =
        command_output("git -C " + src +
                       " status --porcelain --untracked-files=no -- src include "
                       "2>/dev/null");
    m["git_commit"] = commit;
    m["git_dirty_library"] = !chomp(dirty).empty();  // uncommitted changes in src/ or include/
  } else {
    m["git_commit"] = nullptr;
  }
  json be = json::object();
  for (const auto& [name, b] : backends) be[name] = b->description();
  m["backends"] = be;
  m["gpu"] = nullptr;
  if (backends.count("cuda")) {
    json gpu;
    gpu["backend"] = backends.at("cuda")->description();
    const std::string smi = chomp(command_output(
        "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader "
        "2>/dev/null"));
    gpu["nvidia_smi"] = smi.empty() ? json(nullptr) : json(smi);
    m["gpu"] = gpu;
  }
  json pj = json::object();
  for (const auto& p : peers) pj[p->name()] = p->describe();
  m["peers"] = pj;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dcalign_sweep: wall-clock sweep over one of a, l, c (paper 001, Table 5 and Fig. 6), "
      "with the NumPy peer timed in the same run"};
  std::string sweep, values, methods = "odc,imakura,kawakami", precisions = "float64",
                             backends_opt = "cpu", peers_opt = "numpy", out, svd = "randomized",
                             polar = "auto";
  long a = 0, l = 0, c = 0, oversampling = 10;
  int warmup = 1, reps = 5, threads = 0, power = 2;
  std::uint64_t seed = 20240601;
  double max_seconds = 60;
  bool restart = false;
  double quiet_below = 0, quiet_max_wait = 600, redo_busy = -1;
  std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::string peer_dir = DCALIGN_BENCH_DIR;
  app.add_option("--sweep", sweep, "free parameter: a, l or c")->required();
  app.add_option("--values", values,
                 "values of the free parameter: start:step:stop and/or comma-separated "
                 "(default: Table 5: l 50:50:950, a 1000:1000:20000, c 50:50:1000)");
  app.add_option("--a", a, "anchor size a when not swept (default 1000)");
  app.add_option("--l", l, "dimension l when not swept (default 50)");
  app.add_option("--c", c, "number of users c when not swept (default 50)");
  app.add_option("--methods", methods, "comma-separated: odc, imakura, kawakami, gopp")
      ->capture_default_str();
  app.add_option("--precisions", precisions, "comma-separated: float64, float32")
      ->capture_default_str();
  app.add_option("--backends", backends_opt, "comma-separated: cpu, cuda")->capture_default_str();
  app.add_option("--peers", peers_opt,
                 "comma-separated peers timed in the same run: numpy (CPU), torch (PyTorch on "
                 "the GPU, bench/torch_peer.py), or none")
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed runs per series and point")->capture_default_str();
  app.add_option("--repetitions", reps, "timed runs per series and point (paper: 100)")
      ->capture_default_str();
  app.add_option("--seed", seed, "seed of the anchors and of all random draws")
      ->capture_default_str();
  app.add_option("--threads", threads,
                 "threads for dcalign (BLAS and users) and for the peers' BLAS; 0: all logical "
                 "CPUs")
      ->capture_default_str();
  app.add_option("--max-seconds", max_seconds,
                 "once a series' median at a point exceeds this, its larger points are skipped "
                 "(0: no cap)")
      ->capture_default_str();
  app.add_option("--svd", svd,
                 "SVD of Imakura-DC and Kawakami-DC: randomized (paper), exact or gram")
      ->capture_default_str();
  app.add_option("--oversampling", oversampling, "randomized SVD oversampling")
      ->capture_default_str();
  app.add_option("--power-iterations", power, "randomized SVD power iterations")
      ->capture_default_str();
  app.add_option("--polar", polar,
                 "ODC/GOPP polar factors: auto (the library's choice), svd or iterative")
      ->capture_default_str();
  app.add_option("--out", out, "output JSON (the CSV goes next to it, .csv)")->required();
  app.add_flag("--restart", restart, "discard an existing output file instead of resuming it");
  app.add_option("--quiet-below", quiet_below,
                 "before each point, wait until other processes use less than this fraction "
                 "of the CPUs (over 2 s); 0: do not wait")
      ->capture_default_str();
  app.add_option("--quiet-max-wait", quiet_max_wait,
                 "give up waiting for quiet after this many seconds per point (then measure)")
      ->capture_default_str();
  app.add_option("--redo-busy", redo_busy,
                 "when resuming, re-measure points during which other processes used more than "
                 "this fraction of the CPUs; negative: keep every finished point")
      ->capture_default_str();
  app.add_option("--python", python, "Python interpreter of the peers")->capture_default_str();
  app.add_option("--peer-dir", peer_dir, "directory holding <peer>_peer.py")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    SweepConfig cfg = dcalign::bench::paper_defaults(sweep);
    if (!values.empty()) cfg.values = dcalign::bench::parse_values(values);
    if (a > 0) cfg.a = a;
    if (l > 0) cfg.l = l;
    if (c > 0) cfg.c = c;
    cfg.methods = dcalign::bench::split_list(methods);
    cfg.precisions = dcalign::bench::split_list(precisions);
    cfg.backends = dcalign::bench::split_list(backends_opt);
    cfg.peers =
        peers_opt == "none" ? std::vector<std::string>{} : dcalign::bench::split_list(peers_opt);
    cfg.warmup = warmup;
    cfg.repetitions = reps;
    cfg.seed = seed;
    cfg.threads = threads > 0 ? threads : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    cfg.max_seconds = max_seconds;
    cfg.svd = svd;
    cfg.oversampling = oversampling;
    cfg.power_iterations = power;
    cfg.polar = polar;
    cfg.validate();

    // One thread count for everything: OpenBLAS inside dcalign, dcalign's loops over users,
    // and (through the environment) the peers.
    openblas_set_num_threads(cfg.threads);
    setenv("OPENBLAS_NUM_THREADS", std::to_string(cfg.threads).c_str(), 1);
    setenv("OMP_NUM_THREADS", std::to_string(cfg.threads).c_str(), 1);

    // Backends first: an unavailable device (e.g. cuda without a GPU) stops here with the
    // library's reason, before anything is measured.
    std::map<std::string, std::shared_ptr<dcalign::Backend>> backends;
    for (const auto& b : cfg.backends)
      backends[b] = dcalign::make_backend(dcalign::parse_device(b),
                                          dcalign::BackendOptions{cfg.threads, 0, false});

    std::vector<std::unique_ptr<PeerRunner>> peers;
    for (const auto& p : cfg.peers)
      peers.push_back(std::make_unique<PeerRunner>(cfg, p, python, peer_dir));

    const json machine = describe_machine(cfg, backends, peers);
    std::unique_ptr<dcalign::bench::SweepDoc> doc;
    if (fs::exists(out) && !restart) {
      try {
        doc = std::make_unique<dcalign::bench::SweepDoc>(
            dcalign::bench::SweepDoc::resume(cfg, dcalign::bench::read_document(out), machine));
      } catch (const dcalign::bench::ResumeMismatch& e) {
        std::cerr << "dcalign_sweep: error: cannot resume " << out << ": " << e.what()
                  << "\nRun with the same parameters to resume, pass --restart to discard the "
                     "file, or choose another --out.\n";
        return 2;
      }
    } else {
      if (fs::exists(out)) std::cerr << "[sweep] --restart: discarding " << out << "\n";
      doc = std::make_unique<dcalign::bench::SweepDoc>(cfg, machine);
    }

    std::string command;
    for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
    doc->begin_session({{"started", utc_timestamp()},
                        {"command", command},
                        {"cwd", fs::current_path().string()},
                        {"cpu_model", machine["cpu"]["model"]},
                        {"threads", cfg.threads},
                        {"load_average_start", load_average()}});

    std::vector<dcalign::bench::Runner*> runners;
    DcalignRunner dc(cfg, backends);
    runners.push_back(&dc);
    for (auto& p : peers) runners.push_back(p.get());

    const fs::path json_path(out);
    fs::path csv_path = json_path;
    csv_path.replace_extension(".csv");
    if (json_path.has_parent_path()) fs::create_directories(json_path.parent_path());

    doc->set_redo_above(redo_busy);
    dcalign::bench::LoopHooks hooks;
    hooks.clock = now_seconds;
    CpuSample point_start;
    hooks.before_point = [&] {
      // Other users of this machine distort timings: optionally wait for a quiet moment, and
      // in any case record how busy it was before and during the point.
      const double t0 = now_seconds();
      double before = 0;
      bool quiet = true;
      for (;;) {
        const CpuSample a = sample_cpu();
        usleep(2000000);
        before = other_cpu_fraction(a, sample_cpu());
        if (quiet_below <= 0 || before < quiet_below) break;
        if (now_seconds() - t0 > quiet_max_wait) {
          quiet = false;
          std::cerr << "[sweep] still busy after " << quiet_max_wait << " s (other processes use "
                    << before << " of the CPUs); measuring anyway\n";
          break;
        }
        std::cerr << "[sweep] waiting: other processes use " << before << " of the CPUs\n";
        usleep(8000000);
      }
      json extra{{"started", utc_timestamp()},
                 {"load_average_start", load_average()},
                 {"other_cpu_before", before}};
      if (quiet_below > 0) {
        extra["waited_seconds"] = now_seconds() - t0;
        extra["quiet"] = quiet;
      }
      point_start = sample_cpu();
      return extra;
    };
    hooks.after_point = [&] {
      return json{{"load_average_end", load_average()},
                  {"other_cpu_fraction", other_cpu_fraction(point_start, sample_cpu())}};
    };
    const int n = dcalign::bench::run_sweep(*doc, cfg, runners, json_path.string(),
                                            csv_path.string(), std::cerr, hooks);
    doc->end_session({{"finished", utc_timestamp()},
                      {"points_measured", n},
                      {"load_average_end", load_average()}});
    dcalign::bench::write_file_atomic(json_path.string(), doc->doc().dump(1) + "\n");
    std::cerr << "[sweep] wrote " << json_path.string() << " and " << csv_path.string() << "\n";
    return 0;
  } catch (const dcalign::bench::UsageError& e) {
    std::cerr << "dcalign_sweep: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dcalign_sweep: error: " << e.what() << "\n";
    return 1;
  }
}
