#pragma once
// GOPP's stopping rule, used by its loop (src/core/gopp.cpp); the distributed GOPP runs that same
// loop over its sharded primitives, so it stops after the same iteration.
//
// After iteration k (objective f_k = sum_i ||A_i||^2 - c ||Z_k||^2, tracked with the rounding
// described below), the first of these that holds stops the iteration with converged = true:
//
//   "objective at rounding level"  f_k <= nu: nothing is left to minimise (e.g. a common span
//                                  with orthonormal mixing, aligned exactly by the first step).
//   "tolerance"                    f_{k-1} - f_k <= tol f_{k-1} (AlignOptions::gopp.tolerance),
//                                  where tol f_{k-1} > nu. Below nu the test would read rounding
//                                  noise, which can even be negative: that stopped float32 runs
//                                  on uniform anchors at (a, l, c) = (300, 10, 13) after 175
//                                  iterations while G was still 0.19 from its limit, or never.
//   "iterates stationary"          max_i ||G_i^(k) - G_i^(k-1)||_F <= 100 l eps(T).
//   "decrease at rounding level"   f_{floor(k/2)} - f_k <= nu.
//
// and "iteration cap" (converged = false) when none did within gopp.max_iterations.
//
// nu, the rounding level of the tracked objective: S = sum_i ||A_i||_F^2 is summed once (in
// double) and cancels from every difference, but c ||Z||^2 comes from products formed in T and
// the G_i are orthogonal only to about eps(T), which moves ||A_i G_i||^2 away from ||A_i||^2 by
// that fraction: f carries an absolute error of a few eps(T) S whatever its own size. Measured
// over 300 iterations at the fixed point on its tuning data (uniform anchors at (300, 10, 13),
// paper 004's Pima and Heart disease layouts, projected synthetic anchors): |f_k - median| <=
// 0.44 eps S in float32 and <= 1.65 eps S in float64 (there the subtraction of two doubles of
// size S rounds at eps S itself). nu = 8 eps(T) S.
//
// The step threshold: at a fixed point the change of G_i between iterations is the rounding of
// one step (the products in T, then the polar factor). Measured over 300 iterations at the fixed
// point for l = 6 ... 50, on both polar paths and in both precisions: medians 0.4-3 l eps(T),
// maxima 0.6-6.4 l eps but for isolated spikes (40 l eps at l = 50), and a median of 50 l eps
// where cond(A_i^T Z) reaches 4e6. A step below 100 l eps is rounding; the test needs to hold
// once. The iterate converges at the rate rho per iteration of the alternation, so its distance
// to the limit is then about step * rho / (1 - rho).
//
// The last test covers slow linear convergence, where the objective stops being resolvable long
// before the iterate stops moving. With rate r per iteration (r = rho^2, since f is quadratic in
// the iterate's error), the last decrease is (1 - r) / r of the decrease still to come (r = 0.973
// at (300, 10, 13): 1/36), so a single decrease below nu does not mean convergence. Over the last
// half of the run f_{k/2} - f_k = (r^{-k/2} - 1) (f_k - f*): once k >= 1.4 / (1 - r)
// (r^{k/2} <= 1/2) the test bounds the decrease still to come by nu, and a plateau (rate near 1)
// keeps the objective moving by more than nu over half the run.
#include <cmath>
#include <limits>
#include <vector>

#include "dcalign/align.hpp"

namespace dcalign::core {

inline constexpr const char* kStopObjectiveRounding = "objective at rounding level";
inline constexpr const char* kStopTolerance = "tolerance";
inline constexpr const char* kStopStationary = "iterates stationary";
inline constexpr const char* kStopDecreaseRounding = "decrease at rounding level";
inline constexpr const char* kStopCap = "iteration cap";

class GoppStop {
 public:
  /// `total` = sum_i ||A_i||_F^2 over all users, l the dimension.
  template <typename T>
  static GoppStop make(const AlignOptions& opts, double total, index_t l) {
    const double eps = std::numeric_limits<T>::epsilon();
    return GoppStop(8.0 * eps * total, opts.gopp.tolerance, 100.0 * static_cast<double>(l) * eps);
  }

  /// The objective's rounding level nu.
  double noise() const { return noise_; }
  /// Whether a user's step ||G_i^(k) - G_i^(k-1)||_F, given as its square, is rounding.
  bool step_is_rounding(double step_squared) const { return step_squared <= step_ * step_; }

  /// Why to stop after the iteration whose objective is history.back() (history holds f_0 ...
  /// f_k), given whether every user's step was rounding (false after the first iteration); null
  /// to go on.
  const char* reason(const std::vector<double>& history, bool stationary) const {
    const size_t k = history.size() - 1;
    const double f = history[k];
    if (f <= noise_) return kStopObjectiveRounding;
    if (k == 0) return nullptr;
    const double previous = history[k - 1];
    if (tolerance_ * previous > noise_ && previous - f <= tolerance_ * previous)
      return kStopTolerance;
    if (stationary) return kStopStationary;
    if (history[k / 2] - f <= noise_) return kStopDecreaseRounding;
    return nullptr;
  }

 private:
  GoppStop(double noise, double tolerance, double step)
      : noise_(noise), tolerance_(tolerance), step_(step) {}
  double noise_, tolerance_, step_;
};

}  // namespace dcalign::core
