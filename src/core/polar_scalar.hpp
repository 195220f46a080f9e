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
  kStateSize = 8
};

enum Flag : unsigned {
  kConverged = 1u,  ///< the relative step fell to the tolerance: X is the polar factor
  kNoScaling = 2u,  ///< close enough that scaling would only slow quadratic convergence
  kSingular = 4u,   ///< LU met an exactly zero pivot
  kNonFinite = 8u,  ///< NaN or Inf in M, its inverse or an iterate
  kZero = 16u       ///< M = 0: no polar factor is defined
};

template <typename T>
DCALIGN_HD inline unsigned flags(const T* st) {
  return static_cast<unsigned>(st[kFlags]);
}
template <typename T>
DCALIGN_HD inline void set_flag(T* st, unsigned f) {
  st[kFlags] = static_cast<T>(flags(st) | f);
}
/// Still iterating: neither converged nor stopped by a failure.
template <typename T>
DCALIGN_HD inline bool active(const T* st) {
  return (flags(st) & (kConverged | kSingular | kNonFinite | kZero)) == 0u;
}
/// Stopped by a failure; the caller routes such matrices to the SVD path.
template <typename T>
DCALIGN_HD inline bool failed(const T* st) {
  return (flags(st) & (kSingular | kNonFinite | kZero)) != 0u;
}

/// Resets the state of a matrix with ||M||_F^2 = fro2; returns the factor 1/||M||_F by which
/// the backend scales M into X_0 (0 when M is zero or not finite, which also stops it).
template <typename T>
DCALIGN_HD inline T start(T* st, double fro2) {
  for (int i = 0; i < kStateSize; ++i) st[i] = T(0);
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

/// The scaling factor of a Newton step from fx2 = ||X||_F^2 and fy2 = ||X^{-1}||_F^2: Higham's
/// Frobenius scaling zeta = sqrt(||X^{-1}||_F / ||X||_F), 1 once scaling is off. On the first
/// step it also records the condition estimate. Returns 0 (and stops the matrix) when either
/// norm is not finite, i.e. the inverse overflowed.
template <typename T>
DCALIGN_HD inline T newton_zeta(T* st, double fx2, double fy2, int iteration) {
  if (!(fx2 < HUGE_VAL) || !(fy2 < HUGE_VAL) || !(fx2 > 0.0) || !(fy2 > 0.0)) {
    set_flag(st, kNonFinite);
    return T(0);
  }
  const double fx = sqrt(fx2), fy = sqrt(fy2);
  if (iteration == 0) {
    // X_0 = M / alpha, so X_0^{-1} = alpha M^{-1}.
    st[kInvNorm] = static_cast<T>(fy / static_cast<double>(st[kAlpha]));
    st[kKappa] = static_cast<T>(fx * fy);
  }
  const double zeta = (flags(st) & kNoScaling) ? 1.0 : sqrt(fy / fx);
  st[kZeta] = static_cast<T>(zeta);
  return static_cast<T>(zeta);
}

/// Records a finished step from dx2 = ||X_new - X||_F^2 and xn2 = ||X_new||_F^2. Scaling is
/// switched off once the step is below 1e-2 (near convergence it only delays the quadratic
/// phase). The matrix is converged when an unscaled step is at most `tolerance`: in that phase
/// the step measures the error before it, and the error after it is about half its square.
template <typename T>
DCALIGN_HD inline void newton_after(T* st, double dx2, double xn2, double tolerance) {
  st[kIterations] = st[kIterations] + T(1);
  const double d = sqrt(dx2 / xn2);
  st[kDelta] = static_cast<T>(d);
  if (!(d < HUGE_VAL)) {
    set_flag(st, kNonFinite);
    return;
  }
  if ((flags(st) & kNoScaling) && d <= tolerance) set_flag(st, kConverged);
  if (d < 1e-2) set_flag(st, kNoScaling);
}

}  // namespace dcalign::polar
