// Least squares G_k = A_k^+ Z for a batch of users, by the QR route on the primitives: the GPU's
// answer to Primitives::lstsq_batched, whose SVD per user is a host loop of cuSOLVER gesvd calls
// there (an H200 run: 166 ms of Imakura-DC's 609 ms at a = 20000, l = c = 50).
//
//   A_k = Q_k R_k        qr_batched (CUDA: CholeskyQR2, Householder for the matrices it refuses)
//   C = [Q_1 ... Q_c]^T Z  one GEMM; its row blocks are the Q_k^T Z
//   R_k G_k = Q_k^T Z    one batched triangular solve
//
// The rank decision needs sigma_min(A_k) / sigma_max(A_k) = that of R_k. It comes from the
// batched polar iteration on the R_k (core polar_factor, no host loop): for a matrix that clears
// the rank tolerance the iteration's bound 1 / (||R||_F ||R^{-1}||_F), which lies between the
// exact ratio / l and the exact ratio; a matrix at or below the tolerance by that bound gets the
// SVD path's exact singular values, so the decision is the exact one whenever the bound is
// doubtful. The SVD route stays the CPU's (LAPACK's per-user SVD is fast there).
#include <algorithm>

#include "core/common.hpp"

namespace dcalign::core {

template <typename T>
bool qr_least_squares_preferred(const Primitives<T>& p) {
  return p.device() != Device::cpu;
}

template <typename T>
std::vector<T> least_squares_qr(Primitives<T>& p, StackView<const T> A, MatrixView<const T> Z,
                                StackView<T> G, double rank_tolerance) {
  const index_t c = A.count(), a = A.rows(), l = A.cols();
  if (Z.rows() != a || Z.cols() != l || G.count() != c || G.rows() != l || G.cols() != l ||
      !G.contiguous() || !A.contiguous())
    throw InvalidInput("least_squares_qr: shapes do not match (internal error)");
  if (c == 0) return {};
  // Q overwrites a copy of the anchors, so that [Q_1 ... Q_c] is one a x c l matrix.
  Buffer<T> qb = p.allocate(c * a * l), rb = p.allocate(c * l * l), cb = p.allocate(c * l * l);
  const StackView<T> Q(qb.data(), c, a, l), R(rb.data(), c, l, l);
  p.copy(A.data(), qb.data(), c * a * l);
  p.qr_batched(Q, R);
  p.gemm(Op::trans, Op::none, T(1), StackView<const T>(Q).concatenated(), Z, T(0),
         MatrixView<T>(cb.data(), c * l, l));
  p.unvstack(MatrixView<const T>(cb.data(), c * l, l), G);
  // Singular-value bounds of the R_k (cb, no longer needed, takes their polar factors).
  PolarOptions po;
  po.method = PolarMethod::iterative;
  po.fallback_ratio = rank_tolerance;
  po.measure_orthogonality = false;
  po.promote = false;
  const PolarInfo<T> info =
      polar_factor(p, StackView<const T>(R), false, StackView<T>(cb.data(), c, l, l), po);
  std::vector<T> ratio(static_cast<size_t>(c));
  for (index_t k = 0; k < c; ++k)
    ratio[k] = info.sigma_max[k] > 0 ? info.sigma_min[k] / info.sigma_max[k] : T(0);
  // An exactly singular R_k would fill G_k with Inf: the caller refuses that user (its ratio is
  // 0), so the solve runs only when every R_k is nonsingular by its ratio.
  if (std::all_of(ratio.begin(), ratio.end(), [](T r) { return r > T(0); }))
    p.trsm_upper_batched(StackView<const T>(R), G);
  return ratio;
}

template <typename T>
std::vector<T> least_squares(Primitives<T>& p, StackView<const T> A, MatrixView<const T> Z,
                             StackView<T> G, double rank_tolerance) {
  return qr_least_squares_preferred(p) ? least_squares_qr(p, A, Z, G, rank_tolerance)
                                       : p.lstsq_batched(A, Z, G);
}

#define DCALIGN_INSTANTIATE_LEAST_SQUARES(T)                                              \
  template bool qr_least_squares_preferred<T>(const Primitives<T>&);                      \
  template std::vector<T> least_squares_qr<T>(Primitives<T>&, StackView<const T>,         \
                                              MatrixView<const T>, StackView<T>, double); \
  template std::vector<T> least_squares<T>(Primitives<T>&, StackView<const T>,            \
                                           MatrixView<const T>, StackView<T>, double);
DCALIGN_INSTANTIATE_LEAST_SQUARES(float)
DCALIGN_INSTANTIATE_LEAST_SQUARES(double)

}  // namespace dcalign::core
