#pragma once
// Helpers shared by the CPU backend's files (cpu_backend.cpp, cpu_backend_iterations.cpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>

#include "base/host_blas.hpp"
#include "dcalign/error.hpp"
#include "dcalign/matrix.hpp"

namespace dcalign::cpu::detail {

using namespace base;  // the host BLAS/LAPACK wrappers

inline lapack_int li(index_t v) {
  if (v > std::numeric_limits<lapack_int>::max())
    throw InvalidInput("dimension " + std::to_string(v) +
                       " exceeds the 32-bit LAPACK integer range");
  return static_cast<lapack_int>(v);
}

// The chunk of a dynamically scheduled loop over users whose items cost `flops` each: one user
// at a time once an item is worth far more than the scheduler's grab (under a microsecond), so
// that the last items spread over the threads (50 SVDs of 500 x 500 in chunks of 4 left one
// core idle for two of them, about 0.1 s); chunks of 4 below that.
inline int dynamic_chunk(double flops) { return flops >= 1e5 ? 1 : 4; }

// Whether any of n values is NaN or Inf: the exponent field all ones. An OR over integer tests
// vectorises, where a loop on std::isfinite with an early exit does not (4x faster on the
// anchors' scan in bench/bm_004); the first offender is then found by the plain loop.
template <typename T>
bool any_nonfinite(const T* x, index_t n) {
  using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  constexpr Bits mask = sizeof(T) == 8 ? Bits(0x7FF0000000000000ULL) : Bits(0x7F800000U);
  Bits bad = 0;
  for (index_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, x + i, sizeof b);
    bad |= Bits((b & mask) == mask);
  }
  return bad != 0;
}

// Whether the lower triangle of a square matrix (what LAPACK's symmetric routines read) is
// free of NaN and Inf. They need not return on an Inf, so the eigensolvers check first.
template <typename T>
bool lower_triangle_finite(MatrixView<const T> S) {
  for (index_t j = 0; j < S.cols(); ++j)
    if (any_nonfinite(&S(j, j), S.rows() - j)) return false;
  return true;
}

// An exception that leaves an OpenMP region terminates the program, so the loops over matrices
// run their bodies through one ParallelErrors: it keeps the failure of the lowest matrix index
// (the report does not depend on the schedule), lets the matrices after it be skipped, and
// rethrow() raises it on the calling thread, after the region, naming the primitive and the
// matrix. A failure outside the per-matrix body (a workspace query) is recorded as index -1.
class ParallelErrors {
 public:
  explicit ParallelErrors(const char* primitive) : primitive_(primitive) {}
  /// Runs body() for matrix k (k = -1: the region's set-up) unless an earlier matrix failed.
  template <typename F>
  void run(index_t k, F&& body) noexcept {
    if (k > first_.load(std::memory_order_relaxed)) return;
    try {
      body();
    } catch (...) {
      record(k, std::current_exception());
    }
  }
  bool failed() const { return first_.load(std::memory_order_relaxed) != kNone; }
  /// Rethrows the recorded failure (if any) as the same dcalign exception type, its message
  /// prefixed with the primitive and the matrix index.
  void rethrow() const {
    if (!error_) return;
    const std::string where =
        std::string(primitive_) + (index_ >= 0 ? ", matrix " + std::to_string(index_) : "") + ": ";
    try {
      std::rethrow_exception(error_);
    } catch (const InvalidInput& e) {
      throw InvalidInput(where + e.what());
    } catch (const NumericalError& e) {
      throw NumericalError(where + e.what());
    } catch (const BackendError& e) {
      throw BackendError(where + e.what());
    } catch (const IoError& e) {
      throw IoError(where + e.what());
    } catch (const Error& e) {
      throw Error(where + e.what());
    }
    // Anything else (std::bad_alloc) propagates unchanged from rethrow_exception.
  }

 private:
  static constexpr index_t kNone = std::numeric_limits<index_t>::max();
  void record(index_t k, std::exception_ptr e) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (k < index_) {
      index_ = k;
      error_ = std::move(e);
      first_.store(k, std::memory_order_relaxed);
    }
  }
  const char* primitive_;
  std::atomic<index_t> first_{kNone};
  std::mutex mutex_;
  index_t index_ = kNone;
  std::exception_ptr error_;
};

}  // namespace dcalign::cpu::detail
