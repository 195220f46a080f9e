#pragma once
// Deterministic random numbers. Every draw in dcalign comes from an Rng built from an explicit
// seed. The generator (xoshiro256**, seeded through splitmix64) and the transforms to uniform
// and normal variates are written out here, so the same seed gives the same numbers with any
// compiler and standard library (std:: distributions are implementation-defined).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "dcalign/matrix.hpp"

namespace dcalign {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    std::uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);
  }
  /// Independent stream derived from this seed and a stream id (e.g. a user index).
  static Rng stream(std::uint64_t seed, std::uint64_t id) {
    std::uint64_t x = seed ^ (0x9E3779B97F4A7C15ULL * (id + 1));
    return Rng(splitmix64(x));
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform on [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller; the second variate is kept for the next call).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = positive_uniform();
    double first = 0.0;
    box_muller(u1, uniform(), first, spare_);
    has_spare_ = true;
    return first;
  }
  /// `count` standard normal variates into out: the values, and the generator's state after
  /// them, that `count` calls of normal() give, bit for bit. The uniforms are drawn in order;
  /// the Box-Muller transforms of a long run (from 2^15 values) are shared among the OpenMP
  /// threads, each computed by the same expression as in normal(). The Haar draw of ODC's O at
  /// l = 950 spends a fifth of its time here.
  void fill_normal(double* out, std::size_t count);

  /// Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) {
    // Lemire's nearly divisionless method would do; rejection keeps it exact and simple.
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    std::uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }

  /// splitmix64: advances the state x and returns the next output (the seeding of the
  /// generator; also a fixed hash of an index, x = i giving the same value on every machine).
  static std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  /// Uniform on (0, 1): uniform() redrawn while 0 (Box-Muller takes its logarithm).
  double positive_uniform() {
    double u = 0.0;
    do u = uniform();
    while (u <= 0.0);
    return u;
  }
  /// The two normal variates r cos t and r sin t of one Box-Muller pair: normal() and
  /// fill_normal() both form them here, which keeps their values bit for bit the same.
  static void box_muller(double u1, double u2, double& first, double& second) {
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double t = 6.283185307179586476925286766559 * u2;
    first = r * std::cos(t);
    second = r * std::sin(t);
  }
  std::uint64_t s_[4];
  double spare_ = 0.0;
  bool has_spare_ = false;
};

/// rows x cols matrix with i.i.d. Unif[0, 1) entries (filled column by column).
template <typename T>
Matrix<T> random_uniform(index_t rows, index_t cols, Rng& rng);
/// rows x cols matrix with i.i.d. N(0, 1) entries.
template <typename T>
Matrix<T> random_normal(index_t rows, index_t cols, Rng& rng);
/// Haar-distributed orthogonal n x n matrix: QR of a Gaussian matrix with the signs of R's
/// diagonal moved into Q (Mezzadri 2007), so the distribution is exactly Haar.
template <typename T>
Matrix<T> random_orthogonal(index_t n, Rng& rng);

}  // namespace dcalign
