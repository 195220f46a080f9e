#pragma once
// dcalign-server's metrics in Prometheus' text exposition format (version 0.0.4), served on a
// port of their own by cpp-httplib (MetricsEndpoint). Debian 12 packages no C++ Prometheus
// client, so the counters and histograms are kept here; the format is a few lines of text per
// series. Internal to src/service.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dcalign::service {

/// A Prometheus histogram: cumulative counts per upper bound, their sum and count.
struct Histogram {
  explicit Histogram(const std::vector<double>* bounds = nullptr);
  void observe(double v);
  const std::vector<double>* bounds;
  std::vector<std::uint64_t> counts;  ///< per bound, not cumulative; the last is +Inf
  double sum = 0;
  std::uint64_t count = 0;
};

/// The server's counters. Every method is thread-safe.
class Metrics {
 public:
  Metrics();

  /// One RPC answered with gRPC status `code` after `seconds` (its handler's time).
  void rpc(const std::string& method, int code, double seconds);
  /// Bytes of a release written, fsynced and acknowledged.
  void uploaded(std::uint64_t bytes);
  /// A job's phase: queue, upload_to_run, align, train, publish.
  void job_phase(const std::string& phase, double seconds);
  /// A job ended: done or failed.
  void job_finished(bool done);
  /// Worker `name` was busy for `seconds` (a job's run).
  void worker_busy(const std::string& name, double seconds);

  /// What a scrape adds that is read at that moment, not counted.
  struct Gauges {
    std::uint64_t jobs_queued = 0, jobs_running = 0;
    std::uint64_t data_dir_bytes = 0, data_dir_free_bytes = 0;
    struct Worker {
      std::string name, device;
      bool busy = false;
      bool memory_known = false;
      std::uint64_t memory_used = 0, memory_total = 0;
    };
    std::vector<Worker> workers;
  };
  /// The exposition: every counter and histogram, then `g`.
  std::string render(const Gauges& g) const;

 private:
  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point started_;
  std::map<std::pair<std::string, std::string>, Histogram> rpc_;  ///< (method, code)
  std::uint64_t uploaded_ = 0;
  std::map<std::string, Histogram> phases_;
  std::uint64_t jobs_done_ = 0, jobs_failed_ = 0;
  std::map<std::string, double> busy_;
};

/// The gRPC status code's name as the metrics label it: "OK", "NOT_FOUND", ...
std::string status_code_name(int code);

/// The HTTP side: GET /metrics on `listen` (host:port; port 0 picks one), plain HTTP on a
/// loopback address, HTTPS with the given PEM files on any other (the server refuses a
/// non-loopback address without them). `gauges` is called once per scrape.
class MetricsEndpoint {
 public:
  MetricsEndpoint(const std::string& listen, const std::string& cert_file,
                  const std::string& key_file, const Metrics& metrics,
                  std::function<Metrics::Gauges()> gauges);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;
  int port() const { return port_; }
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

/// Whether host:port names a loopback host (127.0.0.1, localhost, [::1]).
bool loopback_address(const std::string& listen);

}  // namespace dcalign::service
