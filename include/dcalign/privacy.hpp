#pragma once
// Differential privacy for released data: the Analytic Gaussian Mechanism (AGM) of Balle and
// Wang, ICML 2018, Algorithm 1 (paper 000, Algorithm 3), which gives the smallest sigma for which
// f(x) + sigma N(0, I) is (epsilon, delta)-DP when f has global L2 sensitivity Delta; the classical
// Gaussian-mechanism sigma for comparison; and the noise itself, drawn from an explicit seed.
//
// Paper 000 (eq. 3) releases X~_i = X_i F_i + sigma W_i with W_i entrywise N(0, 1) and the anchor
// representation A F_i without noise. Its sensitivity bound (eq. 4) is Delta <= r ||F_i||_2 for
// rows pre-normalised "within the range r", which the paper does not define further: the
// experiment layer takes r as the L2 distance two rows of a user's data can be apart (see
// include/dcalign/experiment.hpp, key dp_row_range).
//
// Every function checks its inputs and throws InvalidInput naming the parameter and its range.
#include <cstdint>

#include "dcalign/matrix.hpp"

namespace dcalign {

/// The AGM calibration and how it was reached, for reports and tests.
struct AnalyticGaussian {
  double sigma = 0;  ///< the noise scale alpha Delta / sqrt(2 epsilon)
  /// delta0 = Phi(0) - e^epsilon Phi(-sqrt(2 epsilon)): the delta that sigma = Delta /
  /// sqrt(2 epsilon) (alpha = 1) achieves; it decides the branch.
  double delta0 = 0;
  /// delta >= delta0: alpha = sqrt(1 + v*/2) - sqrt(v*/2) with v* = sup{v >= 0 : B+(v) <= delta}
  /// (alpha <= 1). Otherwise alpha = sqrt(1 + u*/2) + sqrt(u*/2) with u* = inf{u >= 0 :
  /// B-(u) <= delta} (alpha > 1).
  bool upper_branch = false;
  double boundary = 0;  ///< v* or u*
  double alpha = 0;
};

/// Balle and Wang's Algorithm 1 for epsilon > 0 (finite), 0 < delta < 1 and sensitivity Delta > 0
/// (finite). v* or u* is found by bisection to adjacent doubles, on the side that satisfies the
/// privacy condition, so the returned sigma never falls below the exact one by more than the
/// rounding of the CDF evaluations. Throws NumericalError if sigma overflows a double.
AnalyticGaussian analytic_gaussian(double epsilon, double delta, double sensitivity);
/// analytic_gaussian(...).sigma.
double analytic_gaussian_sigma(double epsilon, double delta, double sensitivity);

/// The classical calibration Delta sqrt(2 ln(1.25 / delta)) / epsilon (Dwork and Roth, Theorem
/// A.1), for comparison only: it is a valid (epsilon, delta)-DP calibration for epsilon < 1 and
/// no guarantee above; the AGM's sigma is never larger where both are valid.
double classical_gaussian_sigma(double epsilon, double delta, double sensitivity);

/// X += sigma W with W entrywise standard normal, drawn from Rng(seed) in storage (column-major)
/// order, so the same seed gives the same noise. sigma must be finite and >= 0.
template <typename T>
void add_gaussian_noise(Matrix<T>& X, double sigma, std::uint64_t seed);

}  // namespace dcalign
