#pragma once
// The processes that share one alignment. A method sees its own users (Context::A) and reaches
// the others only through these reductions: sums of Gram matrices, sketches and objective terms,
// GOPP's per-iteration mean, broadcasts of what one process computed. In one process (the
// default, this class itself) every call is a no-op, so the single-process arithmetic is the
// method's own; src/dist implements them over MPI (NCCL for device memory), which is how every
// method runs distributed without a second copy of it.
//
// Every process calls the same reductions in the same order. A process that fails between two
// of them does not leave the others waiting: src/dist's reductions first agree on whether any
// process failed, and the failed process takes part in that agreement from its error handler.
#include "dcalign/align.hpp"

namespace dcalign::core {

template <typename T>
class Team {
 public:
  Team() = default;
  Team(index_t first, index_t total) : first_(first), total_(total) {}
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;
  virtual ~Team() = default;

  /// One process holds every user: the reductions do nothing.
  virtual bool solo() const { return true; }
  virtual int rank() const { return 0; }
  /// The process that holds `user` (a global index).
  virtual int owner(index_t user) const {
    (void)user;
    return 0;
  }
  /// The global index of this process's first user (its users are contiguous).
  index_t first() const { return first_; }
  /// All users over all processes (0: the caller's stack is all of them).
  index_t total() const { return total_; }

  /// In-place sums over the processes, of n values in backend memory or on the host.
  virtual void sum(T* x, index_t n) {
    (void)x;
    (void)n;
  }
  virtual void sum_host(double* x, index_t n) {
    (void)x;
    (void)n;
  }
  /// In-place maximum (minimum) over the processes of n host values.
  virtual void max_host(double* x, index_t n) {
    (void)x;
    (void)n;
  }
  virtual void min_host(double* x, index_t n) {
    (void)x;
    (void)n;
  }
  /// n values in backend memory (bytes on the host) from the process `root` to every process.
  virtual void broadcast(T* x, index_t n, int root) {
    (void)x;
    (void)n;
    (void)root;
  }
  virtual void broadcast_host(void* bytes, index_t n, int root) {
    (void)bytes;
    (void)n;
    (void)root;
  }

  double sum_host(double x) {
    sum_host(&x, 1);
    return x;
  }
  double max_host(double x) {
    max_host(&x, 1);
    return x;
  }
  double min_host(double x) {
    min_host(&x, 1);
    return x;
  }

 private:
  index_t first_ = 0, total_ = 0;
};

}  // namespace dcalign::core
