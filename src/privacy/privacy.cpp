// The Analytic Gaussian Mechanism (Balle and Wang 2018, Algorithm 1; paper 000, Algorithm 3).
// The standard normal CDF comes from std::erfc (Boost.Math is not installed here; std::erfc is
// accurate to a few ulps over the range used).
#include "dcalign/privacy.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "dcalign/random.hpp"

namespace dcalign {
namespace {

constexpr double kSqrt2 = 1.4142135623730950488;
constexpr double kSqrt2Pi = 2.5066282746310005024;

std::string show(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

void check(bool ok, const char* name, double v, const char* expected) {
  if (!ok)
    throw InvalidInput(std::string("privacy: ") + name + " = " + show(v) +
                       " is out of range: expected " + expected);
}

void check_parameters(double epsilon, double delta, double sensitivity) {
  check(std::isfinite(epsilon) && epsilon > 0, "epsilon", epsilon, "a finite number > 0");
  check(delta > 0 && delta < 1, "delta", delta, "a number in (0, 1)");
  check(std::isfinite(sensitivity) && sensitivity > 0, "sensitivity", sensitivity,
        "a finite number > 0");
}

// Phi(x), the standard normal CDF.
double Phi(double x) { return 0.5 * std::erfc(-x / kSqrt2); }

// M(x) = e^(x^2 / 2) Phi(-x) for x >= 0 (the Mills ratio over sqrt(2 pi)), so that
// e^epsilon Phi(-sqrt(epsilon (v + 2))) = e^(-epsilon v / 2) M(sqrt(epsilon (v + 2))) never
// overflows, however large epsilon is. Below 3 the product form loses at most a few ulps; from 3
// on, 100 terms of the continued fraction 1 / (x + 1 / (x + 2 / (x + 3 / ...))) are exact to
// rounding (checked against 40-digit arithmetic: relative error <= 4e-16).
double M(double x) {
  if (x < 3) return std::exp(0.5 * x * x) * Phi(-x);
  double t = x;
  for (int k = 100; k >= 1; --k) t = x + k / t;
  return 1 / (t * kSqrt2Pi);
}

// Ordered bit patterns of non-negative doubles: a <= b iff bits(a) <= bits(b), and adjacent
// doubles differ by 1, so bisection on them ends at adjacent doubles in at most 64 steps.
std::uint64_t bits(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
double from_bits(std::uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// For a predicate that is false at lo and true at hi (lo < hi, both >= 0), two adjacent doubles
// lo < hi with the same property. The tolerance is thus one ulp of the boundary: nothing is lost
// in the search itself; what remains is the rounding of the CDF terms inside the predicate.
template <typename Pred>
void bisect(double& lo, double& hi, Pred pred) {
  std::uint64_t a = bits(lo), b = bits(hi);
  while (b - a > 1) {
    const std::uint64_t mid = a + (b - a) / 2;
    if (pred(from_bits(mid)))
      b = mid;
    else
      a = mid;
  }
  lo = from_bits(a);
  hi = from_bits(b);
}

// The smallest power of two from 1 at which pred holds (pred(0) is known to be false). pred holds
// for every large enough finite argument (B+ tends to 1 > delta, B- to 0 < delta).
template <typename Pred>
double upper_bracket(Pred pred) {
  double hi = 1;
  while (!pred(hi)) {
    hi *= 2;
    if (!std::isfinite(hi)) throw NumericalError("privacy: no bracket for the AGM boundary found");
  }
  return hi;
}

}  // namespace

AnalyticGaussian analytic_gaussian(double epsilon, double delta, double sensitivity) {
  check_parameters(epsilon, delta, sensitivity);
  AnalyticGaussian g;
  // Phi(0) - e^eps Phi(-sqrt(2 eps)) = 1/2 - M(sqrt(2 eps)).
  g.delta0 = 0.5 - M(std::sqrt(2 * epsilon));
  g.upper_branch = delta >= g.delta0;
  if (g.upper_branch) {
    // B+(v) = Phi(sqrt(eps v)) - e^eps Phi(-sqrt(eps (v + 2))), increasing from delta0 at v = 0.
    const auto above = [&](double v) {
      const double b = Phi(std::sqrt(epsilon * v)) -
                       std::exp(-0.5 * epsilon * v) * M(std::sqrt(epsilon * (v + 2)));
      return b > delta;
    };
    double hi = upper_bracket(above), lo = hi > 1 ? hi / 2 : 0;
    bisect(lo, hi, above);
    g.boundary = lo;  // the largest v with B+(v) <= delta: alpha, hence sigma, on the safe side
    // sqrt(1 + v/2) - sqrt(v/2) without cancellation.
    g.alpha = 1 / (std::sqrt(1 + g.boundary / 2) + std::sqrt(g.boundary / 2));
  } else {
    // B-(u) = Phi(-sqrt(eps u)) - e^eps Phi(-sqrt(eps (u + 2)))
    //       = e^(-eps u / 2) (M(sqrt(eps u)) - M(sqrt(eps (u + 2)))), decreasing from delta0.
    const auto within = [&](double u) {
      const double b = std::exp(-0.5 * epsilon * u) *
                       (M(std::sqrt(epsilon * u)) - M(std::sqrt(epsilon * (u + 2))));
      return b <= delta;
    };
    double hi = upper_bracket(within), lo = hi > 1 ? hi / 2 : 0;
    bisect(lo, hi, within);
    g.boundary = hi;  // the smallest u with B-(u) <= delta
    g.alpha = std::sqrt(1 + g.boundary / 2) + std::sqrt(g.boundary / 2);
  }
  g.sigma = g.alpha * sensitivity / std::sqrt(2 * epsilon);
  if (!std::isfinite(g.sigma))
    throw NumericalError("privacy: the AGM sigma for epsilon = " + show(epsilon) +
                         ", sensitivity = " + show(sensitivity) + " overflows a double");
  return g;
}

double analytic_gaussian_sigma(double epsilon, double delta, double sensitivity) {
  return analytic_gaussian(epsilon, delta, sensitivity).sigma;
}

double classical_gaussian_sigma(double epsilon, double delta, double sensitivity) {
  check_parameters(epsilon, delta, sensitivity);
  const double sigma = sensitivity * std::sqrt(2 * std::log(1.25 / delta)) / epsilon;
  if (!std::isfinite(sigma))
    throw NumericalError("privacy: the classical sigma for epsilon = " + show(epsilon) +
                         ", sensitivity = " + show(sensitivity) + " overflows a double");
  return sigma;
}

template <typename T>
void add_gaussian_noise(Matrix<T>& X, double sigma, std::uint64_t seed) {
  check(std::isfinite(sigma) && sigma >= 0, "sigma", sigma, "a finite number >= 0");
  Rng rng(seed);
  T* x = X.data();
  // The draws in chunks (Rng::fill_normal: the same values as one normal() per entry).
  const auto total = static_cast<std::size_t>(X.size());
  std::vector<double> noise(std::min<std::size_t>(total, std::size_t(1) << 16));
  for (std::size_t start = 0; start < total; start += noise.size()) {
    const std::size_t n = std::min(noise.size(), total - start);
    rng.fill_normal(noise.data(), n);
    for (std::size_t k = 0; k < n; ++k)
      x[start + k] = static_cast<T>(x[start + k] + sigma * noise[k]);
  }
}

template void add_gaussian_noise<float>(Matrix<float>&, double, std::uint64_t);
template void add_gaussian_noise<double>(Matrix<double>&, double, std::uint64_t);

}  // namespace dcalign
