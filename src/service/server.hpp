#pragma once
// dcalign-server: the analyst's side of a Data Collaboration as a gRPC service
// (proto/dcalign/service/v1/analyst.proto). See docs/howto/deploy-server.md.
//
// Data directory layout (everything the server writes is below it):
//   dcalign.db                                   SQLite (WAL): collaborations, token hashes,
//                                                upload progress, jobs
//   collaborations/<id>/uploads/<participant>/<part>.partial   an upload in progress
//   collaborations/<id>/uploads/<participant>/<part>.f64       a verified part (raw float64)
//   collaborations/<id>/results/<participant>/G.npy, report.json   published by one rename
//   collaborations/<id>/results/_model/          the model h (every participant fetches it)
//   collaborations/<id>/results.tmp.*            a job's results while they are written
//   trash/                                       collaborations being deleted
//   dcalign.lock                                 flock held by the one server on the directory
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dcalign::service {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  ///< host:port; port 0 picks a free one
  std::string data_dir;
  std::string analyst_token;  ///< the analyst's secret (dcalign-server reads it from a file)
  std::string tls_cert_file, tls_key_file;  ///< PEM; required unless insecure_localhost
  bool insecure_localhost = false;          ///< plaintext, only on a loopback address
  /// Where jobs run. auto: a worker on every visible GPU (unless `devices` names them) and
  /// CPU workers; cpu: CPU workers only; cuda: GPU workers only (device 0 unless `devices`),
  /// with CPU workers only when cpu_workers asks for them.
  std::string device = "auto";
  std::vector<int> devices;  ///< CUDA ordinals, a worker each (--devices 0,1,...)
  int cpu_workers = -1;      ///< CPU workers; -1: the hardware threads / threads_per_job
  int threads_per_job = 0;   ///< a CPU worker's threads; 0: 1
  /// The most memory one job may need (estimated from its shapes); 0: the worker's device's
  /// memory. A collaboration whose alignment needs more than every worker allows is refused.
  std::uint64_t max_job_bytes = 0;
  /// The MPI path (a spec's `distributed`): mpirun and dcalign-mpi ("": dcalign-mpi beside this
  /// executable), the default hostfile ("": every rank on this machine) and a directory of named
  /// ones, extra mpirun arguments, the most ranks a spec may ask for (0: no MPI path), and how
  /// long a distributed job may run before mpirun is stopped.
  std::string mpirun = "mpirun", dcalign_mpi, mpi_hostfile, mpi_hostfile_dir;
  std::vector<std::string> mpi_args;
  int mpi_max_ranks = 0;
  double mpi_timeout_seconds = 86400;
  /// The Prometheus endpoint (GET /metrics), host:port; empty: none. Plain HTTP on a loopback
  /// address; any other needs the TLS certificate and key, and serves HTTPS.
  std::string metrics_listen;
  std::uint64_t max_chunk_bytes = 1u << 20;
  std::uint64_t max_part_bytes = std::uint64_t{1} << 32;  ///< bound on one part's total
  int max_upload_streams = 64;           ///< concurrent Upload streams, server-wide
  int max_fetch_streams = 16;            ///< concurrent Fetch streams, server-wide
  int max_streams_per_peer = 32;         ///< Upload and Fetch streams from one address
  int max_concurrent_streams = 256;      ///< HTTP/2 streams per connection
  int max_connections = 512;             ///< TCP connections held, in all
  int max_connections_per_peer = 64;     ///< TCP connections held from one address
  double max_rpc_seconds = 3600;         ///< a stream open longer is cancelled
  double first_message_seconds = 10;     ///< a stream's first message must come within this
  double idle_seconds = 60;              ///< and each further one within this of the previous
  double handshake_seconds = 10;         ///< a connection's TLS and HTTP/2 set-up must end within
  double connection_idle_seconds = 300;  ///< a connection without calls is closed after this
  double shutdown_grace_seconds = 30;
  /// Called (once, from a server thread) when the server can no longer serve: gRPC stopped
  /// accepting connections. dcalign-server exits with status 75 so that its supervisor restarts
  /// it; without a callback the server only logs it.
  std::function<void(const std::string& reason)> on_fatal;
};

/// Rejects options that cannot work (InvalidInput naming the option). The workers' options
/// are checked against this machine by plan_workers (service/workers.hpp), which start() and
/// check_startup() run.
void check_options(const ServerOptions& opts);
/// Everything start() checks before it touches the data directory: the options, the workers
/// this machine can give, the TLS key pair and the metrics address. Returns a one-line summary
/// (the workers, the listening addresses); throws InvalidInput naming what is wrong.
std::string check_startup(const ServerOptions& opts);
/// Rejects an analyst token that is not 16 to 256 printable ASCII characters without spaces.
void check_analyst_token(const std::string& token);

class Server {
 public:
  explicit Server(ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Opens the store, recovers interrupted uploads and jobs, starts the job worker and listens.
  void start();
  /// The port it listens on (after start()).
  int port() const;
  /// The metrics endpoint's port (after start()), 0 without one.
  int metrics_port() const;
  /// Replaces the analyst's token (checked as at start): calls with the old one are refused
  /// from now on. dcalign-server does this when SIGHUP comes (it re-reads the token file).
  void rotate_analyst_token(const std::string& token);
  /// Blocks until shutdown() has completed.
  void wait();
  /// Stops taking calls, lets calls in flight finish within the grace period, and lets the
  /// running job finish (its state is persisted either way). Safe from any thread, once.
  void shutdown();

 private:
  void start_locked();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcalign::service
