#pragma once
// The server's bounds on what callers can hold (internal to src/service): connections per peer
// and in total, the descriptor limit they must stay under, deadlines on every stream, and the
// watch on gRPC's accept loop. Each keeps the server able to serve everyone else.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace dcalign::service {

/// The address part of a gRPC peer string ("ipv4:127.0.0.1:5000" -> "ipv4:127.0.0.1").
std::string peer_address(const std::string& peer);

/// Bounds the TCP connections the server holds: at most `per_peer` from one address and
/// `total` in all. gRPC 1.51 has no such limit, and a connection refused from its socket
/// mutator by returning false stops its accept loop for good; a connection over a bound is
/// therefore shut down (shutdown(2)) in the mutator, and gRPC closes it as soon as it reads the
/// end of the stream. The descriptor stays open only for that moment.
class ConnectionGuard {
 public:
  ConnectionGuard(int total, int per_peer);
  /// A channel argument that installs the guard on a server (grpc::ServerBuilder::SetOption).
  std::unique_ptr<grpc::ServerBuilderOption> builder_option();
  /// Connections refused so far, and held now (counted afresh).
  std::uint64_t refused() const { return refused_.load(); }
  int held();

  /// Called by the mutator for each accepted socket: false when it was shut down.
  bool admit(int fd);
  struct Mutator;  ///< gRPC's socket mutator around this guard (limits.cpp)

 private:
  struct Held {
    std::uint64_t inode;
    std::string address;
  };
  void prune();  // forgets sockets that gRPC has closed (fd gone or reused)
  const int total_, per_peer_;
  std::mutex mu_;
  std::map<int, Held> held_;
  std::atomic<std::uint64_t> refused_{0};
  Mutator* mutator_;  // owned by a process-wide registry: gRPC may hold it after the server
};

/// Makes sure the process may open `needed` descriptors: raises the soft RLIMIT_NOFILE up to the
/// hard one when it is lower, and throws InvalidInput (naming the limit, the need and the
/// options that make it) when even the hard limit is lower. Returns the soft limit in force.
std::uint64_t ensure_descriptor_limit(std::uint64_t needed, const std::string& why);

/// Deadlines on streaming calls. A stream registers a ticket with the deadline of its first
/// message; each message read or written moves the deadline to now + the idle timeout. A thread
/// cancels (ServerContext::TryCancel) every stream past its deadline, so a blocked Read or Write
/// returns and the handler's thread is free again.
class StreamWatchdog {
 public:
  StreamWatchdog();
  ~StreamWatchdog();
  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  class Ticket {
   public:
    /// `rpc` names the call in the log line of a cancellation (a string literal).
    Ticket(StreamWatchdog& w, grpc::ServerContext* ctx, double first_seconds, const char* rpc);
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    /// A message went through: the next must come within `idle_seconds`.
    void progress(double idle_seconds);
    /// Whether the watchdog cancelled the stream.
    bool expired() const;

   private:
    StreamWatchdog& w_;
    std::uint64_t id_;
  };

  /// Also runs `check` about every 100 ms on the watchdog's thread (the accept watch).
  void set_periodic(std::function<void()> check);
  std::uint64_t cancelled() const { return cancelled_.load(); }

 private:
  struct Entry {
    grpc::ServerContext* ctx;
    std::chrono::steady_clock::time_point deadline;
    const char* rpc;
    bool first = true;  ///< no message has gone through yet
    bool expired = false;
  };
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, Entry> entries_;
  std::function<void()> periodic_;
  std::atomic<std::uint64_t> cancelled_{0};
  std::thread thread_;
};

/// gRPC's own log lines go through log_event (JSON, "event": "grpc"), and an accept loop that
/// failed (gRPC 1.51 stops accepting for good after accept4 fails, e.g. with EMFILE) is noted.
/// Idempotent; process-wide.
void route_grpc_logs();
/// The first accept failure gRPC logged since route_grpc_logs(), or "".
std::string accept_failure();
/// Records an accept failure (the first one is kept): gRPC's log through route_grpc_logs(), or the
/// fault point "accept_failure" of the tests.
void note_accept_failure(const std::string& message);

}  // namespace dcalign::service
