#pragma once
// Workspace memory of a CPU backend. Each alignment allocates its workspaces afresh (the
// products M_i, the polar iterates, the target). Blocks of a megabyte and more come from the
// kernel as new pages, which it zeroes and maps one page fault at a time on first touch, on every
// call: at (a, l, c) = (1000, 50, 1000) three 20 MB workspaces, 15000 faults. The pool keeps such
// blocks when their Buffer releases them and hands them to the next allocation they fit, as the
// CUDA backend's stream-ordered pool does on the device: ODC there took 144 instead of 153 ms
// (medians of 15, report's total). Kept memory is bounded (kKeepAtMost) and freed with the
// backend; blocks still in use then are freed when released. Under AddressSanitizer nothing is
// kept, so that it still sees every use after release.
#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

#include "base/sanitizers.hpp"

namespace dcalign::cpu {

class HostPool {
 public:
  /// Blocks from this size up are kept when released (below it, malloc reuses memory itself).
  static constexpr std::size_t kKeepFrom = std::size_t(1) << 20;
  /// At most this many bytes are kept in all; the oldest kept blocks go first.
  static constexpr std::size_t kKeepAtMost = std::size_t(512) << 20;
  /// A kept block serves requests down to 1 / kMaxSlack of its size.
  static constexpr std::size_t kMaxSlack = 2;
  static constexpr bool kKeeps = !DCALIGN_ASAN;

  /// A new pool, referenced once (by its backend, which must close() it).
  static HostPool* open();
  /// The backend is gone: frees the kept blocks and drops the backend's reference; the pool
  /// itself lives until the last block handed out is released.
  void close();

  /// `bytes` of uninitialised memory aligned to 64 bytes: a kept block of at least `bytes` and
  /// at most kMaxSlack times that, else a new one. Throws std::bad_alloc.
  void* acquire(std::size_t bytes);
  /// Returns a block from acquire() to its pool (a Buffer deleter; the context is unused).
  static void release(void* p, void* context = nullptr);

  /// Bytes kept for reuse now, and how many acquire() calls reused a kept block (tests).
  std::size_t kept_bytes() const;
  std::size_t reuses() const;

 private:
  struct Kept {
    void* raw;
    std::size_t capacity;
  };
  HostPool() = default;
  void unref();
  void give_back(void* raw, std::size_t capacity);

  mutable std::mutex mutex_;
  std::vector<Kept> kept_;  // oldest first
  std::size_t kept_bytes_ = 0;
  std::size_t reuses_ = 0;
  bool closed_ = false;
  std::atomic<long> refs_{1};
};

}  // namespace dcalign::cpu
