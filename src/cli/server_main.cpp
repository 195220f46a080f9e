// dcalign-server: the analyst's service (src/service/server.hpp, README "The analyst service").
//   dcalign-server --data-dir DIR --analyst-token-file FILE (--tls-cert C --tls-key K |
//                  --insecure-localhost) [--listen HOST:PORT] [--port-file FILE] ...
// Runs until SIGTERM or SIGINT, then shuts down gracefully (calls in flight finish within
// --shutdown-grace seconds, the running job finishes). Errors exit 1, usage errors 2.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/error.hpp"
#include "service/common.hpp"
#include "service/server.hpp"

namespace {

void write_port_file(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.flush()) throw dcalign::IoError("cannot write the port file '" + path + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw dcalign::IoError("cannot write the port file '" + path + "'");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dcalign;
  CLI::App app{"dcalign-server: the analyst's service of a Data Collaboration"};
  service::ServerOptions o;
  std::string token_file, port_file;
  long long max_chunk = static_cast<long long>(o.max_chunk_bytes);
  long long max_part = static_cast<long long>(o.max_part_bytes);
  long long upload_streams = o.max_upload_streams, streams = o.max_concurrent_streams;
  double grace = o.shutdown_grace_seconds;
  app.add_option("--listen", o.listen, "host:port to listen on (port 0: any free port)")
      ->capture_default_str();
  cli::add_path(&app, "--data-dir", o.data_dir, "where the server keeps everything")->required();
  cli::add_path(&app, "--analyst-token-file", token_file,
                "file holding the analyst's token (16-256 printable characters)")
      ->required();
  cli::add_path(&app, "--tls-cert", o.tls_cert_file, "the server's certificate chain (PEM)");
  cli::add_path(&app, "--tls-key", o.tls_key_file, "the server's private key (PEM)");
  app.add_flag("--insecure-localhost", o.insecure_localhost,
               "plaintext, allowed only on a loopback address (development)");
  app.add_option("--device", o.device, "auto, cpu or cuda")->capture_default_str();
  cli::add_integer(&app, "--max-chunk-bytes", max_chunk, 1024, 64LL << 20,
                   "the largest upload chunk");
  cli::add_integer(&app, "--max-part-bytes", max_part, 1024, 1LL << 40,
                   "the largest part (rows x cols x 8 bytes) a spec may declare");
  cli::add_integer(&app, "--max-upload-streams", upload_streams, 1, 100000,
                   "concurrent uploads, server-wide");
  cli::add_integer(&app, "--max-concurrent-streams", streams, 1, 100000,
                   "HTTP/2 streams per connection");
  cli::add_real(&app, "--shutdown-grace", grace, "seconds calls in flight get at shutdown");
  cli::add_path(&app, "--port-file", port_file, "write the port here once listening");
  // SIGTERM and SIGINT are taken by sigwait below: blocked before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  try {
    app.parse(argc, argv);
    if (!(grace >= 0 && grace <= 3600))
      cli::out_of_range("--shutdown-grace", std::to_string(grace), "0 to 3600");
    o.max_chunk_bytes = static_cast<std::uint64_t>(max_chunk);
    o.max_part_bytes = static_cast<std::uint64_t>(max_part);
    o.max_upload_streams = static_cast<int>(upload_streams);
    o.max_concurrent_streams = static_cast<int>(streams);
    o.shutdown_grace_seconds = grace;
    o.analyst_token = dcalign::service::read_token_file(token_file, "analyst token");
    service::Server server(o);
    server.start();
    if (!port_file.empty()) write_port_file(port_file, server.port());
    int sig = 0;
    sigwait(&signals, &sig);
    server.shutdown();
    return 0;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const cli::UsageError& e) {
    std::cerr << "dcalign-server: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dcalign-server: error: " << e.what() << "\n";
    return 1;
  }
}
