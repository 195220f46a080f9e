// The collusion attack and the epsilon-DR ratio (include/dcalign/privacy_attacks.hpp), written
// on the backend-free BLAS/LAPACK overloads of base/host_blas.hpp.
#include "dcalign/privacy_attacks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "base/host_blas.hpp"
#include "dcalign/data.hpp"
#include "dcalign/error.hpp"

namespace dcalign {
namespace {

std::string shape(const Matrix<double>& M) {
  return std::to_string(M.rows()) + " x " + std::to_string(M.cols());
}

// Nonempty and finite; `expected` describes the shape wanted, for the message.
void require_matrix(const Matrix<double>& M, const std::string& what,
                    const std::string& expected = "at least 1 x 1") {
  if (M.rows() < 1 || M.cols() < 1)
    throw InvalidInput("privacy attack: " + what + " is " + shape(M) + ", expected " + expected);
  for (index_t j = 0; j < M.cols(); ++j)
    for (index_t i = 0; i < M.rows(); ++i)
      if (!std::isfinite(M(i, j)))
        throw InvalidInput("privacy attack: " + what + " has a non-finite value at row " +
                           std::to_string(i) + ", column " + std::to_string(j));
}

void require_epsilon(double epsilon) {
  if (!(std::isfinite(epsilon) && epsilon > 0))
    throw InvalidInput("privacy attack: epsilon = " + std::to_string(epsilon) +
                       " must be a finite number > 0");
}

// C = op(A) op(B) into a fresh matrix.
Matrix<double> product(const Matrix<double>& A, bool ta, const Matrix<double>& B, bool tb) {
  const index_t m = ta ? A.cols() : A.rows(), k = ta ? A.rows() : A.cols();
  const index_t n = tb ? B.rows() : B.cols();
  Matrix<double> C(m, n);
  if (C.size() == 0 || k == 0) return C;
  base::gemm(ta, tb, static_cast<lapack_int>(m), static_cast<lapack_int>(n),
             static_cast<lapack_int>(k), 1.0, A.data(), static_cast<lapack_int>(A.rows()), B.data(),
             static_cast<lapack_int>(B.rows()), 0.0, C.data(), static_cast<lapack_int>(C.rows()));
  return C;
}

// Thin SVD M = U diag(s) V^T (U r x p, VT p x c, p = min(r, c)) and the numerical rank.
struct Svd {
  Matrix<double> U, VT;
  std::vector<double> s;
  index_t rank = 0;
};

Svd thin_svd(const Matrix<double>& M) {
  const auto r = static_cast<lapack_int>(M.rows()), c = static_cast<lapack_int>(M.cols());
  const lapack_int p = std::min(r, c);
  Svd out;
  Matrix<double> a = M;
  out.U = Matrix<double>(r, p);
  out.VT = Matrix<double>(p, c);
  out.s.assign(static_cast<size_t>(p), 0.0);
  std::vector<lapack_int> iwork(8 * static_cast<size_t>(p));
  double query = 0;
  base::check_info(base::gesdd(r, c, a.data(), r, out.s.data(), out.U.data(), r, out.VT.data(), p,
                               &query, -1, iwork.data()),
                   "gesdd");
  std::vector<double> work(static_cast<size_t>(query) + 1);
  base::check_info(base::gesdd(r, c, a.data(), r, out.s.data(), out.U.data(), r, out.VT.data(), p,
                               work.data(), static_cast<lapack_int>(work.size()), iwork.data()),
                   "gesdd");
  // numpy.linalg.pinv's cutoff: max(rows, cols) x eps x s_max.
  const double tol = static_cast<double>(std::max(r, c)) * std::numeric_limits<double>::epsilon() *
                     (p > 0 ? out.s[0] : 0.0);
  for (double v : out.s)
    if (v > tol) ++out.rank;
  return out;
}

double row_norm(const Matrix<double>& M, index_t i) {
  double s = 0;
  for (index_t j = 0; j < M.cols(); ++j) s += M(i, j) * M(i, j);
  return std::sqrt(s);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// ||a - b|| / ||b|| with the zero-row rule of the header (b zero: 0 if a is zero, else 1).
double relative_distance(double diff, double base) {
  if (base > 0) return diff / base;
  return diff > 0 ? 1.0 : 0.0;
}

}  // namespace

Matrix<double> pseudo_inverse(const Matrix<double>& M, const char* what) {
  require_matrix(M, what);
  const Svd d = thin_svd(M);
  // M^+ = V diag(1/s) U^T over the singular values above the cutoff.
  Matrix<double> Us(M.rows(), d.rank);
  for (index_t k = 0; k < d.rank; ++k)
    for (index_t i = 0; i < M.rows(); ++i) Us(i, k) = d.U(i, k) / d.s[static_cast<size_t>(k)];
  Matrix<double> V(M.cols(), d.rank);
  for (index_t k = 0; k < d.rank; ++k)
    for (index_t j = 0; j < M.cols(); ++j) V(j, k) = d.VT(k, j);
  return product(V, false, Us, true);
}

CollusionAttacker::CollusionAttacker(const Matrix<double>& anchor, ReleaseMap map) : map_(map) {
  require_matrix(anchor, "anchor A", "a x m with a, m >= 1");
  features_ = anchor.cols();
  if (map == ReleaseMap::linear) {
    pinv_ = pseudo_inverse(anchor, "anchor A");
    rank_ = thin_svd(anchor).rank;
    return;
  }
  // D = [A, 1]: the last column carries the shift b_j = -mu_j F_j.
  Matrix<double> design(anchor.rows(), features_ + 1);
  std::copy(anchor.data(), anchor.data() + anchor.size(), design.data());
  for (index_t i = 0; i < anchor.rows(); ++i) design(i, features_) = 1.0;
  pinv_ = pseudo_inverse(design, "design matrix [A, 1]");
  rank_ = thin_svd(design).rank;
}

CollusionAttacker::Estimate CollusionAttacker::estimate(
    const Matrix<double>& released_anchor) const {
  require_matrix(released_anchor, "released anchor A_j",
                 std::to_string(anchor_rows()) + " x l (the anchor's rows) with l >= 1");
  if (released_anchor.rows() != anchor_rows())
    throw InvalidInput("privacy attack: released anchor A_j is " + shape(released_anchor) +
                       ", expected " + std::to_string(anchor_rows()) +
                       " x l (one row per anchor row)");
  const Matrix<double> S = product(pinv_, false, released_anchor, false);  // [F^_j; b^_j]
  const index_t l = S.cols();
  Estimate e;
  e.shift.assign(static_cast<size_t>(l), 0.0);
  if (map_ == ReleaseMap::linear) {
    e.basis = S;
    return e;
  }
  e.basis = Matrix<double>(features_, l);
  for (index_t q = 0; q < l; ++q) {
    for (index_t j = 0; j < features_; ++j) e.basis(j, q) = S(j, q);
    e.shift[static_cast<size_t>(q)] = S(features_, q);
  }
  return e;
}

Matrix<double> CollusionAttacker::estimate_basis(const Matrix<double>& released_anchor) const {
  return estimate(released_anchor).basis;
}

Matrix<double> CollusionAttacker::reconstruct(const Matrix<double>& released_anchor,
                                              const Matrix<double>& released) const {
  const Estimate e = estimate(released_anchor);
  const std::string expected = "n x " + std::to_string(e.basis.cols()) + " (the columns of A_j)";
  require_matrix(released, "released data X~_j", expected);
  if (released.cols() != e.basis.cols())
    throw InvalidInput("privacy attack: released data X~_j is " + shape(released) + ", expected " +
                       expected);
  Matrix<double> unshifted = released;  // X~_j - 1 b^_j
  for (index_t q = 0; q < unshifted.cols(); ++q)
    for (index_t i = 0; i < unshifted.rows(); ++i)
      unshifted(i, q) -= e.shift[static_cast<size_t>(q)];
  return product(unshifted, false, pseudo_inverse(e.basis, "estimated basis F^_j"), false);
}

ReconstructionError reconstruction_error(const Matrix<double>& truth,
                                         const Matrix<double>& reconstruction) {
  require_matrix(truth, "true data X", "n x m with n, m >= 1");
  const std::string expected = shape(truth) + " (the shape of the true data)";
  require_matrix(reconstruction, "reconstruction X^", expected);
  if (reconstruction.rows() != truth.rows() || reconstruction.cols() != truth.cols())
    throw InvalidInput("privacy attack: reconstruction X^ is " + shape(reconstruction) +
                       ", expected " + expected);
  ReconstructionError e;
  double diff_total = 0, base_total = 0;
  for (index_t i = 0; i < truth.rows(); ++i) {
    double diff = 0, base = 0;
    for (index_t j = 0; j < truth.cols(); ++j) {
      const double d = reconstruction(i, j) - truth(i, j);
      diff += d * d;
      base += truth(i, j) * truth(i, j);
    }
    diff_total += diff;
    base_total += base;
    e.per_row.push_back(relative_distance(std::sqrt(diff), std::sqrt(base)));
  }
  e.relative = relative_distance(std::sqrt(diff_total), std::sqrt(base_total));
  e.median_row = median(e.per_row);
  return e;
}

std::vector<double> dr_ratios(const Matrix<double>& X, const Matrix<double>& basis) {
  require_matrix(X, "data X", "n x m with n, m >= 1");
  const std::string expected = std::to_string(X.cols()) + " x l (the columns of X) with l >= 1";
  require_matrix(basis, "basis F", expected);
  if (basis.rows() != X.cols())
    throw InvalidInput("privacy attack: basis F is " + shape(basis) + ", expected " + expected);
  // F F^+ = Q Q^T with Q the left singular vectors of F above the cutoff.
  const Svd d = thin_svd(basis);
  Matrix<double> Q(basis.rows(), d.rank);
  for (index_t k = 0; k < d.rank; ++k)
    for (index_t i = 0; i < basis.rows(); ++i) Q(i, k) = d.U(i, k);
  Matrix<double> R = X;  // X - (X Q) Q^T
  if (d.rank > 0) {
    const Matrix<double> XQ = product(X, false, Q, false);
    base::gemm(false, true, static_cast<lapack_int>(X.rows()), static_cast<lapack_int>(X.cols()),
               static_cast<lapack_int>(d.rank), -1.0, XQ.data(), static_cast<lapack_int>(XQ.rows()),
               Q.data(), static_cast<lapack_int>(Q.rows()), 1.0, R.data(),
               static_cast<lapack_int>(R.rows()));
  }
  std::vector<double> r(static_cast<size_t>(X.rows()));
  for (index_t i = 0; i < X.rows(); ++i) {
    const double base = row_norm(X, i);
    // A zero row is reconstructed exactly: ratio 0. Rounding can put r a hair above 1.
    r[static_cast<size_t>(i)] = base > 0 ? std::min(1.0, row_norm(R, i) / base) : 0.0;
  }
  return r;
}

std::vector<index_t> dr_downsample(const std::vector<double>& ratios, double epsilon) {
  require_epsilon(epsilon);
  std::vector<index_t> kept;
  for (size_t k = 0; k < ratios.size(); ++k) {
    if (!(std::isfinite(ratios[k]) && ratios[k] >= 0))
      throw InvalidInput("privacy attack: ratio " + std::to_string(k) + " = " +
                         std::to_string(ratios[k]) + " must be a finite number >= 0");
    if (ratios[k] >= epsilon) kept.push_back(static_cast<index_t>(k));
  }
  return kept;
}

DrSummary dr_privacy(const Matrix<double>& X, const Matrix<double>& basis, double epsilon) {
  require_epsilon(epsilon);
  DrSummary s;
  s.ratios = dr_ratios(X, basis);
  s.kept = dr_downsample(s.ratios, epsilon);
  s.min = *std::min_element(s.ratios.begin(), s.ratios.end());
  s.median = median(s.ratios);
  s.below = X.rows() - static_cast<index_t>(s.kept.size());
  s.fraction_below = static_cast<double>(s.below) / static_cast<double>(X.rows());
  return s;
}

Matrix<double> select_rows(const Matrix<double>& X, const std::vector<index_t>& rows) {
  try {
    return data::take_rows(X, rows);
  } catch (const InvalidInput& e) {
    throw InvalidInput(std::string("privacy attack: ") + e.what());
  }
}

SetReconstruction match_rows(const Matrix<double>& truth, const Matrix<double>& reconstruction,
                             const std::vector<index_t>& origin) {
  require_matrix(truth, "true data X", "n x m with n, m >= 1");
  const std::string expected = "q x " + std::to_string(truth.cols()) + " (the columns of X)";
  require_matrix(reconstruction, "reconstruction X^", expected);
  if (reconstruction.cols() != truth.cols())
    throw InvalidInput("privacy attack: reconstruction X^ is " + shape(reconstruction) +
                       ", expected " + expected);
  if (static_cast<index_t>(origin.size()) != reconstruction.rows())
    throw InvalidInput("privacy attack: origin has " + std::to_string(origin.size()) +
                       " entries, expected one per reconstructed row (" +
                       std::to_string(reconstruction.rows()) + ")");
  for (size_t k = 0; k < origin.size(); ++k)
    if (origin[k] < 0 || origin[k] >= truth.rows())
      throw InvalidInput("privacy attack: origin[" + std::to_string(k) +
                         "] = " + std::to_string(origin[k]) + " is outside the " +
                         std::to_string(truth.rows()) + " rows of X");
  // Squared distances ||x^_k||^2 + ||x_i||^2 - 2 x^_k . x_i would lose the small ones; the
  // sizes here (one user's rows) allow the direct sums.
  SetReconstruction s;
  index_t hits = 0;
  for (index_t k = 0; k < reconstruction.rows(); ++k) {
    index_t best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (index_t i = 0; i < truth.rows(); ++i) {
      double d = 0;
      for (index_t j = 0; j < truth.cols(); ++j) {
        const double v = reconstruction(k, j) - truth(i, j);
        d += v * v;
      }
      if (d < best_d) {
        best_d = d;
        best = i;
      }
    }
    s.nearest.push_back(best);
    s.nearest_error.push_back(relative_distance(std::sqrt(best_d), row_norm(truth, best)));
    if (best == origin[static_cast<size_t>(k)]) ++hits;
  }
  s.identified_fraction = static_cast<double>(hits) / static_cast<double>(reconstruction.rows());
  s.median_nearest_error = median(s.nearest_error);
  return s;
}

}  // namespace dcalign
