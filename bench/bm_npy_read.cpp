// How fast read_npy_stack<double> reads a large anchor stack, against reading the same bytes.
//
// Writes three ~400 MB .npy files (float64 C order, float64 Fortran order, float32 C order) into
// $DCALIGN_NPY_BENCH_DIR (default /tmp), warms the page cache, then times, once per repetition:
//   cat/<file>        `cat FILE > /dev/null` through std::system (what the acceptance names),
//   read_loop/<file>  read() of the whole file into one 128 KiB buffer, as cat does, in process,
//   npy_stack/<file>  dcalign::read_npy_stack<double>(FILE) (the Stack's release is not timed),
//   npy_stack_float/f4_C  read_npy_stack<float> of the float32 file, for comparison: <double>
//                     writes twice the file's bytes into fresh memory,
// and prints the median of each with the ratios npy_stack / cat and npy_stack / read_loop, the
// load average and the share of the CPUs that other processes used meanwhile.
// The files are deleted at the end (also when the benchmark filter excludes them).
//
//   bm_npy_read --benchmark_enable_random_interleaving=true
//   DCALIGN_NPY_BENCH_REPS=15 DCALIGN_NPY_BENCH_SHAPE=50,20000,50 bm_npy_read
//
// Each repetition is one read (Iterations(1)); the per-read times are kept here, so the summary's
// medians do not depend on Google Benchmark's aggregates. Random interleaving spreads any change
// of machine load over all the measurements instead of one. The float32 file has twice the
// columns (l) of the float64 ones, so that all three files have the same size.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dcalign/npy.hpp"

namespace {

using dcalign::index_t;

struct BenchFile {
  std::string name;  // e.g. "f8_C"
  std::string path;
  bool f32 = false;
  bool fortran = false;
  index_t c = 0, a = 0, l = 0;
};

// Per-read wall times in seconds, by benchmark name.
std::map<std::string, std::vector<double>>& samples() {
  static std::map<std::string, std::vector<double>> s;
  return s;
}

// The value stored at arr[s, i, j]: distinct, not small integers, cheap to compute.
double value_at(index_t s, index_t i, index_t j) {
  return static_cast<double>(s) * 1.5 + static_cast<double>(i) * 1e-3 -
         static_cast<double>(j) * 0.37;
}

// Writes a version 1.0 file of shape (c, a, l) with element arr[s, i, j] = value_at(s, i, j).
void write_file(const BenchFile& f) {
  std::string header = std::string("{'descr': '<") + (f.f32 ? "f4" : "f8") +
                       "', 'fortran_order': " + (f.fortran ? "True" : "False") + ", 'shape': (" +
                       std::to_string(f.c) + ", " + std::to_string(f.a) + ", " +
                       std::to_string(f.l) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(f.path, std::ios::binary | std::ios::trunc);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size() & 0xff),
                       static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  // In file order: C order is (s, i, j) with j fastest; Fortran order has s fastest.
  const index_t n0 = f.fortran ? f.l : f.c, n1 = f.a, n2 = f.fortran ? f.c : f.l;
  std::vector<char> buf;
  for (index_t x = 0; x < n0 && out; ++x) {
    buf.clear();
    for (index_t y = 0; y < n1; ++y)
      for (index_t z = 0; z < n2; ++z) {
        const double v = f.fortran ? value_at(z, y, x) : value_at(x, y, z);
        char bytes[8];
        if (f.f32) {
          const float w = static_cast<float>(v);
          std::memcpy(bytes, &w, 4);
          buf.insert(buf.end(), bytes, bytes + 4);
        } else {
          std::memcpy(bytes, &v, 8);
          buf.insert(buf.end(), bytes, bytes + 8);
        }
      }
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  }
  out.close();
  if (!out) throw std::runtime_error("cannot write " + f.path);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void record(benchmark::State& st, const std::string& name, double s) {
  st.SetIterationTime(s);
  samples()[name].push_back(s);
}

std::size_t raw_read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  std::vector<char> buf(128 * 1024);
  std::size_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    total += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return total;
}

void bm_cat(benchmark::State& st, const BenchFile* f, const std::string& name) {
  const std::string cmd = "cat '" + f->path + "' > /dev/null";
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = std::system(cmd.c_str());
    record(st, name, seconds_since(t0));
    if (rc != 0) st.SkipWithError("cat failed");
  }
}

void bm_read_loop(benchmark::State& st, const BenchFile* f, const std::string& name) {
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(raw_read(f->path));
    record(st, name, seconds_since(t0));
  }
}

template <typename T>
void bm_npy_stack(benchmark::State& st, const BenchFile* f, const std::string& name) {
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    dcalign::Stack<T> s = dcalign::read_npy_stack<T>(f->path);
    record(st, name, seconds_since(t0));
    // Spot checks outside the timed region: the benchmark must not time a wrong reader.
    const index_t pts[3][3] = {{0, 0, 0},
                               {f->c - 1, f->a / 2, f->l - 1},
                               {f->c / 3, std::min<index_t>(7, f->a - 1), f->l / 2}};
    for (const auto& p : pts) {
      const double v = value_at(p[0], p[1], p[2]);
      const T want = f->f32 ? static_cast<T>(static_cast<float>(v)) : static_cast<T>(v);
      if (s.count() != f->c || s.rows() != f->a || s.cols() != f->l || s(p[0], p[1], p[2]) != want)
        st.SkipWithError("read_npy_stack returned wrong data");
    }
  }
}

// What the machine did during the measurements: the load average, and the share of all CPUs
// that other processes used (busy time from /proc/stat minus this process's and its children's).
struct MachineSample {
  double busy_s = 0, own_s = 0, wall_s = 0, load1 = -1;
};

MachineSample sample_machine() {
  MachineSample m;
  m.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  if (std::FILE* f = std::fopen("/proc/stat", "r")) {
    unsigned long long v[8] = {};
    if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5], &v[6], &v[7]) == 8)
      m.busy_s = static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tick;
    std::fclose(f);
  }
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &m.load1) != 1) m.load1 = -1;
    std::fclose(f);
  }
  for (const int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    ::getrusage(who, &u);
    m.own_s += static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
               1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  }
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

std::vector<index_t> env_shape() {
  std::vector<index_t> shape = {50, 20000, 50};
  if (const char* s = std::getenv("DCALIGN_NPY_BENCH_SHAPE")) {
    shape.clear();
    std::string t = s;
    std::size_t pos = 0;
    while (pos <= t.size()) {
      const std::size_t comma = std::min(t.find(',', pos), t.size());
      shape.push_back(std::stoll(t.substr(pos, comma - pos)));
      pos = comma + 1;
    }
    if (shape.size() != 3) throw std::runtime_error("DCALIGN_NPY_BENCH_SHAPE must be c,a,l");
  }
  return shape;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const char* dir_env = std::getenv("DCALIGN_NPY_BENCH_DIR");
  const std::string dir = dir_env ? dir_env : "/tmp";
  const char* reps_env = std::getenv("DCALIGN_NPY_BENCH_REPS");
  const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 9;
  const std::vector<index_t> shape = env_shape();
  const std::string prefix = dir + "/dcalign_bm_npy_" + std::to_string(::getpid()) + "_";

  // float32 files get twice the columns, so that all three have the same byte count.
  std::vector<BenchFile> files = {
      {"f8_C", prefix + "f8_C.npy", false, false, shape[0], shape[1], shape[2]},
      {"f8_F", prefix + "f8_F.npy", false, true, shape[0], shape[1], shape[2]},
      {"f4_C", prefix + "f4_C.npy", true, false, shape[0], shape[1], 2 * shape[2]},
  };
  std::vector<std::string> names;
  int rc = 0;
  try {
    for (const BenchFile& f : files) {
      write_file(f);
      std::fprintf(stderr, "wrote %s (%.1f MB, shape (%lld, %lld, %lld), %s, %s order)\n",
                   f.path.c_str(), static_cast<double>(std::filesystem::file_size(f.path)) / 1e6,
                   static_cast<long long>(f.c), static_cast<long long>(f.a),
                   static_cast<long long>(f.l), f.f32 ? "float32" : "float64",
                   f.fortran ? "Fortran" : "C");
      raw_read(f.path);  // warm the page cache
      raw_read(f.path);
      std::vector<std::string> kinds = {"cat", "read_loop", "npy_stack"};
      if (f.f32) kinds.push_back("npy_stack_float");  // the same file without widening
      for (const std::string& kind : kinds) {
        const std::string name = kind + "/" + f.name;
        auto* fn = kind == "cat"               ? &bm_cat
                   : kind == "read_loop"       ? &bm_read_loop
                   : kind == "npy_stack_float" ? &bm_npy_stack<float>
                                               : &bm_npy_stack<double>;
        benchmark::RegisterBenchmark(name.c_str(), fn, &f, name)
            ->Iterations(1)
            ->Repetitions(reps)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
    const MachineSample before = sample_machine();
    benchmark::RunSpecifiedBenchmarks();
    const MachineSample after = sample_machine();
    const double cpus = static_cast<double>(::sysconf(_SC_NPROCESSORS_ONLN));
    const double others = ((after.busy_s - before.busy_s) - (after.own_s - before.own_s)) /
                          (cpus * (after.wall_s - before.wall_s));
    std::printf(
        "\nload average (1 min) %.2f before, %.2f after; other processes used %.0f%% of "
        "the %.0f CPUs meanwhile\n",
        before.load1, after.load1, 100.0 * std::max(0.0, others), cpus);

    std::printf(
        "\nmedians over %d reads each (ms); ratio = npy_stack / cat, npy_stack / read_loop\n",
        reps);
    std::printf("%-6s %-16s %10s %10s %10s %10s %12s\n", "file", "read_npy_stack", "cat",
                "read_loop", "npy_stack", "ratio_cat", "ratio_loop");
    for (const BenchFile& f : files) {
      const double cat = median(samples()["cat/" + f.name]);
      const double loop = median(samples()["read_loop/" + f.name]);
      for (const char* kind : {"npy_stack", "npy_stack_float"}) {
        const auto it = samples().find(std::string(kind) + "/" + f.name);
        if (it == samples().end() || cat == 0 || loop == 0) continue;  // filtered out
        const double npy = median(it->second);
        std::printf("%-6s %-16s %10.1f %10.1f %10.1f %10.2f %12.2f\n", f.name.c_str(),
                    kind == std::string("npy_stack") ? "<double>" : "<float>", 1e3 * cat,
                    1e3 * loop, 1e3 * npy, npy / cat, npy / loop);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bm_npy_read: %s\n", e.what());
    rc = 1;
  }
  for (const BenchFile& f : files) {
    std::error_code ec;
    std::filesystem::remove(f.path, ec);
  }
  benchmark::Shutdown();
  return rc;
}
