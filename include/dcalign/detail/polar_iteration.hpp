#pragma once
// Internal: the kernel contract of the batched polar iteration (src/core/polar.cpp), part of
// every backend's Primitives<T> (dcalign/backend.hpp) but not of dcalign's API. Per matrix,
// `state` holds polar::kStateSize values in backend memory, read and written only through the
// __host__ __device__ functions of src/base/polar_scalar.hpp (the layout is theirs), so every
// backend runs the same decisions. X, Y are contiguous stacks of square matrices. Headers under
// dcalign/detail/ may change in any release; scripts/check-includes.sh keeps examples,
// benchmarks and the Python module from including them.
#include "dcalign/matrix.hpp"

namespace dcalign::detail {

template <typename T>
class PolarIterationPrimitives {
 public:
  virtual ~PolarIterationPrimitives() = default;

  /// X_k = M_k / ||M_k||_F (M_k^T / ||M_k||_F when `transposed`), state_k =
  /// polar::start(||M_k||_F^2, stop_below): with stop_below > 0 the first Newton step stops
  /// every matrix whose condition estimate gives 1 / kappa <= stop_below (polar::kDoubtful).
  /// M may be strided (e.g. the row blocks of W^T Z).
  virtual void polar_start(StackView<const T> M, bool transposed, StackView<T> X, T* state,
                           double stop_below) = 0;
  /// Y_k = X_k^{-1} (LU with partial pivoting) for every k that polar::active(state_k) calls
  /// active (a backend may also invert the others; their Y_k is ignored). An exactly singular
  /// X_k (zero pivot) gets polar::mark_singular.
  virtual void inverse_batched(StackView<const T> X, StackView<T> Y, T* state) = 0;
  /// One scaled Newton step on every active k: zeta = polar::newton_zeta(state_k,
  /// ||X_k||_F^2, ||Y_k||_F^2, iteration); if zeta > 0, X_k <- (zeta X_k + Y_k^T / zeta) / 2 and
  /// polar::newton_after(state_k, ||X_new - X_k||_F^2, ||X_new||_F^2, tolerance). Sums of
  /// squares accumulate in double. Returns the number of matrices still active afterwards
  /// (the iteration's only read back to the host).
  virtual index_t polar_newton_step(StackView<T> X, StackView<const T> Y, T* state, int iteration,
                                    double tolerance) = 0;
  /// The whole iteration after polar_start: up to max_steps times, Y = inverse_batched(X) and
  /// polar_newton_step with iterations 0, 1, ...; stops early when no matrix is active and
  /// returns how many still are. The default composes the two primitives (one host read per
  /// step); a backend may fuse them, e.g. the CPU runs every matrix's steps while it is in
  /// cache. Y is workspace.
  virtual index_t polar_newton_steps(StackView<T> X, StackView<T> Y, T* state, int max_steps,
                                     double tolerance) {
    index_t active = X.count();
    for (int it = 0; it < max_steps && active > 0; ++it) {
      inverse_batched(StackView<const T>(X), Y, state);
      active = polar_newton_step(X, StackView<const T>(Y), state, it, tolerance);
    }
    return active;
  }
  /// Optional: the Newton phase of polar_newton_steps and then, on every matrix, the
  /// Newton-Schulz polish X <- X + X (I - X^T X) / 2 for polar::polish_steps(state_k) steps
  /// (src/base/polar_block.hpp), the result in G (contiguous, the shape of X); X is left
  /// undefined. No read back to the host: the caller reads the states once afterwards. Returns
  /// false, having done nothing, where the backend has no such fused form (the default); the
  /// caller then runs polar_newton_steps and its own batched polish, which takes the batch's
  /// largest count of steps for every matrix (an extra step on a converged matrix moves it by
  /// rounding only).
  virtual bool polar_newton_polish(StackView<T> X, StackView<T> G, T* state, int max_steps,
                                   double tolerance) {
    (void)X, (void)G, (void)state, (void)max_steps, (void)tolerance;
    return false;
  }
};

}  // namespace dcalign::detail
