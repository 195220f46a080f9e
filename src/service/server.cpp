// dcalign-server's lifecycle: options, credentials, limits, recovery, the job worker and a
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
#include "service/state.hpp"

namespace dcalign::service {
namespace {

bool loopback_host(const std::string& listen) {
  const auto colon = listen.rfind(':');
  const std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]";
}

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

}  // namespace

void check_options(const ServerOptions& o) {
  if (o.data_dir.empty()) throw InvalidInput("--data-dir is required");
  if (o.analyst_token.size() < 16 || o.analyst_token.size() > 256)
    throw InvalidInput("the analyst token has " + std::to_string(o.analyst_token.size()) +
                       " characters: expected 16 to 256");
  for (char ch : o.analyst_token)
    if (ch <= ' ' || ch > '~')
      throw InvalidInput("the analyst token must be printable ASCII without spaces");
  if (o.insecure_localhost) {
    if (!loopback_host(o.listen))
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
  std::thread worker;
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
    const std::string key = read_small_file(s.opts.tls_key_file, "TLS key");
    const std::string cert = read_small_file(s.opts.tls_cert_file, "TLS certificate");
    check_key_pair(s.opts, key, cert);
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
  impl_->worker = std::thread([&s] { run_job_worker(s); });
  log_event("info", "server_started",
            {{"listen", s.opts.listen},
             {"port", impl_->port},
             {"tls", !s.opts.insecure_localhost},
             {"data_dir", s.root.string()},
             {"max_connections", s.opts.max_connections},
             {"max_connections_per_peer", s.opts.max_connections_per_peer}});
}

int Server::port() const { return impl_->port; }

void Server::wait() {
  if (impl_->server) impl_->server->Wait();
  if (impl_->worker.joinable()) impl_->worker.join();
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
    // The worker finishes the job it runs (its state is in the store whatever happens).
    if (impl_->worker.joinable()) impl_->worker.join();
    s.lock.reset();  // another server may take the directory now
    log_event("info", "server_stopped", {});
  });
}

}  // namespace dcalign::service
