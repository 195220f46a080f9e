// dcalign-server: the analyst's service (src/service/server.hpp, docs/howto/deploy-server.md).
//   dcalign-server --data-dir DIR --analyst-token-file FILE (--tls-cert C --tls-key K |
//                  --insecure-localhost) [--listen HOST:PORT] [--port-file FILE] ...
// Options may come from a TOML file (--config); --check-config checks them and exits. SIGHUP
// re-reads the analyst token file (token rotation without a restart).
// Runs until SIGTERM or SIGINT, then shuts down gracefully (calls in flight finish within
// --shutdown-grace seconds, the running job finishes). Errors exit 1, usage errors (the command
// line's and the config file's) 2; a server
// that can no longer accept connections shuts down and exits 75 (EX_TEMPFAIL), for its
// supervisor to restart it (systemd: Restart=on-failure).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/error.hpp"
#include "service/backup.hpp"
#include "service/common.hpp"
#include "service/server.hpp"

namespace {

void write_port_file(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.flush())
      throw dcalign::IoError("cannot write the port file '" + path + "' (" +
                             std::strerror(errno ? errno : EIO) + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw dcalign::IoError("cannot write the port file '" + path + "' (" + std::strerror(errno) +
                           ")");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dcalign;
  CLI::App app{"dcalign-server: the analyst's service of a Data Collaboration"};
  service::ServerOptions o;
  std::string token_file, port_file, metrics_port_file, backup_to;
  bool check_config = false;
  long long max_chunk = static_cast<long long>(o.max_chunk_bytes);
  long long max_part = static_cast<long long>(o.max_part_bytes);
  long long upload_streams = o.max_upload_streams, streams = o.max_concurrent_streams;
  long long fetch_streams = o.max_fetch_streams, peer_streams = o.max_streams_per_peer;
  long long connections = o.max_connections, peer_connections = o.max_connections_per_peer;
  double grace = o.shutdown_grace_seconds;
  app.add_option("--listen", o.listen, "host:port to listen on (port 0: any free port)")
      ->capture_default_str();
  cli::add_path(&app, "--data-dir", o.data_dir, "where the server keeps everything")->required();
  cli::add_path(&app, "--analyst-token-file", token_file,
                "file holding the analyst's token (16-256 printable characters); required "
                "unless --backup-to");
  cli::add_path(&app, "--tls-cert", o.tls_cert_file, "the server's certificate chain (PEM)");
  cli::add_path(&app, "--tls-key", o.tls_key_file, "the server's private key (PEM)");
  app.add_flag("--insecure-localhost", o.insecure_localhost,
               "plaintext, allowed only on a loopback address (development)");
  app.add_option("--device", o.device,
                 "where jobs run: auto (a worker per visible GPU, and CPU workers), cpu, or cuda "
                 "(GPU workers only)")
      ->capture_default_str();
  app.add_option("--devices", o.devices, "CUDA devices, a worker each (e.g. 0,1)")->delimiter(',');
  long long cpu_workers = -1, threads_per_job = 0, max_job = 0;
  cli::add_integer(&app, "--cpu-workers", cpu_workers, 0, 1024,
                   "CPU job workers (default: the hardware threads / --threads-per-job; with "
                   "--device cuda, 0)");
  cli::add_integer(&app, "--threads-per-job", threads_per_job, 1, 1024,
                   "threads of a CPU worker's job (default 1)");
  cli::add_integer(&app, "--max-job-bytes", max_job, 1LL << 20, 1LL << 50,
                   "the most memory a job may need, estimated from its shapes (default: the "
                   "worker's device memory)");
  cli::add_integer(&app, "--max-chunk-bytes", max_chunk, 1024, 64LL << 20,
                   "the largest upload chunk");
  cli::add_integer(&app, "--max-part-bytes", max_part, 1024, 1LL << 40,
                   "the largest part (rows x cols x 8 bytes) a spec may declare");
  cli::add_integer(&app, "--max-upload-streams", upload_streams, 1, 100000,
                   "concurrent uploads, server-wide");
  cli::add_integer(&app, "--max-fetch-streams", fetch_streams, 1, 100000,
                   "concurrent fetches, server-wide");
  cli::add_integer(&app, "--max-streams-per-peer", peer_streams, 1, 100000,
                   "concurrent uploads and fetches from one address");
  cli::add_integer(&app, "--max-concurrent-streams", streams, 1, 100000,
                   "HTTP/2 streams per connection");
  cli::add_integer(&app, "--max-connections", connections, 1, 1000000,
                   "TCP connections held in all (the descriptor limit must exceed it by the "
                   "streams and 256)");
  cli::add_integer(&app, "--max-connections-per-peer", peer_connections, 1, 1000000,
                   "TCP connections held from one address");
  cli::add_real(&app, "--first-message-timeout", o.first_message_seconds,
                "seconds a stream may take to send its first message (default 10)");
  cli::add_real(&app, "--idle-timeout", o.idle_seconds,
                "seconds a stream may stay silent between messages (default 60)");
  cli::add_real(&app, "--handshake-timeout", o.handshake_seconds,
                "seconds a new connection may take for TLS and HTTP/2 set-up (default 10)");
  cli::add_real(&app, "--connection-idle-timeout", o.connection_idle_seconds,
                "seconds a connection without calls is kept (default 300)");
  cli::add_real(&app, "--shutdown-grace", grace, "seconds calls in flight get at shutdown");
  cli::add_path(&app, "--port-file", port_file, "write the port here once listening");
  long long mpi_max_ranks = 0;
  cli::add_integer(&app, "--mpi-max-ranks", mpi_max_ranks, 0, 1024,
                   "the most MPI ranks a spec's distributed job may ask for (0: no MPI path)");
  app.add_option("--mpirun", o.mpirun, "Open MPI's launcher")->capture_default_str();
  cli::add_path(&app, "--dcalign-mpi", o.dcalign_mpi,
                "the dcalign-mpi every rank runs (default: the one beside dcalign-server; the "
                "same path on every host)");
  cli::add_path(&app, "--mpi-hostfile", o.mpi_hostfile,
                "mpirun's hostfile for distributed jobs (default: every rank on this machine)");
  cli::add_path(&app, "--mpi-hostfile-dir", o.mpi_hostfile_dir,
                "a directory of hostfiles a spec may name (spec.distributed.hostfile)");
  app.add_option("--mpi-arg", o.mpi_args, "an extra mpirun argument (repeatable)")
      ->allow_extra_args(false);
  cli::add_real(&app, "--mpi-timeout", o.mpi_timeout_seconds,
                "seconds a distributed job may run before mpirun is stopped (default 86400)");
  app.add_option("--metrics-listen", o.metrics_listen,
                 "host:port of the Prometheus endpoint (GET /metrics); plain HTTP on a loopback "
                 "address, HTTPS (--tls-cert, --tls-key) on any other; default: none");
  cli::add_path(&app, "--metrics-port-file", metrics_port_file,
                "write the metrics endpoint's port here once listening");
  // Every option above may come from a TOML file instead (key = the long name, e.g.
  // data-dir = "/var/lib/dcalign-server"); the command line wins over the file.
  app.set_config("--config", "", "read options from this TOML file");
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error
  cli::add_path(&app, "--backup-to", backup_to,
                "copy the data directory (the server may be running on it) to this new "
                "directory, then exit; restore by starting a server on the copy");
  app.add_flag("--check-config", check_config,
               "check the options (and the token, TLS files and workers they name), then exit: 0 "
               "when the server would start with them");
  // SIGTERM and SIGINT are taken by sigwait below: blocked before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // re-read the analyst token file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  try {
    app.parse(argc, argv);
    if (!(grace >= 0 && grace <= 3600))
      cli::out_of_range("--shutdown-grace", std::to_string(grace), "0 to 3600");
    o.max_chunk_bytes = static_cast<std::uint64_t>(max_chunk);
    o.max_part_bytes = static_cast<std::uint64_t>(max_part);
    o.max_upload_streams = static_cast<int>(upload_streams);
    o.max_concurrent_streams = static_cast<int>(streams);
    o.max_fetch_streams = static_cast<int>(fetch_streams);
    o.max_streams_per_peer = static_cast<int>(peer_streams);
    o.max_connections = static_cast<int>(connections);
    o.max_connections_per_peer = static_cast<int>(peer_connections);
    o.shutdown_grace_seconds = grace;
    o.cpu_workers = app.count("--cpu-workers") ? static_cast<int>(cpu_workers) : -1;
    o.threads_per_job = static_cast<int>(threads_per_job);
    o.max_job_bytes = static_cast<std::uint64_t>(max_job);
    o.mpi_max_ranks = static_cast<int>(mpi_max_ranks);
    if (!backup_to.empty()) {
      // Computed before anything is written: a failure prints its error alone.
      const std::string done = service::backup_data_dir(o.data_dir, backup_to);
      std::cout << "dcalign-server: backup: " << done << "\n";
      return 0;
    }
    if (token_file.empty())
      throw cli::UsageError("--analyst-token-file is required (the analyst's secret)");
    o.analyst_token = dcalign::service::read_token_file(token_file, "analyst token");
    if (check_config) {
      const std::string summary = service::check_startup(o);
      std::cout << "dcalign-server: the configuration is valid: " << summary << "\n";
      return 0;
    }
    // A server that cannot serve any more wakes the sigwait below as SIGTERM would.
    static std::atomic<bool> unusable{false};
    o.on_fatal = [](const std::string&) {
      unusable = true;
      ::kill(::getpid(), SIGTERM);
    };
    service::Server server(o);
    server.start();
    if (!port_file.empty()) write_port_file(port_file, server.port());
    if (!metrics_port_file.empty()) write_port_file(metrics_port_file, server.metrics_port());
    for (;;) {
      int sig = 0;
      sigwait(&signals, &sig);
      if (sig != SIGHUP) break;
      // Token rotation: the file's new token replaces the old one, which is refused from now
      // on. A bad file keeps the old token and says why.
      try {
        server.rotate_analyst_token(service::read_token_file(token_file, "analyst token"));
      } catch (const std::exception& e) {
        service::log_event("error", "analyst_token_not_rotated",
                           {{"error", e.what()}, {"kept", "the previous token"}});
      }
    }
    server.shutdown();
    if (unusable) {
      std::cerr << "dcalign-server: error: the server could no longer accept connections and "
                   "shut down; exit status 75 asks its supervisor to restart it\n";
      return 75;
    }
    return 0;
  } catch (const CLI::ParseError& e) {
    // --help is 0; every mistake on the command line or in --config is a usage error, 2 (not
    // CLI11's own codes, so that a supervisor tells it from a failure worth a restart).
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const cli::UsageError& e) {
    std::cerr << "dcalign-server: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dcalign-server: error: " << e.what() << "\n";
    return 1;
  }
}
