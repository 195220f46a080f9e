#pragma once
// When a CholeskyQR2 factorisation of one matrix can be trusted. The CUDA backend's batched thin
// QR (src/cuda/solver_ops.cu) is CholeskyQR2 (Yamamoto, Nakatsukasa, Yanagisawa and Fukaya,
// "Roundoff error analysis of the CholeskyQR2 algorithm", ETNA 44, 2015): R_1 = chol(A^T A),
// Q_1 = A R_1^{-1}, then the same on Q_1, all of it batched GEMM, batched Cholesky and batched
// triangular solves, where Householder QR takes one cuSOLVER call per matrix. Its Q is
// orthogonal to O(u) when the first pass leaves Q_1 with ||Q_1^T Q_1 - I|| < 1, which holds while
// kappa(A) stays below about u^{-1/2}; beyond, the Cholesky factorisation fails or Q_1 is far
// from orthogonal, and that matrix is factorised again by Householder QR. These are the
// per-matrix decisions, on the host and in the CPU tests alike.
#include "base/polar_scalar.hpp"  // DCALIGN_HD

namespace dcalign::cholesky_qr {

/// The largest ||Q_1^T Q_1 - I||_F (first pass) for which the second pass is accepted: then
/// kappa(Q_1)^2 <= (1 + 0.5) / (1 - 0.5) = 3, and the second pass's Q is orthogonal to a few u.
constexpr double kMaxFirstPassDeviation = 0.5;

/// Whether CholeskyQR2's factors of one matrix are accepted: both Cholesky factorisations
/// succeeded (LAPACK info 0) and the first pass's deviation from orthogonality is finite and at
/// most kMaxFirstPassDeviation.
DCALIGN_HD inline bool accepted(int info_first, int info_second, double first_pass_deviation) {
  return info_first == 0 && info_second == 0 &&
         first_pass_deviation <= kMaxFirstPassDeviation;  // false for NaN
}

}  // namespace dcalign::cholesky_qr
