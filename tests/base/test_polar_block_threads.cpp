// The fused polar kernel's block code (src/base/polar_block.hpp) run by real threads: P
// std::threads play the CUDA thread block, with the same split of the work (for_each strided by
// thread, for_each_2d one row per thread as kernels/polar_fused.cu's CudaBlock), a real barrier
// for sync() and reductions through shared partial sums. The results are checked against
// polar::SerialBlock: the inverse bit for bit (every entry gets the same operations in the same
// order), the Newton phase's decisions exactly and its iterates to the rounding of the sums.
//
// The other purpose is the races. This file depends on nothing but the header and GoogleTest,
// so scripts/test-tsan.sh builds it alone under ThreadSanitizer: an access of one thread that
// conflicts with another thread's between two barriers, which on the GPU would be a shared-
// memory race (as the one racecheck once found), is then reported and fails the run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "base/polar_block.hpp"

namespace dcalign {
namespace {

/// A reusable barrier for `count` threads (C++17 has no std::barrier); the mutex gives
/// ThreadSanitizer the happens-before edges that __syncthreads gives the GPU.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::uint64_t generation = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_;
  int waiting_ = 0;
  std::uint64_t generation_ = 0;
};

/// What the threads of one block share: the barrier and the reductions' partial sums (two
/// rounds, as CudaBlock alternates its buffers, and two sums per round).
struct Shared {
  explicit Shared(int threads) : barrier(threads), partial(static_cast<size_t>(4 * threads), 0.0) {}
  Barrier barrier;
  std::vector<double> partial;
};

/// One thread of the block, as polar_block.hpp's Block: the same contract as CudaBlock.
struct ThreadBlock {
  int tid;
  int threads;
  Shared* shared;
  int round = 0;

  template <typename F>
  void for_each(int n, F f) {
    for (int i = tid; i < n; i += threads) f(i);
  }
  template <typename F>
  void for_each_2d(int rows, int cols, F f) {
    polar::split_2d(tid, threads, rows, cols, f);
  }
  void sync() { shared->barrier.wait(); }
  template <typename F>
  double sum(int n, F f) {
    double a = 0, b = 0;
    sum2(
        n, [&](int i, double& s1, double&) { s1 += f(i); }, a, b);
    return a;
  }
  template <typename F>
  void sum2(int n, F f, double& a, double& b) {
    double s1 = 0, s2 = 0;
    for (int i = tid; i < n; i += threads) f(i, s1, s2);
    double* part = shared->partial.data() + (round & 1) * 2 * threads;
    ++round;
    part[tid] = s1;
    part[threads + tid] = s2;
    sync();
    a = 0;
    b = 0;
    for (int t = 0; t < threads; ++t) {  // every thread, the same order
      a += part[t];
      b += part[threads + t];
    }
  }
  template <typename F>
  int argmax(int n, F f) {
    polar::SerialBlock serial;  // each thread scans all of it, as each CUDA warp does
    return serial.argmax(n, f);
  }
  bool leader() const { return tid == 0; }
};

/// Runs body(block) on `threads` threads as one block.
void run_block(int threads, const std::function<void(ThreadBlock&)>& body) {
  Shared shared(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ThreadBlock b{t, threads, &shared};
      body(b);
    });
  for (auto& th : pool) th.join();
}

/// A Gaussian n x n matrix from `seed` (every draw seeded), plus shift on the diagonal.
template <typename T>
std::vector<T> gaussian(int n, std::uint64_t seed, double shift = 0.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  std::vector<T> A(static_cast<size_t>(n * n));
  for (auto& v : A) v = static_cast<T>(normal(gen));
  for (int i = 0; i < n; ++i) A[static_cast<size_t>(i + i * n)] += static_cast<T>(shift);
  return A;
}

template <typename T>
class PolarBlockThreads : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(PolarBlockThreads, Precisions);

// The inverse on P threads is the serial one bit for bit, for orders below, at and above the
// thread count (both of for_each_2d's mappings), with row swaps in most steps; an exactly
// singular matrix is reported by every thread.
TYPED_TEST(PolarBlockThreads, GaussJordanMatchesSerialBitForBit) {
  using T = TypeParam;
  for (int threads : {3, 8, 64})
    for (int n : {1, 5, 17, 50}) {
      const std::vector<T> A = gaussian<T>(n, 1000 + 7 * n);
      std::vector<T> ref = A, column(static_cast<size_t>(n)), got = A;
      std::vector<int> swaps(static_cast<size_t>(n));
      polar::SerialBlock serial;
      ASSERT_TRUE(polar::gauss_jordan_inverse(serial, ref.data(), n, column.data(), swaps.data()));
      std::vector<int> ok(static_cast<size_t>(threads), 0);
      run_block(threads, [&](ThreadBlock& b) {
        b.sync();
        ok[static_cast<size_t>(b.tid)] =
            polar::gauss_jordan_inverse(b, got.data(), n, column.data(), swaps.data());
      });
      for (int t = 0; t < threads; ++t) ASSERT_TRUE(ok[static_cast<size_t>(t)]) << t;
      for (size_t e = 0; e < got.size(); ++e)
        ASSERT_EQ(got[e], ref[e]) << "threads " << threads << " n " << n << " entry " << e;
    }
  const int n = 12, threads = 8;
  std::vector<T> S = gaussian<T>(n, 5);
  for (int i = 0; i < n; ++i) S[static_cast<size_t>(i + 4 * n)] = T(0);
  std::vector<T> column(static_cast<size_t>(n));
  std::vector<int> swaps(static_cast<size_t>(n)), ok(static_cast<size_t>(threads), 1);
  run_block(threads, [&](ThreadBlock& b) {
    b.sync();
    ok[static_cast<size_t>(b.tid)] =
        polar::gauss_jordan_inverse(b, S.data(), n, column.data(), swaps.data());
  });
  for (int t = 0; t < threads; ++t) EXPECT_FALSE(ok[static_cast<size_t>(t)]) << t;
}

// The Newton phase and the polish on P threads: the decisions of the serial run (flags, the
// number of steps, the polish's count); the iterate to the rounding of the reductions, which
// sum in another order (their relative error is n^2 eps at most, and it enters only through
// the scaling factor zeta, to first order); the polished factor orthogonal to 20 n eps, the
// serial test's bound.
TYPED_TEST(PolarBlockThreads, NewtonPhaseAndPolishMatchSerial) {
  using T = TypeParam;
  const double eps = std::numeric_limits<T>::epsilon();
  const double u = eps / 2;
  for (int threads : {8, 32})
    for (int n : {5, 24}) {
      const double tolerance = std::sqrt(2.0 * std::sqrt(u / 1.5)) / std::sqrt(double(n));
      const std::vector<T> M = gaussian<T>(n, 77 + n + threads);
      double fro2 = 0;
      for (T v : M) fro2 += double(v) * double(v);
      std::vector<T> st0(polar::kStateSize);
      const T scale = polar::start(st0.data(), fro2);
      std::vector<T> X0(M.size());
      for (size_t e = 0; e < M.size(); ++e) X0[e] = M[e] * scale;

      const size_t nn = static_cast<size_t>(n * n);
      std::vector<T> xs = X0, ys(nn), ss = st0, cs(static_cast<size_t>(n)), gs(nn);
      std::vector<int> ws(static_cast<size_t>(n));
      polar::SerialBlock serial;
      polar::newton_phase(serial, xs.data(), ys.data(), ss.data(), n, 100, tolerance, cs.data(),
                          ws.data());
      polar::schulz_phase(serial, xs.data(), ys.data(), gs.data(), n,
                          polar::polish_steps(ss.data()));

      std::vector<T> xt = X0, yt(nn), stt = st0, ct(static_cast<size_t>(n)), gt(nn);
      std::vector<int> wt(static_cast<size_t>(n));
      run_block(threads, [&](ThreadBlock& b) {
        polar::newton_phase(b, xt.data(), yt.data(), stt.data(), n, 100, tolerance, ct.data(),
                            wt.data());
        polar::schulz_phase(b, xt.data(), yt.data(), gt.data(), n, polar::polish_steps(stt.data()));
      });
      const std::string where = "threads " + std::to_string(threads) + " n " + std::to_string(n);
      ASSERT_TRUE(polar::flags(ss.data()) & polar::kConverged) << where;
      EXPECT_EQ(polar::flags(stt.data()), polar::flags(ss.data())) << where;
      EXPECT_EQ(stt[polar::kIterations], ss[polar::kIterations]) << where;
      EXPECT_EQ(stt[polar::kSchulz], ss[polar::kSchulz]) << where;
      double worst = 0, orth = 0;
      for (size_t e = 0; e < nn; ++e)
        worst = std::max(worst, std::abs(double(gt[e]) - double(gs[e])));
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
          double v = i == j ? -1.0 : 0.0;
          for (int r = 0; r < n; ++r) v += double(gt[r + i * n]) * double(gt[r + j * n]);
          orth = std::max(orth, std::abs(v));
        }
      EXPECT_LE(worst, 100 * double(n) * eps) << where;
      EXPECT_LE(orth, 20 * double(n) * eps) << where;
    }
}

// A permutation with an empty diagonal needs a row swap at every step; its inverse is its
// transpose, exactly.
TYPED_TEST(PolarBlockThreads, GaussJordanPivotsAPermutation) {
  using T = TypeParam;
  const int n = 9, threads = 4;
  std::vector<T> P(static_cast<size_t>(n * n), T(0));
  for (int j = 0; j < n; ++j) P[static_cast<size_t>((j + 4) % n + j * n)] = T(1);
  std::vector<T> A = P, column(static_cast<size_t>(n));
  std::vector<int> swaps(static_cast<size_t>(n));
  run_block(threads, [&](ThreadBlock& b) {
    b.sync();
    polar::gauss_jordan_inverse(b, A.data(), n, column.data(), swaps.data());
  });
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(A[static_cast<size_t>(i + j * n)], P[static_cast<size_t>(j + i * n)])
          << i << " " << j;
}

}  // namespace
}  // namespace dcalign
