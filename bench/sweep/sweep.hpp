#pragma once
// The logic of the sweep driver (bench/dcalign_sweep.cpp) without any timing: value lists, the
// JSON document of one sweep, resume, the per-point time cap and the point loop. Kept out of
// main() so that tests/bench can check it with fake runners.
//
// The document's schema ("dcalign-sweep/1") is described in bench/README.md.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dcalign::bench {

// Ordered so that files keep the key order they were written with (readable diffs).
using json = nlohmann::ordered_json;

inline constexpr const char* kSchema = "dcalign-sweep/1";

/// A bad option or value list; main() prints it and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An existing output file that cannot be resumed with the requested parameters.
class ResumeMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses "50:50:950" (start:step:stop with stop included, as in the paper's Table 5),
/// "1000,5000", "7", or a comma-separated mix such as "50:50:200,500". Values must be positive
/// and distinct; the order given is kept.
std::vector<long> parse_values(const std::string& spec);

/// Splits "odc, imakura" into {"odc", "imakura"}; empty items are an error.
std::vector<std::string> split_list(const std::string& s);

/// One timed configuration: who computes, which method, on which device, in which precision.
struct Series {
  std::string impl;       ///< "dcalign", or a peer: "numpy", "torch"
  std::string method;     ///< odc, imakura, kawakami, gopp
  std::string backend;    ///< cpu, cuda
  std::string precision;  ///< float64, float32
  /// "dcalign/odc/cpu/float64": the series' name in logs and the CSV.
  std::string key() const;
  bool operator==(const Series& o) const {
    return impl == o.impl && method == o.method && backend == o.backend && precision == o.precision;
  }
};

struct Shape {
  long a = 0, l = 0, c = 0;
};

struct SweepConfig {
  std::string sweep;              ///< the free parameter: "a", "l" or "c"
  std::vector<long> values;       ///< its values, in the order they are measured
  long a = 1000, l = 50, c = 50;  ///< the fixed pair (the swept one is ignored)
  std::vector<std::string> methods{"odc", "imakura", "kawakami"};
  std::vector<std::string> precisions{"float64"};
  std::vector<std::string> backends{"cpu"};
  std::vector<std::string> peers{"numpy"};
  int warmup = 1;
  int repetitions = 5;
  std::uint64_t seed = 20240601;
  int threads = 1;                 ///< resolved (main() turns 0 into the number of logical CPUs)
  double max_seconds = 60;         ///< per-point cap on a series' median; 0 disables it
  std::string svd = "randomized";  ///< SVD for Imakura, Kawakami and GOPP's start
  long oversampling = 10;
  int power_iterations = 2;
  std::string polar = "auto";  ///< ODC/GOPP polar factors: auto, svd or iterative

  Shape shape_at(long x) const;
  /// Every series: dcalign on each backend, then each peer on its device, each over the
  /// methods and precisions. A peer runs the paper's three methods only (not GOPP).
  std::vector<Series> series() const;
  /// The "parameters" object of the document; resume compares it.
  json parameters() const;
  /// Throws UsageError naming the first bad field.
  void validate() const;
};

/// The paper's Table 5 setting for one sweep: its range and the fixed pair.
SweepConfig paper_defaults(const std::string& sweep);

/// Device a peer computes on: numpy on the CPU, torch on the GPU.
std::string peer_backend(const std::string& peer);

struct Stats {
  double median = 0, min = 0, max = 0;
};
/// Median (mean of the two middle values for an even count), minimum and maximum.
Stats summarize(std::vector<double> v);

/// Result objects of the "results" array of a point.
json make_result(const Series& s, const std::vector<double>& warmup,
                 const std::vector<double>& seconds);
json make_failed(const Series& s, const std::string& status, const std::string& reason);

/// Times a set of series at one point. One runner per implementation (dcalign, each peer).
class Runner {
 public:
  virtual ~Runner() = default;
  virtual bool handles(const Series& s) const = 0;
  /// One result object per series in `todo`, in any order.
  virtual std::vector<json> run(const Shape& shape, const std::vector<Series>& todo) = 0;
};

/// The JSON document of one sweep.
class SweepDoc {
 public:
  SweepDoc(const SweepConfig& cfg, json machine);
  /// Continues `existing` (a parsed file of this schema). Every parameter except the value list
  /// must match; otherwise throws ResumeMismatch naming the differences. Points already in the
  /// file are kept whether or not they are in the new value list.
  static SweepDoc resume(const SweepConfig& cfg, json existing, json machine);

  bool has_point(long x) const;
  /// Every configured value has a point (possibly one to be re-measured).
  bool all_present() const;
  /// Points whose "other_cpu_fraction" (CPU time of other processes during the point, as a
  /// fraction of all CPUs) is above `fraction` count as pending again, so that a later, quieter
  /// run re-measures them. Negative (the default) keeps every finished point.
  void set_redo_above(double fraction) { redo_above_ = fraction; }
  /// Values of the configuration not yet in the document (or to be re-measured), in the
  /// configured order.
  std::vector<long> pending() const;
  /// Empty when `s` is to be measured at x; otherwise why not: a smaller x at which the
  /// series' median exceeded max_seconds.
  std::string cap_reason(const Series& s, long x) const;
  /// Adds a point, replacing one with the same x (kept sorted by x). `extra` is merged into the
  /// point object.
  void add_point(long x, std::vector<json> results, const json& extra);
  /// Records the start of a driver session (command line, load average).
  void begin_session(const json& session);
  void end_session(const json& fields);
  void set_complete(bool complete);

  const json& doc() const { return doc_; }
  std::string csv() const;

 private:
  SweepDoc() = default;
  const json* find_point(long x) const;
  SweepConfig cfg_;
  json doc_;
  double redo_above_ = -1;
};

/// Writes `content` to `path` through a temporary file in the same directory and a rename, so
/// that a reader (or a resumed run after a crash) sees either the old or the new file.
void write_file_atomic(const std::string& path, const std::string& content);

/// Reads and parses a document; throws ResumeMismatch if it is not JSON of this schema.
json read_document(const std::string& path);

struct LoopHooks {
  /// Extra fields for a point before it is measured (time stamp, load average).
  std::function<json()> before_point;
  /// Extra fields after it (load average at the end).
  std::function<json()> after_point;
  /// Wall clock in seconds (replaced in tests).
  std::function<double()> clock;
};

/// Measures every pending point with the runners; after each point writes the JSON (and the CSV
/// when csv_path is non-empty) atomically. Progress lines go to `log`. Returns the number of
/// points measured in this call.
int run_sweep(SweepDoc& doc, const SweepConfig& cfg, const std::vector<Runner*>& runners,
              const std::string& json_path, const std::string& csv_path, std::ostream& log,
              const LoopHooks& hooks);

/// "1:02:03" for 3723 seconds.
std::string format_duration(double seconds);

/// Seconds on the steady clock (for differences only).
double now_seconds();
/// The current UTC time as "YYYY-MM-DDTHH:MM:SSZ".
std::string utc_timestamp();

}  // namespace dcalign::bench
