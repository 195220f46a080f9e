// dcalign-server's lifecycle: options, credentials, limits, recovery, the job workers and a
// graceful shutdown.
#include "service/server.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "dcalign/error.hpp"
#include "service/common.hpp"
#include "service/data_dir.hpp"
#include "service/limits.hpp"
#include "service/metrics.hpp"
#include "service/state.hpp"

namespace dcalign::service {
namespace {

// The key must belong to the certificate: gRPC would only fail to listen, and say nothing of why.
void check_key_pair(const ServerOptions& o, const std::string& key, const std::string& cert) {
  const auto fail = [](const std::string& what) {
    ERR_clear_error();
    throw InvalidInput(what);
  };
  BIO* cb = BIO_new_mem_buf(cert.data(), static_cast<int>(cert.size()));
  X509* x = cb ? PEM_read_bio_X509(cb, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(cb);
  if (!x) fail("--tls-cert " + o.tls_cert_file + " holds no PEM certificate");
  BIO* kb = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
  EVP_PKEY* k = kb ? PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(kb);
  if (!k) {
    X509_free(x);
    fail("--tls-key " + o.tls_key_file +
         " holds no PEM private key (or one protected by a passphrase, which the server cannot "
         "read)");
  }
  const bool match = X509_check_private_key(x, k) == 1;
  EVP_PKEY_free(k);
  X509_free(x);
  if (!match)
    fail("--tls-key " + o.tls_key_file + " does not belong to the certificate --tls-cert " +
         o.tls_cert_file +
         " (the certificate's public key is not the key's): give the key "
         "the certificate was issued for");
}

nlohmann::json worker_names(const std::vector<WorkerSpec>& workers) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : workers)
    out.push_back(w.name + " (" + bytes_in_words(w.job_limit) + " per job" +
                  (w.device == Device::cpu ? ", " + std::to_string(w.threads) + " threads" : "") +
                  ")");
  return out;
}

// What a scrape reads at its moment: the jobs' states, the workers, the data directory.
Metrics::Gauges gauges(State& s) {
  Metrics::Gauges g;
  std::map<std::pair<int, int>, DeviceMemory> memory;  // (device, ordinal): asked once each
  {
    std::lock_guard<std::mutex> lock(s.mu);
    g.jobs_queued = s.store->jobs_in("queued").size();
    g.jobs_running = s.running_jobs.size();
    std::set<std::size_t> busy;
    for (const auto& [id, w] : s.job_workers) busy.insert(w);
    for (std::size_t k = 0; k < s.workers.size(); ++k) {
      const WorkerSpec& w = s.workers[k];
      Metrics::Gauges::Worker out;
      out.name = w.name;
      out.device = w.device == Device::cpu ? "cpu" : "cuda:" + std::to_string(w.device_id);
      out.busy = busy.count(k) > 0;
      g.workers.push_back(out);
    }
  }
  for (std::size_t k = 0; k < s.workers.size(); ++k) {
    const WorkerSpec& w = s.workers[k];
    const std::pair<int, int> key{static_cast<int>(w.device), w.device_id};
    try {
      if (!memory.count(key)) memory[key] = device_memory(w.device, w.device_id);
      g.workers[k].memory_known = true;
      g.workers[k].memory_total = memory[key].total;
      g.workers[k].memory_used = memory[key].total - std::min(memory[key].free, memory[key].total);
    } catch (const std::exception&) {
      // left out of the scrape: the device cannot be asked now
    }
  }
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(s.root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) g.data_dir_bytes += it->file_size(ec);
  const auto space = fs::space(s.root, ec);
  if (!ec) g.data_dir_free_bytes = space.available;
  return g;
}

// The TLS key and certificate, checked to belong together.
std::pair<std::string, std::string> read_key_pair(const ServerOptions& o) {
  std::string key = read_small_file(o.tls_key_file, "TLS key");
  std::string cert = read_small_file(o.tls_cert_file, "TLS certificate");
  check_key_pair(o, key, cert);
  return {std::move(key), std::move(cert)};
}

}  // namespace

std::string check_startup(const ServerOptions& o) {
  check_options(o);
  const auto workers = plan_workers(o);
  if (!o.insecure_localhost) read_key_pair(o);
  std::string names;
  for (const auto& w : worker_names(workers))
    names += (names.empty() ? "" : ", ") + w.get<std::string>();
  return "listen " + o.listen + (o.insecure_localhost ? " (plaintext)" : " (TLS)") + ", metrics " +
         (o.metrics_listen.empty() ? std::string("off") : o.metrics_listen) + ", data directory " +
         o.data_dir + ", workers: " + names;
}

void check_analyst_token(const std::string& token) {
  if (token.size() < 16 || token.size() > 256)
    throw InvalidInput("the analyst token has " + std::to_string(token.size()) +
                       " characters: expected 16 to 256");
  for (char ch : token)
    if (ch <= ' ' || ch > '~')
      throw InvalidInput("the analyst token must be printable ASCII without spaces");
}

void check_options(const ServerOptions& o) {
  if (o.data_dir.empty()) throw InvalidInput("--data-dir is required");
  check_analyst_token(o.analyst_token);
  if (o.insecure_localhost) {
    if (!loopback_address(o.listen))
      throw InvalidInput(
          "--insecure-localhost listens only on 127.0.0.1, localhost or [::1], "
          "not on '" +
          o.listen + "'");
    if (!o.tls_cert_file.empty() || !o.tls_key_file.empty())
      throw InvalidInput("--insecure-localhost and --tls-cert/--tls-key exclude each other");
  } else if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
    throw InvalidInput(
        "a TLS certificate and key are required (--tls-cert, --tls-key); "
        "plaintext is allowed only with --insecure-localhost");
  }
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
    throw InvalidInput("--device '" + o.device + "': expected auto, cpu or cuda");
  if (o.max_job_bytes != 0 && o.max_job_bytes < (1u << 20))
    throw InvalidInput("--max-job-bytes " + std::to_string(o.max_job_bytes) +
                       " is out of range: expected 0 (the device's memory) or at least 1048576");
  if (!o.metrics_listen.empty() && !loopback_address(o.metrics_listen) && o.insecure_localhost)
    throw InvalidInput("--metrics-listen " + o.metrics_listen +
                       " is not a loopback address: with --insecure-localhost the metrics are "
                       "served on a loopback address only (elsewhere they need TLS)");
  if (!(o.mpi_timeout_seconds > 0 && o.mpi_timeout_seconds <= 30 * 86400.0))
    throw InvalidInput("--mpi-timeout " + std::to_string(o.mpi_timeout_seconds) +
                       " is out of range: expected more than 0 and at most 2592000 seconds");
  if (!o.mpi_hostfile.empty() && !fs::is_regular_file(o.mpi_hostfile))
    throw InvalidInput("--mpi-hostfile " + o.mpi_hostfile + " is not a readable file");
  if (!o.mpi_hostfile_dir.empty() && !fs::is_directory(o.mpi_hostfile_dir))
    throw InvalidInput("--mpi-hostfile-dir " + o.mpi_hostfile_dir + " is not a directory");
  if (o.max_chunk_bytes < 1024 || o.max_chunk_bytes > (64u << 20))
    throw InvalidInput("--max-chunk-bytes " + std::to_string(o.max_chunk_bytes) +
                       " is out of range: expected 1024 to 67108864");
  if (o.max_upload_streams < 1 || o.max_fetch_streams < 1 || o.max_streams_per_peer < 1 ||
      o.max_concurrent_streams < 1)
    throw InvalidInput("the stream limits must be at least 1");
  if (o.max_connections < 1 || o.max_connections_per_peer < 1)
    throw InvalidInput("the connection limits must be at least 1");
  for (const auto& [name, v] :
       {std::pair<const char*, double>{"--first-message-timeout", o.first_message_seconds},
        {"--idle-timeout", o.idle_seconds},
        {"--handshake-timeout", o.handshake_seconds},
        {"--connection-idle-timeout", o.connection_idle_seconds}})
    if (!(v > 0 && v <= 86400))
      throw InvalidInput(std::string(name) + " " + std::to_string(v) +
                         " is out of range: expected more than 0 and at most 86400 seconds");
}

struct Server::Impl {
  explicit Impl(ServerOptions o) : state(std::move(o)) {}
  State state;
  std::unique_ptr<v1::Analyst::Service> service;
  std::unique_ptr<grpc::Server> server;
  std::vector<std::thread> workers;
  std::unique_ptr<MetricsEndpoint> metrics;
  int port = 0;
  std::once_flag shutdown_once;
  std::atomic<bool> fatal{false};
};

Server::Server(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}

Server::~Server() {
  if (impl_->server) shutdown();
}

void Server::start() {
  try {
    start_locked();
  } catch (...) {
    // A server that did not start holds nothing: another (or this one again) may start.
    impl_->state.lock.reset();
    throw;
  }
}

void Server::start_locked() {
  State& s = impl_->state;
  check_options(s.opts);
  // The workers this machine can give, checked before the data directory is touched.
  s.workers = plan_workers(s.opts);
  // The server's files are its own: the directory is created private to the user.
  std::error_code ec;
  fs::create_directories(s.root, ec);
  if (ec)
    throw IoError("cannot create the data directory " + s.root.string() + ": " + ec.message());
  ::chmod(s.root.c_str(), 0700);
  // One server per directory, then the database before anything reads or removes files.
  s.lock = std::make_unique<DataDirLock>(s.root);
  check_database_present(s.root, s.root / "dcalign.db");
  // Every connection and stream holds descriptors; 256 more for the store, the files of jobs
  // and uploads, and gRPC's own.
  const auto needed = static_cast<std::uint64_t>(s.opts.max_connections) +
                      static_cast<std::uint64_t>(s.opts.max_upload_streams) +
                      static_cast<std::uint64_t>(s.opts.max_fetch_streams) + 256;
  ensure_descriptor_limit(needed, "--max-connections " + std::to_string(s.opts.max_connections) +
                                      " with the stream limits and the server's own files");
  route_grpc_logs();
  s.store = std::make_unique<Store>((s.root / "dcalign.db").string());
  recover(s);

  std::shared_ptr<grpc::ServerCredentials> creds;
  if (s.opts.insecure_localhost) {
    creds = grpc::InsecureServerCredentials();
  } else {
    const auto [key, cert] = read_key_pair(s.opts);
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  grpc::EnableDefaultHealthCheckService(true);
  impl_->service = make_service(s);
  s.watchdog = std::make_unique<StreamWatchdog>();
  s.connections =
      std::make_unique<ConnectionGuard>(s.opts.max_connections, s.opts.max_connections_per_peer);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(s.opts.listen, creds, &impl_->port);
  builder.RegisterService(impl_->service.get());
  // A chunk and its envelope; a larger message is refused by gRPC before it is read whole.
  builder.SetMaxReceiveMessageSize(static_cast<int>(2 * s.opts.max_chunk_bytes + 4096));
  builder.SetMaxSendMessageSize(static_cast<int>(2 * s.opts.max_chunk_bytes + 4096));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, s.opts.max_concurrent_streams);
  const auto ms = [](double seconds) { return static_cast<int>(seconds * 1000); };
  // A connection that has not finished TLS and HTTP/2's settings by then is closed (an idle TCP
  // connection would otherwise hold a descriptor for gRPC's default of 120 s).
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, ms(s.opts.handshake_seconds));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ms(s.opts.connection_idle_seconds));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  builder.SetOption(s.connections->builder_option());
  // Streams hold a thread each; they are bounded (Upload, Fetch) below this, so that 32 threads
  // always remain for the unary calls and the health check.
  grpc::ResourceQuota quota("dcalign-server");
  quota.SetMaxThreads(s.opts.max_upload_streams + s.opts.max_fetch_streams + 32);
  builder.SetResourceQuota(quota);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0)
    throw IoError("cannot listen on " + s.opts.listen +
                  ": the port is in use, or the host is not an address of this machine");
  impl_->server->GetHealthCheckService()->SetServingStatus(true);
  // gRPC 1.51 stops accepting for good once accept4 fails (EMFILE): a server that cannot accept
  // is of no use, so it says so and lets its supervisor restart it (ServerOptions::on_fatal).
  if (fault_armed("accept_failure"))
    note_accept_failure("accept failure injected by DCALIGN_SERVER_FAULT");
  Impl* impl = impl_.get();
  s.watchdog->set_periodic([impl] {
    const std::string reason = accept_failure();
    if (reason.empty() || impl->fatal.exchange(true)) return;
    const std::string message =
        "the server can no longer accept connections (gRPC: " + reason + ")";
    log_event("error", "server_unusable", {{"reason", message}});
    if (impl->state.opts.on_fatal) impl->state.opts.on_fatal(message);
  });
  for (std::size_t w = 0; w < s.workers.size(); ++w)
    impl_->workers.emplace_back([&s, w] { run_job_worker(s, w); });
  if (!s.opts.metrics_listen.empty())
    impl_->metrics = std::make_unique<MetricsEndpoint>(s.opts.metrics_listen, s.opts.tls_cert_file,
                                                       s.opts.tls_key_file, s.metrics,
                                                       [&s] { return gauges(s); });
  log_event("info", "server_started",
            {{"listen", s.opts.listen},
             {"port", impl_->port},
             {"tls", !s.opts.insecure_localhost},
             {"data_dir", s.root.string()},
             {"workers", worker_names(s.workers)},
             {"metrics_port", impl_->metrics ? impl_->metrics->port() : 0},
             {"max_connections", s.opts.max_connections},
             {"max_connections_per_peer", s.opts.max_connections_per_peer}});
}

int Server::port() const { return impl_->port; }

void Server::rotate_analyst_token(const std::string& token) {
  check_analyst_token(token);
  impl_->state.set_analyst_token(token);
  log_event("info", "analyst_token_rotated", {});
}

int Server::metrics_port() const { return impl_->metrics ? impl_->metrics->port() : 0; }

void Server::wait() {
  if (impl_->server) impl_->server->Wait();
  for (auto& t : impl_->workers)
    if (t.joinable()) t.join();
}

void Server::shutdown() {
  std::call_once(impl_->shutdown_once, [this] {
    State& s = impl_->state;
    log_event("info", "server_stopping", {});
    if (impl_->server) impl_->server->GetHealthCheckService()->SetServingStatus(false);
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.stopping = true;
      s.cv.notify_all();
    }
    const auto grace =
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(static_cast<long long>(s.opts.shutdown_grace_seconds * 1000));
    if (impl_->server) impl_->server->Shutdown(grace);
    if (impl_->metrics) impl_->metrics->stop();
    // Each worker finishes the job it runs (its state is in the store whatever happens).
    for (auto& t : impl_->workers)
      if (t.joinable()) t.join();
    s.lock.reset();  // another server may take the directory now
    log_event("info", "server_stopped", {});
  });
}

}  // namespace dcalign::service
