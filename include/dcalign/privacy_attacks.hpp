#pragma once
// Privacy measurements for released DC representations: the collusion attack of paper 001
// section 2.2 (and 000 section 2.2.2, 004 section 2.3) and the epsilon-DR ratio of paper 004,
// Definition 2.6, eq. (3), with its down-sampling defence.
//
// Collusion: user i and the analyst together hold the raw anchor A (a x m), user j's released
// anchor A_j = A F_j (a x l) and released data X~_j = X_j F_j (n x l). They estimate
//   F^_j = A^+ A_j           (least squares; F_j itself when rank(A) = m, i.e. a >= m)
//   X^_j = X~_j F^_j^+        (the minimum-norm reconstruction; X_j F_j F_j^+ when F^_j = F_j)
// so with l = m and F_j invertible X^_j = X_j, and with l < m the attacker recovers only the
// projection of each row onto span(F_j), whose loss is the epsilon-DR ratio below.
//
// When A lacks full column rank (a < m, or a degenerate anchor), A^+ A_j is the minimum-norm
// least-squares solution: F^_j = Q Q^T F_j, the projection of F_j's columns onto the row space
// of A (Q an orthonormal basis of it, rank(A) columns). The part of F_j orthogonal to that row
// space is invisible to the attacker and is taken as zero, so X^_j is no longer X_j F_j F_j^+:
// the anchor's rank, not only l, bounds what the collusion reveals (CollusionAttacker::
// anchor_rank() says which case holds).
//
// Pseudo-inverses are computed from the SVD (LAPACK gesdd); singular values at or below
// max(rows, cols) x machine epsilon x the largest one count as zero (numpy.linalg.pinv's rule).
// Every function checks shapes and finiteness (NaN or infinity is an error) and throws
// InvalidInput naming the argument and the expected shape.
#include <vector>

#include "dcalign/matrix.hpp"

namespace dcalign {

/// M^+ by the SVD, with the cutoff above; `what` names M in error messages.
Matrix<double> pseudo_inverse(const Matrix<double>& M, const char* what = "matrix");

/// The colluding party: user i and the analyst, holding the raw anchor. A^+ is computed once
/// and serves every attacked user.
class CollusionAttacker {
 public:
  /// `anchor` is A, a x m, finite, a, m >= 1.
  explicit CollusionAttacker(const Matrix<double>& anchor);

  index_t anchor_rows() const { return pinv_.cols(); }
  index_t features() const { return pinv_.rows(); }
  /// rank(A) (numerical, by the cutoff above). F^_j = F_j exactly when it equals features().
  index_t anchor_rank() const { return rank_; }

  /// F^_j = A^+ A_j for released_anchor A_j (a x l, l >= 1); m x l.
  Matrix<double> estimate_basis(const Matrix<double>& released_anchor) const;
  /// X^_j = X~_j F^_j^+ for released data X~_j (n x l, same l as A_j); n x m. The released data
  /// may carry DP noise (X_j F_j + sigma W_j): the attack runs the same and the noise goes
  /// through F^_j^+ into the reconstruction.
  Matrix<double> reconstruct(const Matrix<double>& released_anchor,
                             const Matrix<double>& released) const;

 private:
  Matrix<double> pinv_;  // A^+, m x a
  index_t rank_ = 0;
};

/// How far a reconstruction is from the truth (both n x m, n, m >= 1, finite).
struct ReconstructionError {
  double relative = 0;          ///< ||X^ - X||_F / ||X||_F (0 when both are zero matrices)
  std::vector<double> per_row;  ///< ||x^_k - x_k|| / ||x_k|| per row k
  double median_row = 0;        ///< median of per_row (mean of the middle two for even n)
};
/// A zero row x_k has per-row error 0 when x^_k is zero as well, else 1 (counted as missed);
/// a zero X with a nonzero X^ has relative error 1. No NaN is ever produced.
ReconstructionError reconstruction_error(const Matrix<double>& truth,
                                         const Matrix<double>& reconstruction);

/// The epsilon-DR ratio of paper 004 eq. (3), per row x of X (n x m):
///   r(x) = ||x - x F F^+|| / ||x||,
/// F the m x l basis (the secret F_j or the attacker's F^_j; l >= 1). F F^+ is the orthogonal
/// projector onto span(F), so r(x) is the part of x that no linear reconstruction from x F can
/// recover; r is in [0, 1]. A zero row has r = 0 (it is reconstructed exactly, so it is the
/// least private sample and the defence drops it for every epsilon > 0).
std::vector<double> dr_ratios(const Matrix<double>& X, const Matrix<double>& basis);

/// The ratios summarised at a threshold epsilon > 0 (finite).
struct DrSummary {
  std::vector<double> ratios;  ///< r(x) per row
  double min = 0;              ///< the largest epsilon for which F is epsilon-DR on X (eq. 3)
  double median = 0;
  index_t below = 0;          ///< rows with r(x) < epsilon
  double fraction_below = 0;  ///< below / n
  std::vector<index_t> kept;  ///< rows with r(x) >= epsilon, increasing (the defence's output)
};
DrSummary dr_privacy(const Matrix<double>& X, const Matrix<double>& basis, double epsilon);

/// The down-sampling defence ([22] in paper 004 section 2.3): the indices, in increasing order,
/// of the rows a user keeps for release, those with r(x) >= epsilon; the others (r < epsilon)
/// are dropped before X~ = X F is formed. epsilon > 0 and finite; ratios finite and >= 0.
std::vector<index_t> dr_downsample(const std::vector<double>& ratios, double epsilon);

/// The rows of X at `rows` (each in [0, n)), in that order.
Matrix<double> select_rows(const Matrix<double>& X, const std::vector<index_t>& rows);

/// Reconstruction as a set, for NRI-DC's row permutation: the attacker reconstructs the rows of
/// P X but does not know P. Each reconstructed row is assigned its nearest true row (Euclidean
/// distance; ties go to the lower index); it is identified when that is the row it came from.
struct SetReconstruction {
  std::vector<index_t> nearest;  ///< per reconstructed row k, the index of its nearest row
  std::vector<double>
      nearest_error;               ///< ||x^_k - x_nearest|| / ||x_nearest|| (zero-row rule above)
  double identified_fraction = 0;  ///< share of k with nearest[k] == origin[k]
  double median_nearest_error = 0;
};
/// truth X (n x m), reconstruction (q x m, q >= 1), origin[k] in [0, n) the true row of
/// reconstructed row k (the permutation, known to the evaluator only).
SetReconstruction match_rows(const Matrix<double>& truth, const Matrix<double>& reconstruction,
                             const std::vector<index_t>& origin);

}  // namespace dcalign
