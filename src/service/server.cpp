// dcalign-server's lifecycle: options, credentials, limits, recovery, the job worker and a
// graceful shutdown.
#include "service/server.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "dcalign/error.hpp"
#include "service/common.hpp"
#include "service/state.hpp"

namespace dcalign::service {
namespace {

bool loopback_host(const std::string& listen) {
  const auto colon = listen.rfind(':');
  const std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]";
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
  if (o.max_upload_streams < 1 || o.max_concurrent_streams < 1)
    throw InvalidInput("the stream limits must be at least 1");
}

struct Server::Impl {
  explicit Impl(ServerOptions o) : state(std::move(o)) {}
  State state;
  std::unique_ptr<v1::Analyst::Service> service;
  std::unique_ptr<grpc::Server> server;
  std::thread worker;
  int port = 0;
  std::once_flag shutdown_once;
};

Server::Server(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}

Server::~Server() {
  if (impl_->server) shutdown();
}

void Server::start() {
  State& s = impl_->state;
  check_options(s.opts);
  // The server's files are its own: the directory is created private to the user.
  std::error_code ec;
  fs::create_directories(s.root, ec);
  if (ec)
    throw IoError("cannot create the data directory " + s.root.string() + ": " + ec.message());
  ::chmod(s.root.c_str(), 0700);
  s.store = std::make_unique<Store>((s.root / "dcalign.db").string());
  recover(s);

  std::shared_ptr<grpc::ServerCredentials> creds;
  if (s.opts.insecure_localhost) {
    creds = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({read_small_file(s.opts.tls_key_file, "TLS key"),
                                      read_small_file(s.opts.tls_cert_file, "TLS certificate")});
    creds = grpc::SslServerCredentials(ssl);
  }
  grpc::EnableDefaultHealthCheckService(true);
  impl_->service = make_service(s);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(s.opts.listen, creds, &impl_->port);
  builder.RegisterService(impl_->service.get());
  // A chunk and its envelope; a larger message is refused by gRPC before it is read whole.
  builder.SetMaxReceiveMessageSize(static_cast<int>(2 * s.opts.max_chunk_bytes + 4096));
  builder.SetMaxSendMessageSize(static_cast<int>(2 * s.opts.max_chunk_bytes + 4096));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, s.opts.max_concurrent_streams);
  grpc::ResourceQuota quota("dcalign-server");
  quota.SetMaxThreads(s.opts.max_upload_streams + 32);
  builder.SetResourceQuota(quota);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0)
    throw IoError("cannot listen on " + s.opts.listen + " (address in use or not valid?)");
  impl_->server->GetHealthCheckService()->SetServingStatus(true);
  impl_->worker = std::thread([&s] { run_job_worker(s); });
  log_event("info", "server_started",
            {{"listen", s.opts.listen},
             {"port", impl_->port},
             {"tls", !s.opts.insecure_localhost},
             {"data_dir", s.root.string()}});
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
    log_event("info", "server_stopped", {});
  });
}

}  // namespace dcalign::service
