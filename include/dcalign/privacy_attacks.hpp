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
// Affine releases (ReleaseMap::affine): NRI-DC's centred PCA (paper 004 with scikit-learn's
// PCA.transform, src/experiment/nri_dc.hpp) releases A~_j = (A - 1 mu_j) F_j and
// X~_j = P_j (X_j - 1 mu_j) F_j, the same mean mu_j subtracted from both. That is affine in the
// raw rows, so the linear fit above is biased (A^+ A~_j = F_j - A^+ 1 mu_j F_j). The affine
// attacker fits the shift b_j = -mu_j F_j (1 x l) as well, by least squares on [A, 1]:
//   [F^_j; b^_j] = [A, 1]^+ A~_j   ((m + 1) x l; exact when [A, 1] has full column rank m + 1,
//                                    which needs a >= m + 1)
//   X^_j = (X~_j - 1 b^_j) F^_j^+   (= P_j X_j F_j F_j^+ when exact: X~_j - 1 b_j = P_j X_j F_j)
// so with l = m it recovers P_j X_j, the raw rows in the released (permuted) order, and with
// l < m the projection of each raw row onto span(F_j): its per-row error is the epsilon-DR
// ratio of the raw row, r(x) below, not that of the centred row x - mu_j (the part of mu_j
// outside span(F_j) is invisible to it). Without full column rank the minimum-norm solution is
// taken, as above.
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

/// How a release depends on the raw rows: linear, X~ = X F and A~ = A F (the DC protocol, paper
/// 001 eq. 6), or affine, X~ = (X - 1 mu) F and A~ = (A - 1 mu) F with one unknown mu (NRI-DC's
/// centred PCA).
enum class ReleaseMap { linear, affine };

/// The colluding party: user i and the analyst, holding the raw anchor. The pseudo-inverse of
/// the design matrix D (A for ReleaseMap::linear, [A, 1] for ReleaseMap::affine) is computed
/// once and serves every attacked user.
class CollusionAttacker {
 public:
  /// `anchor` is A, a x m, finite, a, m >= 1; `map` the form of the releases it attacks.
  explicit CollusionAttacker(const Matrix<double>& anchor, ReleaseMap map = ReleaseMap::linear);

  ReleaseMap map() const { return map_; }
  index_t anchor_rows() const { return pinv_.cols(); }
  index_t features() const { return features_; }
  /// Columns of D: m (linear) or m + 1 (affine).
  index_t design_columns() const { return pinv_.rows(); }
  /// rank(D) (numerical, by the cutoff above): rank(A) for linear, rank([A, 1]) for affine.
  /// F^_j = F_j (and b^_j = b_j) exactly when it equals design_columns().
  index_t anchor_rank() const { return rank_; }

  /// What the attacker estimates of user j's release map from its released anchor A~_j.
  struct Estimate {
    Matrix<double> basis;       ///< F^_j, m x l
    std::vector<double> shift;  ///< b^_j, length l (-mu_j F_j when exact); zeros for linear
  };
  /// D^+ A~_j for released_anchor A~_j (a x l, l >= 1), split into F^_j and b^_j.
  Estimate estimate(const Matrix<double>& released_anchor) const;
  /// F^_j alone (estimate(released_anchor).basis); m x l.
  Matrix<double> estimate_basis(const Matrix<double>& released_anchor) const;
  /// X^_j = (X~_j - 1 b^_j) F^_j^+ for released data X~_j (n x l, same l as A~_j); n x m (b^_j
  /// = 0 for linear). The released data may carry DP noise (X_j F_j + sigma W_j): the attack
  /// runs the same and the noise goes through F^_j^+ into the reconstruction. Row k of X^_j
  /// reconstructs row k of X~_j, whatever the order the user released its rows in.
  Matrix<double> reconstruct(const Matrix<double>& released_anchor,
                             const Matrix<double>& released) const;

 private:
  Matrix<double> pinv_;  // D^+, design_columns() x a
  index_t features_ = 0, rank_ = 0;
  ReleaseMap map_ = ReleaseMap::linear;
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

/// The rows of X at `rows` (each in [0, n)), in that order: data::take_rows, with errors that
/// name the attack.
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
