#pragma once
// The orthogonal polar factor of a batch of square matrices, written once on the backend
// primitives (src/core/polar.cpp). Two paths:
//   svd        G = U V^T from one SVD per matrix (Primitives::polar_batched);
//   iterative  scaled Newton iteration X <- (zeta X + X^{-T} / zeta) / 2 with Higham's
//              Frobenius scaling, X_0 = M / ||M||_F, stopped once an unscaled step is small
//              enough for one Newton-Schulz step X (3I - X^T X) / 2 to reach the unit
//              roundoff (src/core/polar.cpp), then finished by that step. It needs only
//              batched LU inverses, batched GEMM and per-matrix norms, so it stays batched on a
//              GPU, where no library offers a batched SVD above 32 x 32.
// A matrix whose condition estimate ||X_0||_F ||X_0^{-1}||_F makes its rank doubtful, that
// fails (zero pivot, overflow) or does not converge is routed to the SVD path, so rank
// decisions are made on exact singular values, exactly as on the SVD path.
#include <string>

#include "dcalign/backend.hpp"

namespace dcalign {

enum class PolarMethod { automatic, svd, iterative };
PolarMethod parse_polar_method(const std::string& name);  ///< "auto", "svd", "iterative"
std::string to_string(PolarMethod m);

struct PolarOptions {
  PolarMethod method = PolarMethod::automatic;
  /// The iterative path hands the batch to the SVD path when some matrix has
  /// 1 / (||X_0||_F ||X_0^{-1}||_F) at or below this (that bound is at most sigma_min/sigma_max,
  /// and at least 1/l of it). Negative: l * eps(T), the default rank tolerance.
  double fallback_ratio = -1.0;
  int max_iterations = 30;            ///< Newton steps at most (Byers-Xu: <= 9 up to kappa = 1e16)
  bool measure_orthogonality = true;  ///< fill PolarInfo::orthogonality_error
  /// float32 only: a matrix whose sigma_min / sigma_max is at or below the fallback ratio is
  /// recomputed in float64 from its float32 entries (which determine its singular values to
  /// far more than float32 arithmetic resolves) and its factor rounded back to float32.
  /// Callers that can recompute the matrix itself more accurately turn this off (ODC recomputes
  /// M_i = A_i^T Z from A_i and Z: src/core/promote.cpp).
  bool promote = true;
  /// float32 with a float64 backend only: a doubtful matrix (see fallback_ratio) gets neither
  /// an SVD nor a promotion here. Its G_k is the iteration's and its sigma_min is reported as 0,
  /// so that a caller that recomputes such matrices in float64 itself (ODC, OPP and GOPP form
  /// M_i = A_i^T Z again from A_i and Z: src/core/promote.cpp) does so for every one of them
  /// without paying a float32 SVD first.
  bool defer_doubtful = false;
};

/// G_k = polar factor of M_k (of M_k^T when `transposed`), k = 1..count; M may be strided, G is
/// contiguous. Throws NumericalError when some M_k has a NaN or Inf entry.
template <typename T>
PolarInfo<T> polar_factor(Primitives<T>& p, StackView<const T> M, bool transposed, StackView<T> G,
                          const PolarOptions& opts = {});

/// The path PolarMethod::automatic takes on this device for count matrices of order l in float
/// (single_precision) or double (measured crossovers, docs/explanation/numerics.md).
PolarMethod choose_polar_method(Device device, index_t l, index_t count, bool single_precision);

}  // namespace dcalign
