#include "service/limits.hpp"

#include <grpc/support/log.h>
#include <grpc/support/sync.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <algorithm>
#include <cstring>
#include <vector>

#include "dcalign/error.hpp"
#include "service/common.hpp"

// gRPC's socket mutator (src/core/lib/iomgr/socket_mutator.h in gRPC's sources, which Debian's
// libgrpc-dev does not install; gRPC 1.51's channel argument GRPC_ARG_SOCKET_MUTATOR is public).
// The layout below is the one of gRPC 1.x since mutate_fd_2 was added (1.36); ConnectionGuard's
// tests fail if it ever stops matching (a refused connection would be served).
extern "C" {
typedef enum {
  kGrpcFdClientConnectionUsage,
  kGrpcFdServerListenerUsage,
  kGrpcFdServerConnectionUsage,
} dcalign_grpc_fd_usage;
struct dcalign_grpc_mutate_socket_info {
  int fd;
  dcalign_grpc_fd_usage usage;
};
struct dcalign_grpc_socket_mutator_vtable {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  bool (*mutate_fd_2)(const dcalign_grpc_mutate_socket_info* info, grpc_socket_mutator* mutator);
};
}

struct grpc_socket_mutator {
  const dcalign_grpc_socket_mutator_vtable* vtable;
  gpr_refcount refcount;
};

namespace dcalign::service {

std::string peer_address(const std::string& peer) {
  const auto colon = peer.rfind(':');
  const auto first = peer.find(':');
  if (colon == std::string::npos || colon == first) return peer;
  return peer.substr(0, colon);
}

// ---------------------------------------------------------------- connections

struct ConnectionGuard::Mutator {
  grpc_socket_mutator base;  // first: gRPC passes &base
  ConnectionGuard* guard;
};

namespace {

bool guard_mutate(const dcalign_grpc_mutate_socket_info* info, grpc_socket_mutator* m) {
  if (info->usage != kGrpcFdServerConnectionUsage) return true;
  auto* self = reinterpret_cast<ConnectionGuard::Mutator*>(m);  // base is the first member
  self->guard->admit(info->fd);
  return true;  // false would stop gRPC's accept loop (see the class comment)
}
int guard_compare(grpc_socket_mutator* a, grpc_socket_mutator* b) { return a < b ? -1 : a > b; }
void guard_destroy(grpc_socket_mutator*) {}  // the registry keeps it
const dcalign_grpc_socket_mutator_vtable kGuardVtable = {nullptr, guard_compare, guard_destroy,
                                                         guard_mutate};

std::mutex g_registry_mu;
// Reachable for the process's life (gRPC may still hold a mutator after its server is gone).
std::vector<void*>* g_registry = new std::vector<void*>;

std::string address_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "unknown";
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
    return std::string("ipv4:") + buf;
  }
  if (ss.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
    return std::string("ipv6:[") + buf + "]";
  }
  return "unix";
}

std::uint64_t inode_of(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return static_cast<std::uint64_t>(st.st_ino);
}

}  // namespace

ConnectionGuard::ConnectionGuard(int total, int per_peer)
    : total_(total), per_peer_(per_peer), mutator_(new Mutator{}) {
  mutator_->base.vtable = &kGuardVtable;
  gpr_ref_init(&mutator_->base.refcount, 1);
  mutator_->guard = this;
  std::lock_guard<std::mutex> lock(g_registry_mu);
  g_registry->push_back(mutator_);
}

namespace {
class MutatorOption final : public grpc::ServerBuilderOption {
 public:
  explicit MutatorOption(grpc_socket_mutator* m) : m_(m) {}
  void UpdateArguments(grpc::ChannelArguments* args) override { args->SetSocketMutator(m_); }
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*) override {}

 private:
  grpc_socket_mutator* m_;
};
}  // namespace

std::unique_ptr<grpc::ServerBuilderOption> ConnectionGuard::builder_option() {
  // SetSocketMutator takes a reference of its own for the channel arguments.
  gpr_ref(&mutator_->base.refcount);
  return std::make_unique<MutatorOption>(&mutator_->base);
}

void ConnectionGuard::prune() {
  for (auto it = held_.begin(); it != held_.end();)
    it = inode_of(it->first) == it->second.inode ? std::next(it) : held_.erase(it);
}

int ConnectionGuard::held() {
  std::lock_guard<std::mutex> lock(mu_);
  prune();
  return static_cast<int>(held_.size());
}

bool ConnectionGuard::admit(int fd) {
  const std::string address = address_of(fd);
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(fd);  // the descriptor number is new again: its earlier socket is closed
  prune();
  int from_peer = 0;
  for (const auto& [f, h] : held_) from_peer += h.address == address ? 1 : 0;
  const char* over = static_cast<int>(held_.size()) >= total_ ? "total"
                     : from_peer >= per_peer_                 ? "per_peer"
                                                              : nullptr;
  if (over) {
    ::shutdown(fd, SHUT_RDWR);
    // One line per power of two refused, so that a flood cannot flood the log too.
    const std::uint64_t n = ++refused_;
    if ((n & (n - 1)) == 0)
      log_event("warning", "connection_refused",
                {{"peer", address},
                 {"bound", over},
                 {"held", held_.size()},
                 {"from_peer", from_peer},
                 {"refused_so_far", n}});
    return false;
  }
  held_.emplace(fd, Held{inode_of(fd), address});
  return true;
}

std::uint64_t ensure_descriptor_limit(std::uint64_t needed, const std::string& why) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0)
    throw IoError(std::string("cannot read the descriptor limit: ") + std::strerror(errno));
  // Raised to the hard limit (at most 2^20): the bounds keep the connections held under `needed`,
  // and the headroom absorbs a burst of connections that are refused but not yet closed.
  constexpr rlim_t kCeiling = rlim_t{1} << 20;
  const rlim_t wanted = std::max<rlim_t>(kCeiling, needed);
  const rlim_t target =
      rl.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(rl.rlim_max, wanted);
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < target) {
    rlimit raised = rl;
    raised.rlim_cur = target;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      log_event("info", "descriptor_limit_raised",
                {{"from", rl.rlim_cur}, {"to", raised.rlim_cur}, {"needed", needed}});
      rl = raised;
    }
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < needed)
    throw InvalidInput(
        "the process may open " + std::to_string(rl.rlim_cur) + " files (ulimit -n; hard limit " +
        (rl.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(rl.rlim_max)) +
        "), but " + why + " need " + std::to_string(needed) +
        ": raise the limit (ulimit -n, or LimitNOFILE= in a systemd unit) or "
        "lower --max-connections");
  return rl.rlim_cur == RLIM_INFINITY ? needed : static_cast<std::uint64_t>(rl.rlim_cur);
}

// ---------------------------------------------------------------- streams

StreamWatchdog::StreamWatchdog() : thread_([this] { loop(); }) {}

StreamWatchdog::~StreamWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StreamWatchdog::set_periodic(std::function<void()> check) {
  std::lock_guard<std::mutex> lock(mu_);
  periodic_ = std::move(check);
}

void StreamWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    const auto now = std::chrono::steady_clock::now();
    for (auto& [id, e] : entries_)
      if (!e.expired && e.deadline <= now) {
        e.expired = true;
        e.ctx->TryCancel();
        ++cancelled_;
        // The client reads CANCELLED (gRPC's sync API sends no status after a cancellation).
        log_event("warning", "stream_timed_out",
                  {{"rpc", e.rpc},
                   {"peer", peer_address(e.ctx->peer())},
                   {"waited_for", e.first ? "the first message" : "the next message"}});
      }
    if (periodic_) {
      auto check = periodic_;
      lock.unlock();
      check();
      lock.lock();
    }
  }
}

namespace {
std::chrono::steady_clock::time_point after(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::microseconds(static_cast<long long>(seconds * 1e6));
}
}  // namespace

StreamWatchdog::Ticket::Ticket(StreamWatchdog& w, grpc::ServerContext* ctx, double first_seconds,
                               const char* rpc)
    : w_(w) {
  std::lock_guard<std::mutex> lock(w_.mu_);
  id_ = w_.next_++;
  w_.entries_.emplace(id_, Entry{ctx, after(first_seconds), rpc});
}

StreamWatchdog::Ticket::~Ticket() {
  std::lock_guard<std::mutex> lock(w_.mu_);
  w_.entries_.erase(id_);
}

void StreamWatchdog::Ticket::progress(double idle_seconds) {
  std::lock_guard<std::mutex> lock(w_.mu_);
  auto& e = w_.entries_.at(id_);
  if (!e.expired) e.deadline = after(idle_seconds);
  e.first = false;
}

bool StreamWatchdog::Ticket::expired() const {
  std::lock_guard<std::mutex> lock(w_.mu_);
  return w_.entries_.at(id_).expired;
}

// ---------------------------------------------------------------- gRPC's log

namespace {

std::mutex g_accept_mu;
std::string g_accept_failure;

void grpc_log_line(gpr_log_func_args* args) {
  const std::string message = args->message ? args->message : "";
  const char* level = args->severity == GPR_LOG_SEVERITY_ERROR  ? "error"
                      : args->severity == GPR_LOG_SEVERITY_INFO ? "info"
                                                                : "debug";
  log_event(level, "grpc",
            {{"message", message}, {"file", args->file ? args->file : ""}, {"line", args->line}});
  if (message.find("accept") != std::string::npos &&
      (message.find("ailed") != std::string::npos ||
       message.find("open files") != std::string::npos))
    note_accept_failure(message);
}

}  // namespace

void route_grpc_logs() {
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(grpc_log_line); });
}

std::string accept_failure() {
  std::lock_guard<std::mutex> lock(g_accept_mu);
  return g_accept_failure;
}

void note_accept_failure(const std::string& message) {
  std::lock_guard<std::mutex> lock(g_accept_mu);
  if (g_accept_failure.empty()) g_accept_failure = message;
}

}  // namespace dcalign::service
