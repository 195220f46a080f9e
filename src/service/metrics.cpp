// The server's metrics and their HTTP endpoint (service/metrics.hpp).
#include "service/metrics.hpp"

#include <httplib.h>

#include <cmath>
#include <cstdio>
#include <thread>

#include "dcalign/error.hpp"
#include "dcalign/options.hpp"

namespace dcalign::service {
namespace {

// Seconds: RPCs take from 0.1 ms (a refused call) to an hour (a stream); a job's phases from
// milliseconds to hours.
const std::vector<double> kRpcBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                        0.5,    1,     2.5,    5,     10,   30,    60,   300, 3600};
const std::vector<double> kPhaseBounds = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,  1,
                                          5,     10,    30,   60,   300, 1800, 7200};

// Prometheus' spelling of a sample value: +Inf, -Inf, NaN, else the shortest exact decimal (the
// option schema's, "0.0005" rather than "0.00050000000000000001").
std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return to_string(OptionValue{v});
}

// A label value with \, " and newlines escaped as the format asks.
std::string escaped(const std::string& v) {
  std::string out;
  for (char ch : v) {
    if (ch == '\\' || ch == '"') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void histogram(std::string& out, const std::string& name, const std::string& labels,
               const Histogram& h) {
  const std::string sep = labels.empty() ? "" : ",";
  std::uint64_t cumulative = 0;
  for (std::size_t k = 0; k < h.counts.size(); ++k) {
    cumulative += h.counts[k];
    const double le = k < h.bounds->size() ? (*h.bounds)[k] : INFINITY;
    out += name + "_bucket{" + labels + sep + "le=\"" + number(le) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += name + "_sum" + (labels.empty() ? "" : "{" + labels + "}") + " " + number(h.sum) + "\n";
  out += name + "_count" + (labels.empty() ? "" : "{" + labels + "}") + " " +
         std::to_string(h.count) + "\n";
}

// host and port of "host:port" ("[::1]:9464" gives "::1").
std::pair<std::string, int> split_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size())
    throw InvalidInput("--metrics-listen '" + listen + "': expected host:port");
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = listen.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoi(port) > 65535)
    throw InvalidInput("--metrics-listen '" + listen + "': the port must be 0 to 65535");
  return {host, std::stoi(port)};
}

}  // namespace

Histogram::Histogram(const std::vector<double>* b)
    : bounds(b ? b : &kRpcBounds), counts(bounds->size() + 1, 0) {}

void Histogram::observe(double v) {
  std::size_t k = 0;
  while (k < bounds->size() && v > (*bounds)[k]) ++k;
  ++counts[k];
  sum += v;
  ++count;
}

std::string status_code_name(int code) {
  static const char* names[] = {"OK",
                                "CANCELLED",
                                "UNKNOWN",
                                "INVALID_ARGUMENT",
                                "DEADLINE_EXCEEDED",
                                "NOT_FOUND",
                                "ALREADY_EXISTS",
                                "PERMISSION_DENIED",
                                "RESOURCE_EXHAUSTED",
                                "FAILED_PRECONDITION",
                                "ABORTED",
                                "OUT_OF_RANGE",
                                "UNIMPLEMENTED",
                                "INTERNAL",
                                "UNAVAILABLE",
                                "DATA_LOSS",
                                "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? names[code] : "CODE_" + std::to_string(code);
}

bool loopback_address(const std::string& listen) {
  const auto colon = listen.rfind(':');
  const std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]";
}

Metrics::Metrics() : started_(std::chrono::steady_clock::now()) {}

void Metrics::rpc(const std::string& method, int code, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  rpc_.try_emplace({method, status_code_name(code)}, &kRpcBounds).first->second.observe(seconds);
}

void Metrics::uploaded(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  uploaded_ += bytes;
}

void Metrics::job_phase(const std::string& phase, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  phases_.try_emplace(phase, &kPhaseBounds).first->second.observe(seconds);
}

void Metrics::job_finished(bool done) {
  std::lock_guard<std::mutex> lock(mu_);
  ++(done ? jobs_done_ : jobs_failed_);
}

void Metrics::worker_busy(const std::string& name, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  busy_[name] += seconds;
}

std::string Metrics::render(const Gauges& g) const {
  std::lock_guard<std::mutex> lock(mu_);
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::string out;
  header(out, "dcalign_rpc_duration_seconds", "histogram",
         "RPCs answered, by method and gRPC status code, and their handlers' seconds");
  for (const auto& [key, h] : rpc_)
    histogram(out, "dcalign_rpc_duration_seconds",
              "method=\"" + escaped(key.first) + "\",code=\"" + key.second + "\"", h);
  header(out, "dcalign_upload_bytes_total", "counter",
         "bytes of releases written, flushed to disk and acknowledged");
  out += "dcalign_upload_bytes_total " + std::to_string(uploaded_) + "\n";
  header(out, "dcalign_jobs", "gauge", "jobs waiting for a worker (queued) and running");
  out += "dcalign_jobs{state=\"queued\"} " + std::to_string(g.jobs_queued) + "\n";
  out += "dcalign_jobs{state=\"running\"} " + std::to_string(g.jobs_running) + "\n";
  header(out, "dcalign_jobs_finished_total", "counter",
         "jobs ended since the server started, by result");
  out += "dcalign_jobs_finished_total{result=\"done\"} " + std::to_string(jobs_done_) + "\n";
  out += "dcalign_jobs_finished_total{result=\"failed\"} " + std::to_string(jobs_failed_) + "\n";
  header(out, "dcalign_job_phase_seconds", "histogram",
         "seconds of a job's phases: queue (queued to started), upload_to_run (the last "
         "upload to the start), align, train, publish");
  for (const auto& [phase, h] : phases_)
    histogram(out, "dcalign_job_phase_seconds", "phase=\"" + phase + "\"", h);
  header(out, "dcalign_worker_busy_seconds_total", "counter", "seconds each worker ran jobs");
  for (const auto& w : g.workers) {
    const auto it = busy_.find(w.name);
    out += "dcalign_worker_busy_seconds_total{worker=\"" + w.name + "\",device=\"" + w.device +
           "\"} " + number(it == busy_.end() ? 0.0 : it->second) + "\n";
  }
  header(out, "dcalign_worker_busy_fraction", "gauge",
         "the share of the server's uptime each worker spent running jobs");
  for (const auto& w : g.workers) {
    const auto it = busy_.find(w.name);
    const double busy = it == busy_.end() ? 0.0 : it->second;
    out += "dcalign_worker_busy_fraction{worker=\"" + w.name + "\"} " +
           number(uptime > 0 ? std::min(1.0, busy / uptime) : 0.0) + "\n";
  }
  header(out, "dcalign_worker_running", "gauge", "1 while the worker runs a job");
  for (const auto& w : g.workers)
    out += "dcalign_worker_running{worker=\"" + w.name + "\"} " + (w.busy ? "1" : "0") + "\n";
  header(out, "dcalign_worker_device_memory_used_bytes", "gauge",
         "memory in use on each worker's device (for CPU workers: the host's, shared)");
  for (const auto& w : g.workers)
    if (w.memory_known)
      out += "dcalign_worker_device_memory_used_bytes{worker=\"" + w.name + "\"} " +
             std::to_string(w.memory_used) + "\n";
  header(out, "dcalign_worker_device_memory_bytes", "gauge", "each worker's device memory in all");
  for (const auto& w : g.workers)
    if (w.memory_known)
      out += "dcalign_worker_device_memory_bytes{worker=\"" + w.name + "\"} " +
             std::to_string(w.memory_total) + "\n";
  header(out, "dcalign_data_directory_bytes", "gauge", "bytes of the files in the data directory");
  out += "dcalign_data_directory_bytes " + std::to_string(g.data_dir_bytes) + "\n";
  header(out, "dcalign_data_directory_free_bytes", "gauge",
         "bytes free to the server on the data directory's file system");
  out += "dcalign_data_directory_free_bytes " + std::to_string(g.data_dir_free_bytes) + "\n";
  return out;
}

struct MetricsEndpoint::Impl {
  std::unique_ptr<httplib::Server> http;
  std::thread thread;
};

MetricsEndpoint::MetricsEndpoint(const std::string& listen, const std::string& cert_file,
                                 const std::string& key_file, const Metrics& metrics,
                                 std::function<Metrics::Gauges()> gauges)
    : impl_(std::make_unique<Impl>()) {
  const auto [host, port] = split_listen(listen);
  if (!loopback_address(listen) && (cert_file.empty() || key_file.empty()))
    throw InvalidInput("--metrics-listen " + listen +
                       " is not a loopback address: the metrics are served there only over "
                       "TLS, with --tls-cert and --tls-key");
  if (loopback_address(listen))
    impl_->http = std::make_unique<httplib::Server>();
  else
    impl_->http = std::make_unique<httplib::SSLServer>(cert_file.c_str(), key_file.c_str());
  if (!impl_->http->is_valid())
    throw InvalidInput("the metrics endpoint cannot use the certificate " + cert_file +
                       " and key " + key_file);
  auto& http = *impl_->http;
  // A scrape is one small GET: anything else is refused early and idle connections go.
  http.set_payload_max_length(4096);
  http.set_read_timeout(5, 0);
  http.set_write_timeout(5, 0);
  http.set_keep_alive_timeout(30);
  http.Get("/metrics", [&metrics, gauges](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(gauges()), "text/plain; version=0.0.4; charset=utf-8");
  });
  port_ = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (port_ <= 0)
    throw IoError("cannot listen for metrics on " + listen +
                  ": the port is in use, or the host is not an address of this machine");
  impl_->thread = std::thread([this] { impl_->http->listen_after_bind(); });
}

void MetricsEndpoint::stop() {
  if (impl_->http) impl_->http->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

MetricsEndpoint::~MetricsEndpoint() { stop(); }

}  // namespace dcalign::service
