#pragma once
// The whole Newton phase of the batched polar iteration (src/core/polar.cpp) for one matrix, as
// one block of cooperating threads runs it: the inverse by Gauss-Jordan elimination with
// partial pivoting, the norms, the scaled Newton step and the decisions of polar_scalar.hpp,
// step after step with no exchange with the host. The CUDA backend runs it as one thread block
// per matrix with X and its inverse in shared memory (kernels/polar_fused.cu), which removes
// the host synchronisation and the batched-LU calls of every step; the CPU tests run the same
// function through SerialBlock, so CI checks the logic that the GPU runs.
//
// Why no library: cuBLAS's batched LU and inverse work one step at a time over the whole batch
// and return to the host between steps; no cuSOLVER or cuBLAS routine runs a per-matrix
// iteration with per-matrix stopping.
//
// A Block offers (every thread of the block calls each function, with the same arguments):
//   for_each(n, f)     f(i) for i in [0, n), the indices shared among the threads;
//   for_each_2d(r, c, f)  f(i, j) for every entry of an r x c matrix, shared among the threads
//                      (the CUDA block keeps one row per thread, so its loop has no division);
//   sync()             a barrier (makes the writes of for_each visible to every thread);
//   sum(n, f)          sum of f(i) over [0, n) in double, the same value returned everywhere;
//   sum2(n, f, a, b)   two sums at once: f(i, s1, s2) adds to s1 and s2;
//   argmax(n, f)       the first i of the largest f(i) (f(i) >= 0), the same everywhere; no
//                      barrier and no shared workspace (each CUDA warp scans all n itself), so
//                      f may only read what no thread writes before the next sync();
//   leader()           true on exactly one thread.
// sum and sum2 hold a barrier after every thread's last call of f: f's accesses are ordered
// before everything that follows the reduction.
#include "base/polar_scalar.hpp"

namespace dcalign::polar {

/// The split of Block::for_each_2d over `threads` threads, as thread `tid` takes it (the CUDA
/// block's, and the threaded test block's, so that the test splits the work as the GPU does):
/// one row per thread, thread t taking row t % rows and the columns t / rows + m * groups of
/// it (groups = threads / rows whole row sets; the few threads past them idle), so the
/// innermost loops carry no integer division and consecutive threads touch consecutive entries
/// of a column. Rows beyond the thread count fall back to the flat loop.
template <typename F>
DCALIGN_HD inline void split_2d(int tid, int threads, int rows, int cols, F f) {
  if (rows > threads) {
    for (int e = tid; e < rows * cols; e += threads) f(e % rows, e / rows);
    return;
  }
  const int groups = threads / rows, i = tid % rows;
  for (int j = tid / rows; j < cols && tid < groups * rows; j += groups) f(i, j);
}

/// The block of one CPU thread: the reference execution of the block code (the tests).
struct SerialBlock {
  template <typename F>
  void for_each(int n, F f) {
    for (int i = 0; i < n; ++i) f(i);
  }
  template <typename F>
  void for_each_2d(int rows, int cols, F f) {
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < rows; ++i) f(i, j);
  }
  void sync() {}
  template <typename F>
  double sum(int n, F f) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += f(i);
    return s;
  }
  template <typename F>
  void sum2(int n, F f, double& a, double& b) {
    a = 0;
    b = 0;
    for (int i = 0; i < n; ++i) f(i, a, b);
  }
  template <typename F>
  int argmax(int n, F f) {
    int best = 0;
    double top = -1;
    for (int i = 0; i < n; ++i) {
      const double v = f(i);
      if (v > top) {
        top = v;
        best = i;
      }
    }
    return best;
  }
  bool leader() const { return true; }
};

/// A <- A^{-1} for the n x n column-major A (leading dimension n), in place, by Gauss-Jordan
/// elimination with partial pivoting; `column` holds n values and `swaps` n ints of workspace.
/// False for an exactly zero pivot, with A then undefined. The caller has synchronised the
/// block after writing A.
///
/// Step k: the row p >= k of the largest |A(p, k)| is swapped into row k; row k is divided by
/// the pivot with A(k, k) replaced by 1 first (so it ends as 1 / pivot); every other row i
/// subtracts A(i, k) times row k, with A(i, k) replaced by 0 first. The row swaps, undone in
/// reverse order as column swaps, give A^{-1} of the unpermuted A. About 2 n^3 flops, as LU with
/// getri.
///
/// Two barriers per step (an earlier version had six, and one per undone swap): every thread
/// finds the pivot row itself (Block::argmax needs no barrier) in column k, which no thread
/// writes before the step's last pass; the swap, the scaling of row k and the multipliers are
/// one pass that leaves column k alone; the update then writes column k from the multipliers.
/// The arithmetic of every entry is the same as before, so the inverse is unchanged bit for
/// bit. Which thread touches what between two barriers (a write never meets another thread's
/// access) is checked by tests/base/test_polar_block_threads.cpp under ThreadSanitizer.
template <typename T, typename Block>
DCALIGN_HD inline bool gauss_jordan_inverse(Block& b, T* A, int n, T* column, int* swaps) {
  for (int k = 0; k < n; ++k) {
    // Column k is stable here: its last writes were the previous step's update, before the
    // barrier that ended it (or the caller's).
    const int p = k + b.argmax(n - k, [&](int i) {
      const double v = static_cast<double>(A[(k + i) + k * n]);
      return v < 0 ? -v : v;
    });
    const T pivot = A[p + k * n];
    // Exactly zero: singular (as LAPACK's getrf reports it). A NaN or Inf goes on, as in the
    // CPU backend, and the step's norms then stop the matrix as non-finite. The same value on
    // every thread, so the return is uniform over the block.
    if (pivot == T(0)) return false;
    if (b.leader()) swaps[k] = p;
    const T inv = T(1) / pivot;
    // One pass over disjoint entries, column k only read: the multipliers column[i] = A(i, k)
    // of the swapped matrix (row p holds the old row k), i != k; and in every column j != k,
    // rows k and p exchanged with the new row k scaled by 1 / pivot (one thread per column).
    b.for_each(2 * n, [&](int t) {
      if (t < n) {
        if (t != k) column[t] = A[(t == p ? k : t) + k * n];
        return;
      }
      const int j = t - n;
      if (j == k) return;
      const T top = A[p + j * n];
      if (p != k) A[p + j * n] = A[k + j * n];
      A[k + j * n] = top * inv;
    });
    b.sync();
    // Every other row i subtracts column[i] times row k; column k becomes -column[i] / pivot
    // and A(k, k) becomes 1 / pivot (the same operations as scaling A(k, k) = 1 first). Column
    // k, never swapped, is written whole here.
    b.for_each_2d(n, n, [&](int i, int j) {
      T& a = A[i + j * n];
      if (i == k) {
        if (j == k) a = inv;
        return;
      }
      const T f = column[i];
      a = j == k ? -(f * inv) : a - f * A[k + j * n];
    });
    b.sync();
  }
  // The column swaps, in reverse order, one row per thread: a row's entries only move within
  // the row, so one barrier at the end covers all of them.
  b.for_each(n, [&](int i) {
    for (int k = n - 1; k >= 0; --k) {
      const int p = swaps[k];
      if (p != k) {
        const T t = A[i + k * n];
        A[i + k * n] = A[i + p * n];
        A[i + p * n] = t;
      }
    }
  });
  b.sync();
  return true;
}

/// The Newton phase of one matrix: up to max_steps times, while polar::active(state), Y = X^{-1}
/// (gauss_jordan_inverse; a zero pivot marks the matrix singular) and one scaled Newton step
/// X <- zeta X / 2 + Y^T / (2 zeta) with the decisions of polar_scalar.hpp, as the CPU backend's
/// polar_newton_steps takes them. X and Y are n x n (Y is workspace), `state` holds kStateSize
/// values that every thread may read; only the leader writes it, and the block is synchronised
/// on return. Returns whether the matrix is still active.
template <typename T, typename Block>
DCALIGN_HD inline bool newton_phase(Block& b, T* X, T* Y, T* state, int n, int max_steps,
                                    double tolerance, T* column, int* swaps) {
  // Every thread keeps the state in its own copy, updated by the same calls on the same
  // (reduced, hence equal) arguments, so the decisions need no broadcast.
  T st[kStateSize];
  b.sync();
  for (int i = 0; i < kStateSize; ++i) st[i] = state[i];
  for (int it = 0; it < max_steps && active(st); ++it) {
    b.for_each(n * n, [&](int e) { Y[e] = X[e]; });
    b.sync();
    if (!gauss_jordan_inverse(b, Y, n, column, swaps)) {
      mark_singular(st);
      break;
    }
    double fx2 = 0, fy2 = 0;
    b.sum2(
        n * n,
        [&](int e, double& s1, double& s2) {
          const double x = static_cast<double>(X[e]), y = static_cast<double>(Y[e]);
          s1 += x * x;
          s2 += y * y;
        },
        fx2, fy2);
    const T zeta = newton_zeta(st, fx2, fy2, it);
    if (!(zeta > T(0))) break;  // newton_zeta stopped the matrix
    const T a = zeta / T(2), c = T(1) / (T(2) * zeta);
    double dx2 = 0, xn2 = 0;
    b.sum2(
        n * n,
        [&](int e, double& s1, double& s2) {
          const int i = e % n, j = e / n;
          const T v = a * X[e] + c * Y[j + i * n];
          const double d = static_cast<double>(v) - static_cast<double>(X[e]);
          s1 += d * d;
          s2 += static_cast<double>(v) * static_cast<double>(v);
          X[e] = v;
        },
        dx2, xn2);
    newton_after(st, dx2, xn2, tolerance, n);
  }
  b.sync();
  if (b.leader())
    for (int i = 0; i < kStateSize; ++i) state[i] = st[i];
  b.sync();
  return active(st);
}

/// The Newton-Schulz steps of the polish for one matrix with this state after its Newton phase:
/// the count the phase recorded (polar::schulz_steps of its error bound), at least one. A matrix
/// that failed or did not converge gets one; the caller replaces its factor anyway.
template <typename T>
DCALIGN_HD inline int polish_steps(const T* st) {
  const int k = (flags(st) & kConverged) ? static_cast<int>(st[kSchulz]) : 1;
  return k < 1 ? 1 : k;
}

/// The Newton-Schulz polish of one matrix after its Newton phase: `steps` times
/// X <- X + X D with D = (I - X^T X) / 2, the same step as the batched polish of
/// src/core/polar.cpp (the small correction D keeps float within 1e-5 of orthogonality). The
/// products accumulate in double and each entry is rounded to T once, so a step adds at most
/// about u per entry beyond the step's own error. X and D are n x n in the block's memory, the
/// result goes to `out` (any memory the block can write; it also holds the intermediate
/// steps). The block is synchronised on return.
template <typename T, typename Block>
DCALIGN_HD inline void schulz_phase(Block& b, T* X, T* D, T* out, int n, int steps) {
  for (int step = 0; step < steps; ++step) {
    b.sync();
    b.for_each_2d(n, n, [&](int i, int j) {
      // (X^T X)(i, j), the sum started at row i: the CUDA block's lanes hold consecutive i, and
      // reading row r of columns i, i + 1, ... would put every lane in one shared-memory bank
      // when n is a multiple of 32; rows r + i spread them (the same order on every backend).
      double g = 0;
      for (int t = 0, r = i; t < n; ++t, r = r + 1 < n ? r + 1 : 0)
        g += static_cast<double>(X[r + i * n]) * static_cast<double>(X[r + j * n]);
      D[i + j * n] = static_cast<T>(((i == j) ? 0.5 : 0.0) - 0.5 * g);
    });
    b.sync();
    b.for_each_2d(n, n, [&](int i, int j) {
      double v = static_cast<double>(X[i + j * n]);
      for (int r = 0; r < n; ++r)
        v += static_cast<double>(X[i + r * n]) * static_cast<double>(D[r + j * n]);
      out[i + j * n] = static_cast<T>(v);
    });
    b.sync();
    if (step + 1 < steps) b.for_each(n * n, [&](int e) { X[e] = out[e]; });
  }
  b.sync();
}

}  // namespace dcalign::polar
