#pragma once
// Per-matrix scalar logic of the batched polar iteration (src/core/polar.cpp): the scaling, the
// condition estimate, the convergence test and the status flags. Every backend calls exactly
// these functions (the CPU backend in its loops, the CUDA kernels on the device), so the CPU
// tests exercise the decisions the GPU makes. Plain C++ on plain arrays: no std:: calls that
// are unavailable in device code.
//
// State of one matrix: kStateSize values of T, in backend memory. Flags and counts are small
// integers, exact in float.
#include <cmath>

#if defined(__CUDACC__)
#define DCALIGN_HD __host__ __device__
#else
#define DCALIGN_HD
#endif

namespace dcalign::polar {

enum Field : int {
  kAlpha = 0,       ///< ||M||_F (>= sigma_max(M))
  kInvNorm = 1,     ///< ||M^{-1}||_F (1 / it <= sigma_min(M)), from the first inverse
  kKappa = 2,       ///< ||X_0||_F ||X_0^{-1}||_F, between kappa_2(M) and l kappa_2(M)
  kZeta = 3,        ///< the last scaling factor
  kDelta = 4,       ///< the last relative step ||X_new - X||_F / ||X_new||_F
  kFlags = 5,       ///< Flag bits
  kIterations = 6,  ///< Newton steps taken
  kSchulz = 7,      ///< Newton-Schulz steps the polish needs, set when the Newton phase stops
  kStopBelow = 8,   ///< stop as kDoubtful when 1 / kKappa <= this (0: never); set by start
  kStateSize = 9
};

enum Flag : unsigned {
  kConverged = 1u,  ///< the relative step fell to the tolerance: X is the polar factor
  kNoScaling = 2u,  ///< close enough that scaling would only slow quadratic convergence
  kSingular = 4u,   ///< LU met an exactly zero pivot
  kNonFinite = 8u,  ///< NaN or Inf in M, its inverse, an iterate or the scaling factor
  kZero = 16u,      ///< M = 0: no polar factor is defined
  kDoubtful = 32u   ///< the first step's condition estimate met kStopBelow: the caller
                    ///< recomputes this matrix (in float64), so its iteration stops there
};

template <typename T>
DCALIGN_HD inline unsigned flags(const T* st) {
  return static_cast<unsigned>(st[kFlags]);
}
template <typename T>
DCALIGN_HD inline void set_flag(T* st, unsigned f) {
  st[kFlags] = static_cast<T>(flags(st) | f);
}
/// Still iterating: neither converged nor stopped by a failure or as doubtful.
template <typename T>
DCALIGN_HD inline bool active(const T* st) {
  return (flags(st) & (kConverged | kSingular | kNonFinite | kZero | kDoubtful)) == 0u;
}
/// Stopped by a failure; the caller routes such matrices to the SVD path.
template <typename T>
DCALIGN_HD inline bool failed(const T* st) {
  return (flags(st) & (kSingular | kNonFinite | kZero)) != 0u;
}

/// Resets the state of a matrix with ||M||_F^2 = fro2; returns the factor 1/||M||_F by which
/// the backend scales M into X_0 (0 when M is zero or not finite, which also stops it).
/// stop_below > 0 stops the matrix after its first inverse as kDoubtful when the condition
/// estimate there gives 1 / kKappa <= stop_below (newton_zeta): for a caller that recomputes
/// every such matrix anyway (float32 with float64 beside it, src/core/polar.cpp), the later
/// steps would be wasted.
template <typename T>
DCALIGN_HD inline T start(T* st, double fro2, double stop_below = 0.0) {
  for (int i = 0; i < kStateSize; ++i) st[i] = T(0);
  st[kStopBelow] = static_cast<T>(stop_below > 0.0 ? stop_below : 0.0);
  const double a = sqrt(fro2);
  st[kAlpha] = static_cast<T>(a);
  if (!(a < HUGE_VAL)) {  // NaN or Inf
    st[kFlags] = static_cast<T>(kNonFinite);
    return T(0);
  }
  if (!(a > 0.0)) {
    st[kFlags] = static_cast<T>(kZero);
    return T(0);
  }
  return static_cast<T>(1.0 / a);
}

template <typename T>
DCALIGN_HD inline void mark_singular(T* st) {
  set_flag(st, kSingular);
}

/// The scaling factor of a Newton step from fx2 = ||X||_F^2 and fy2 = ||X^{-1}||_F^2, by Byers
/// and Xu's recurrence ("A new scaling for Newton's iteration for the polar decomposition and
/// its backward stability", SIAM J. Matrix Anal. Appl. 30, 2008): with alpha >= sigma_max(X_0)
/// and beta <= sigma_min(X_0), zeta_0 = 1 / sqrt(alpha beta), zeta_1 = sqrt(2 sqrt(alpha beta) /
/// (alpha + beta)) and zeta_k = 1 / sqrt((zeta_{k-1} + 1 / zeta_{k-1}) / 2). Here alpha =
/// ||X_0||_F and beta = 1 / ||X_0^{-1}||_F, so zeta_0 is Higham's Frobenius scaling
/// sqrt(||X_0^{-1}||_F / ||X_0||_F) and zeta_1 depends on the condition estimate alone. Against
/// Frobenius scaling at every step it saves one or two steps on M_i dominated by one singular value
/// (uniform anchors, kappa about 4e4: 6-7 steps instead of 8). 1 once scaling is off. On the first
/// step it also records the condition estimate, and stops the matrix as kDoubtful (returning 0)
/// when that estimate meets kStopBelow. Returns 0, and then always stops the matrix
/// (kNonFinite), when either norm is not finite (the inverse overflowed) or zeta itself is not a
/// positive finite T.
template <typename T>
DCALIGN_HD inline T newton_zeta(T* st, double fx2, double fy2, int iteration) {
  if (!(fx2 < HUGE_VAL) || !(fy2 < HUGE_VAL) || !(fx2 > 0.0) || !(fy2 > 0.0)) {
    set_flag(st, kNonFinite);
    return T(0);
  }
  const double fx = sqrt(fx2), fy = sqrt(fy2);
  double zeta = 1.0;
  if (iteration == 0) {
    // X_0 = M / alpha, so X_0^{-1} = alpha M^{-1}.
    st[kInvNorm] = static_cast<T>(fy / static_cast<double>(st[kAlpha]));
    st[kKappa] = static_cast<T>(fx * fy);
    // The caller's own test, on the stored estimate (src/core/polar.cpp: 1 / kappa > limit).
    const double stop = static_cast<double>(st[kStopBelow]);
    if (stop > 0.0 && !(1.0 / static_cast<double>(st[kKappa]) > stop)) {
      set_flag(st, kDoubtful);
      return T(0);
    }
    zeta = sqrt(fy / fx);
  } else if (iteration == 1) {
    const double r = sqrt(static_cast<double>(st[kKappa]));  // sqrt(alpha / beta)
    zeta = sqrt(2.0 / (r + 1.0 / r));
  } else {
    const double z = static_cast<double>(st[kZeta]);
    zeta = 1.0 / sqrt((z + 1.0 / z) / 2.0);
  }
  if (flags(st) & kNoScaling) zeta = 1.0;
  // A zeta that is not a positive finite T (a state whose condition estimate is 0 or beyond T's
  // range, e.g. kappa > 3.4e38 in float) cannot scale a step. The contract: newton_zeta returns
  // 0 only for a matrix it has stopped, so that no backend counts a matrix as active that it
  // did not step (the CUDA kernel returned early for such a matrix and counted it inactive,
  // while the CPU counted it active: a conformance failure on an H200).
  const T z = static_cast<T>(zeta);
  if (!(z > T(0)) || !(static_cast<double>(z) < HUGE_VAL)) {
    set_flag(st, kNonFinite);
    return T(0);
  }
  st[kZeta] = z;
  return z;
}

/// Newton-Schulz X <- X (3I - X^T X) / 2 maps a singular value 1 + e to 1 - 1.5 e^2 - 0.5 e^3, so
/// |e| <= b < sqrt(3) - 1 becomes |e| <= 1.5 b^2 + 0.5 b^3: the steps that bring b to the unit
/// roundoff u of T (at least one: the polish always runs).
template <typename T>
DCALIGN_HD inline int schulz_steps(double b) {
  const double u = sizeof(T) == 4 ? 5.9604644775390625e-08 : 1.1102230246251565e-16;
  int k = 0;
  while (b > u && k < 16) {
    b = (1.5 + 0.5 * b) * b * b;
    ++k;
  }
  return k < 1 ? 1 : k;
}

/// The Newton phase hands over to Newton-Schulz once every singular value is within this of 1:
/// from there a Newton-Schulz step (two l x l products) does what a Newton step (an inverse
/// and more) would. 0.1 measured best at l = 50 (bench/results/polar): 5 Newton steps and a
/// polish of 3 Newton-Schulz steps for most matrices instead of 8 Newton steps and one polish at
/// kappa about 4e4. The batch takes the worst matrix's count: 4 on ODC's 1000 M_i at
/// (1000, 50, 1000) (bm_odc_parts BM_PolarIterative, counter schulz_steps).
constexpr double kSchulzFrom = 0.1;

/// Records a finished step from dx2 = ||X_new - X||_F^2 and xn2 = ||X_new||_F^2 of an l x l X.
/// Scaling is switched off once the step is below 1e-2 (near convergence it only delays the
/// quadratic phase). The Newton phase ends (kConverged) when an unscaled step is at most
/// `tolerance` (in that phase the step measures the error before it, and the error after it is
/// about half its square) or when every singular value is within kSchulzFrom of 1. After any
/// Newton step every singular value is >= 1 (zeta s + 1 / (zeta s) >= 2), so xn2 - l =
/// sum_j (s_j^2 - 1) >= s_max^2 - 1 bounds the largest error by b = sqrt(1 + xn2 - l) - 1; the
/// Newton-Schulz steps the polish needs follow from b (kSchulz).
template <typename T>
DCALIGN_HD inline void newton_after(T* st, double dx2, double xn2, double tolerance, int l) {
  st[kIterations] = st[kIterations] + T(1);
  const double d = sqrt(dx2 / xn2);
  st[kDelta] = static_cast<T>(d);
  if (!(d < HUGE_VAL)) {
    set_flag(st, kNonFinite);
    return;
  }
  const double over = xn2 - static_cast<double>(l);
  const double b = sqrt(1.0 + (over > 0.0 ? over : 0.0)) - 1.0;
  if (((flags(st) & kNoScaling) && d <= tolerance) || b <= kSchulzFrom) {
    set_flag(st, kConverged);
    st[kSchulz] = static_cast<T>(schulz_steps<T>(b));
  }
  if (d < 1e-2) set_flag(st, kNoScaling);
}

}  // namespace dcalign::polar
