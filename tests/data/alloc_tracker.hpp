#pragma once
// Largest single allocation made through operator new while a tracker is alive, for tests that
// a tiny file declaring enormous sizes is rejected without allocating for them. Include this
// header in exactly one source file of a test binary: it replaces the global operator new and
// delete (plain and array forms, which the aligned forms leave alone) with malloc-based ones
// that record the size.
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "base/sanitizers.hpp"

namespace dcalign::testing {

inline std::atomic<bool> g_track_allocations{false};
inline std::atomic<std::size_t> g_largest_allocation{0};

/// Records the largest operator-new allocation between construction and largest().
class AllocationTracker {
 public:
  AllocationTracker() {
    g_largest_allocation = 0;
    g_track_allocations = true;
  }
  ~AllocationTracker() { g_track_allocations = false; }
  AllocationTracker(const AllocationTracker&) = delete;
  AllocationTracker& operator=(const AllocationTracker&) = delete;
  std::size_t largest() const { return g_largest_allocation.load(); }
};

}  // namespace dcalign::testing

// Under AddressSanitizer the replacement is left out (ASan owns operator new and reports its own
// allocation failures); largest() then stays 0, so these checks bind in the normal build only.
#if DCALIGN_ASAN
#define DCALIGN_TRACK_ALLOCATIONS 0
#else
#define DCALIGN_TRACK_ALLOCATIONS 1
#endif

#if DCALIGN_TRACK_ALLOCATIONS
// GCC sees free() on what it takes for a new-expression's pointer; here both sides are malloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (dcalign::testing::g_track_allocations.load(std::memory_order_relaxed)) {
    std::size_t seen = dcalign::testing::g_largest_allocation.load(std::memory_order_relaxed);
    while (n > seen && !dcalign::testing::g_largest_allocation.compare_exchange_weak(seen, n)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // DCALIGN_TRACK_ALLOCATIONS
