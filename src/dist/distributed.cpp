// Alignment sharded over users: the methods of src/core themselves, run on
// every rank with its own users and an MpiTeam, which turns their reductions between users
// (src/core/team.hpp) into MPI collectives. This file keeps only the transport, the checks of
// the slices, the agreement on failures and the launch.
//
// Failures: every reduction of an MpiTeam first agrees (one allreduce of a flag) whether some
// rank failed since the last one. A rank whose method throws joins the agreement the others
// are waiting in from its error handler, so no rank waits in a collective that a failed rank
// never enters, and every rank throws the lowest failing rank's error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "core/common.hpp"
#include "core/methods.hpp"
#include "dcalign/distributed.hpp"
#include "dcalign/npy.hpp"

namespace dcalign::dist {

void Communicator::allreduce_sum_device(double*, index_t) {
  throw BackendError("this communicator cannot reduce device memory");
}
void Communicator::allreduce_sum_device(float*, index_t) {
  throw BackendError("this communicator cannot reduce device memory");
}

UserRange even_split(index_t users, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks || users < 0)
    throw InvalidInput("even_split: rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                       " ranks, " + std::to_string(users) + " users");
  UserRange r;
  r.first = users * rank / ranks;
  r.count = users * (rank + 1) / ranks - r.first;
  return r;
}

namespace {

enum Kind : std::int64_t { kNone = 0, kError, kInvalid, kIo, kNumerical, kBackend };

struct Failure {
  std::int64_t kind = kNone;
  std::string message;
};

Failure capture(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidInput& e) {
    return {kInvalid, e.what()};
  } catch (const IoError& e) {
    return {kIo, e.what()};
  } catch (const NumericalError& e) {
    return {kNumerical, e.what()};
  } catch (const BackendError& e) {
    return {kBackend, e.what()};
  } catch (const std::bad_alloc&) {
    return {kError, "out of memory (a memory allocation failed)"};
  } catch (const std::exception& e) {
    return {kError, e.what()};
  }
  return {};
}

[[noreturn]] void throw_kind(std::int64_t kind, const std::string& message) {
  switch (kind) {
    case kInvalid:
      throw InvalidInput(message);
    case kIo:
      throw IoError(message);
    case kNumerical:
      throw NumericalError(message);
    case kBackend:
      throw BackendError(message);
    default:
      throw Error(message);
  }
}

/// Called by every rank once the ranks know that some rank failed: the lowest failing rank's
/// error, broadcast, is thrown everywhere.
[[noreturn]] void resolve(Communicator& comm, const Failure& local) {
  double lowest = local.kind != kNone ? comm.rank() : comm.size();
  comm.allreduce_min(&lowest, 1);
  const int root = static_cast<int>(lowest);
  std::int64_t head[2] = {local.kind, static_cast<std::int64_t>(local.message.size())};
  comm.broadcast(head, sizeof head, root);
  std::string message = comm.rank() == root ? local.message : std::string(head[1], ' ');
  comm.broadcast(message.data(), head[1], root);
  throw_kind(head[0], "rank " + std::to_string(root) + " of " + std::to_string(comm.size()) + ": " +
                          message);
}

/// core's messages name users by their index in the stack they were given ("user 3: ...
/// A_3 ..."); this rank's users start at `first`.
std::string global_users(const std::string& message, index_t first) {
  if (first == 0 || message.compare(0, 5, "user ") != 0) return message;
  std::size_t end = 5;
  while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
  if (end == 5) return message;
  const std::string local = message.substr(5, end - 5);
  const std::string global = std::to_string(std::stoll(local) + first);
  std::string out = "user " + global + message.substr(end);
  const std::string from = "A_" + local, to = "A_" + global;
  for (std::size_t at = out.find(from); at != std::string::npos; at = out.find(from, at)) {
    const std::size_t after = at + from.size();
    if (after < out.size() && std::isdigit(static_cast<unsigned char>(out[after]))) {
      at = after;
      continue;
    }
    out.replace(at, from.size(), to);
    at += to.size();
  }
  return out;
}

/// The ranks of `comm` as the team of src/core/team.hpp, over backend memory of `p`.
template <typename T>
class MpiTeam final : public core::Team<T> {
 public:
  MpiTeam(Communicator& comm, Primitives<T>& p, std::vector<UserRange> ranges, index_t first,
          index_t total)
      : core::Team<T>(first, total), comm_(comm), p_(p), ranges_(std::move(ranges)) {}

  bool solo() const override { return false; }
  int rank() const override { return comm_.rank(); }
  int owner(index_t user) const override {
    for (int k = 0; k < comm_.size(); ++k) {
      const UserRange r = ranges_[static_cast<size_t>(k)];
      if (user >= r.first && user < r.first + r.count) return k;
    }
    return 0;
  }

  void sum(T* x, index_t n) override {
    agree();
    p_.synchronize();
    if (p_.device() == Device::cpu) {
      comm_.allreduce_sum(x, n);
    } else if (comm_.reduces_device_memory(p_.device())) {
      comm_.allreduce_sum_device(x, n);
    } else {
      std::vector<T> h(static_cast<size_t>(n));
      p_.to_host(x, h.data(), n);
      p_.synchronize();
      comm_.allreduce_sum(h.data(), n);
      p_.to_device(h.data(), x, n);
    }
  }
  void sum_host(double* x, index_t n) override {
    agree();
    comm_.allreduce_sum(x, n);
  }
  void max_host(double* x, index_t n) override {
    agree();
    comm_.allreduce_max(x, n);
  }
  void min_host(double* x, index_t n) override {
    agree();
    comm_.allreduce_min(x, n);
  }
  void broadcast(T* x, index_t n, int root) override {
    agree();
    p_.synchronize();
    if (p_.device() == Device::cpu) {
      comm_.broadcast(x, n * index_t(sizeof(T)), root);
      return;
    }
    std::vector<T> h(static_cast<size_t>(n));
    if (comm_.rank() == root) p_.to_host(x, h.data(), n);
    p_.synchronize();
    comm_.broadcast(h.data(), n * index_t(sizeof(T)), root);
    p_.to_device(h.data(), x, n);
  }
  void broadcast_host(void* bytes, index_t n, int root) override {
    agree();
    comm_.broadcast(bytes, n, root);
  }

  /// Every rank that has not failed, before each collective: throws the lowest failing rank's
  /// error when some rank failed.
  void agree() {
    double failed = 0;
    comm_.allreduce_max(&failed, 1);
    if (failed > 0) {
      settled_ = true;
      resolve(comm_, Failure{});
    }
  }
  /// A rank that failed: takes part in the agreement that the others wait in (or will reach).
  [[noreturn]] void fail(const Failure& failure) {
    double failed = 1;
    comm_.allreduce_max(&failed, 1);
    settled_ = true;
    resolve(comm_, failure);
  }
  /// Whether the ranks have agreed on a failure (its error is being thrown everywhere).
  bool settled() const { return settled_; }

 private:
  Communicator& comm_;
  Primitives<T>& p_;
  std::vector<UserRange> ranges_;
  bool settled_ = false;
};

}  // namespace

void collective(Communicator& comm, const std::function<void()>& fn) {
  const Failure failure = capture(fn);
  double failed = failure.kind != kNone ? 1.0 : 0.0;
  comm.allreduce_max(&failed, 1);
  if (failed > 0) resolve(comm, failure);
}

template <typename T>
LocalAlignment<T> align_distributed(Communicator& comm, const Stack<T>& anchors, index_t first_user,
                                    index_t total_users, const AlignOptions& opts,
                                    Backend& backend) {
  auto& p = backend.primitives<T>();
  const int P = comm.size(), me = comm.rank();
  // The slices: contiguous, in rank order, of one shape, covering all users.
  std::vector<std::int64_t> shape(static_cast<size_t>(5 * P), 0);
  shape[5 * me + 0] = first_user;
  shape[5 * me + 1] = anchors.count();
  shape[5 * me + 2] = anchors.rows();
  shape[5 * me + 3] = anchors.cols();
  shape[5 * me + 4] = total_users;
  comm.allreduce_sum(shape.data(), static_cast<index_t>(shape.size()));
  std::vector<UserRange> ranges(static_cast<size_t>(P));
  index_t next = 0;
  for (int k = 0; k < P; ++k) {
    const std::int64_t* v = &shape[static_cast<size_t>(5 * k)];
    const std::string who = "rank " + std::to_string(k) + " of " + std::to_string(P);
    if (v[1] < 1)
      throw InvalidInput(who + " holds no users; every rank needs at least one (" +
                         std::to_string(total_users) + " users over " + std::to_string(P) +
                         " ranks)");
    if (v[0] != next)
      throw InvalidInput(who + " holds users from " + std::to_string(v[0]) + ", expected " +
                         std::to_string(next) + ": the slices must be contiguous, in rank order");
    if (v[2] != shape[2] || v[3] != shape[3])
      throw InvalidInput(who + " has anchors of " + std::to_string(v[2]) + " x " +
                         std::to_string(v[3]) + ", rank 0 of " + std::to_string(shape[2]) + " x " +
                         std::to_string(shape[3]) + ": every A_i must have the same shape");
    if (v[4] != shape[4])
      throw InvalidInput(who + " was told of " + std::to_string(v[4]) + " users, rank 0 of " +
                         std::to_string(shape[4]));
    ranges[static_cast<size_t>(k)] = {v[0], v[1]};
    next += v[1];
  }
  if (next != total_users)
    throw InvalidInput("the ranks hold " + std::to_string(next) + " users, but total_users is " +
                       std::to_string(total_users));
  const Method m = opts.method;
  if (opts.reference_user < 0 || opts.reference_user >= total_users)
    throw InvalidInput("reference user " + std::to_string(opts.reference_user) +
                       " out of range: there are " + std::to_string(total_users) +
                       " users (0-based)");

  LocalAlignment<T> out;
  out.users = ranges[static_cast<size_t>(me)];
  const index_t a = anchors.rows(), l = anchors.cols(), n = anchors.count();
  AlignOptions local_opts = opts;
  local_opts.reference_user = 0;

  out.G = Stack<T>(n, l, l);
  const bool has_target = core::method_info(m).has_target;
  if (has_target) out.target = Matrix<T>(a, l);
  // Backend memory: the host arrays themselves on the CPU, copies on a device.
  Buffer<T> dA, dG, dZ;
  StackView<const T> A = anchors.view();
  StackView<T> G = out.G.view();
  MatrixView<T> Z = has_target ? out.target.view() : MatrixView<T>();
  const auto t0 = std::chrono::steady_clock::now();
  collective(comm, [&] {
    validate_anchors(p, anchors.view(), local_opts);
    if (p.device() != Device::cpu) {
      dA = p.allocate(anchors.size());
      dG = p.allocate(out.G.size());
      p.to_device(anchors.data(), dA.data(), anchors.size());
      A = StackView<const T>(dA.data(), n, a, l);
      G = StackView<T>(dG.data(), n, l, l);
      if (has_target) {
        dZ = p.allocate(a * l);
        Z = MatrixView<T>(dZ.data(), a, l);
      }
      p.synchronize();
    }
  });
  const auto t1 = std::chrono::steady_clock::now();

  // The method itself, on this rank's users (src/core/align.cpp).
  MpiTeam<T> team(comm, p, ranges, first_user, total_users);
  std::exception_ptr agreed;
  Failure failure = capture([&] {
    try {
      out.report = core::align_shared(team, p, A, G, Z, opts);
    } catch (...) {
      if (!team.settled()) throw;
      agreed = std::current_exception();  // thrown on every rank alike
    }
  });
  if (agreed) std::rethrow_exception(agreed);
  if (failure.kind != kNone) {
    failure.message = global_users(failure.message, first_user);  // core names users locally
    team.fail(failure);
  }
  team.agree();  // a rank that failed after the last reduction

  AlignReport& report = out.report;
  report.users = total_users;
  if (p.device() != Device::cpu) {
    report.seconds.insert(report.seconds.begin(),
                          {"upload", std::chrono::duration<double>(t1 - t0).count()});
    report.total_seconds += report.seconds.front().second;
    const auto t2 = std::chrono::steady_clock::now();
    p.to_host(G.data(), out.G.data(), out.G.size());
    if (has_target) p.to_host(Z.data(), out.target.data(), a * l);
    p.synchronize();
    report.add_phase("download",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count());
  }
  // Phases: the slowest rank's time for each (the ranks ran the same phases).
  std::vector<double> secs;
  for (const auto& ps : report.seconds) secs.push_back(ps.second);
  double range[2] = {-static_cast<double>(secs.size()), static_cast<double>(secs.size())};
  comm.allreduce_max(range, 2);
  if (-range[0] == range[1]) {
    comm.allreduce_max(secs.data(), static_cast<index_t>(secs.size()));
    report.total_seconds = 0;
    for (size_t k = 0; k < secs.size(); ++k) {
      report.seconds[k].second = secs[k];
      report.total_seconds += secs[k];
    }
  }
  return out;
}

template <typename T>
void write_npy_distributed(Communicator& comm, const std::string& path, StackView<const T> local,
                           index_t first_user, index_t total_users) {
  collective(comm, [&] {
    if (comm.rank() == 0) create_npy_stack<T>(path, total_users, local.rows(), local.cols());
  });
  collective(comm, [&] { write_npy_stack_slice<T>(path, first_user, local); });
}

#define DCALIGN_INSTANTIATE_DIST(T)                                                             \
  template LocalAlignment<T> align_distributed<T>(Communicator&, const Stack<T>&, index_t,      \
                                                  index_t, const AlignOptions&, Backend&);      \
  template void write_npy_distributed<T>(Communicator&, const std::string&, StackView<const T>, \
                                         index_t, index_t);
DCALIGN_INSTANTIATE_DIST(float)
DCALIGN_INSTANTIATE_DIST(double)

}  // namespace dcalign::dist
