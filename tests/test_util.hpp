#pragma once
// Host-side reference helpers for tests: plain loops, independent of the backends under test.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "dcalign/matrix.hpp"
#include "dcalign/random.hpp"
#include "dcalign/user.hpp"

namespace dcalign::testing {

template <typename T>
Matrix<double> to_double(MatrixView<const T> m) {
  Matrix<double> out(m.rows(), m.cols());
  for (index_t j = 0; j < m.cols(); ++j)
    for (index_t i = 0; i < m.rows(); ++i) out(i, j) = m(i, j);
  return out;
}
template <typename T>
Matrix<double> to_double(MatrixView<T> m) {
  return to_double(MatrixView<const T>(m));
}
template <typename T>
Matrix<double> to_double(const Matrix<T>& m) {
  return to_double(m.view());
}

template <typename T>
Matrix<T> convert(const Matrix<double>& m) {
  Matrix<T> out(m.rows(), m.cols());
  for (index_t i = 0; i < m.size(); ++i) out.data()[i] = static_cast<T>(m.data()[i]);
  return out;
}

inline Matrix<double> mul(const Matrix<double>& A, const Matrix<double>& B, bool ta = false,
                          bool tb = false) {
  const index_t m = ta ? A.cols() : A.rows(), k = ta ? A.rows() : A.cols();
  const index_t n = tb ? B.rows() : B.cols();
  Matrix<double> C(m, n);
  for (index_t j = 0; j < n; ++j)
    for (index_t p = 0; p < k; ++p) {
      const double b = tb ? B(j, p) : B(p, j);
      if (b == 0) continue;
      for (index_t i = 0; i < m; ++i) C(i, j) += (ta ? A(p, i) : A(i, p)) * b;
    }
  return C;
}

inline double frob(const Matrix<double>& A) {
  double s = 0;
  for (double v : A.values()) s += v * v;
  return std::sqrt(s);
}

inline double frob_diff(const Matrix<double>& A, const Matrix<double>& B) {
  double s = 0;
  for (index_t i = 0; i < A.size(); ++i) {
    const double d = A.data()[i] - B.data()[i];
    s += d * d;
  }
  return std::sqrt(s);
}

inline double orthogonality_error(const Matrix<double>& G) {
  return frob_diff(mul(G, G, true, false), Matrix<double>::identity(G.cols()));
}

/// A synthetic collaboration: anchor A (a x m), secret bases F_i (m x l) under a condition of
/// eq. 92, with the subspaces drawn at random (orthonormal V_i) instead of from data.
struct Synthetic {
  Matrix<double> anchor;
  std::vector<Matrix<double>> F, E;
  std::vector<Matrix<double>> V;
};

inline Synthetic make_synthetic(index_t a, index_t m, index_t l, index_t c, SpanCondition cond,
                                std::uint64_t seed) {
  Synthetic s;
  s.anchor = make_anchor<double>(a, m, AnchorKind::uniform, seed);
  for (index_t i = 0; i < c; ++i) {
    Rng rng = Rng::stream(seed, 100 + i);
    if (i == 0 || !shares_span(cond)) {
      // Orthonormal basis of a random l-dimensional subspace of R^m.
      Matrix<double> q = random_orthogonal<double>(m, rng);
      Matrix<double> v(m, l);
      for (index_t j = 0; j < l; ++j)
        for (index_t r = 0; r < m; ++r) v(r, j) = q(r, j);
      s.V.push_back(v);
    } else {
      s.V.push_back(s.V[0]);
    }
    Matrix<double> e = orthonormal_mixing(cond) ? random_orthogonal<double>(l, rng)
                                                : random_uniform<double>(l, l, rng);
    s.E.push_back(e);
    s.F.push_back(mul(s.V.back(), e));
  }
  return s;
}

template <typename T>
Stack<T> released_anchors(const Synthetic& s) {
  std::vector<Matrix<T>> a;
  for (const auto& f : s.F) a.push_back(convert<T>(mul(s.anchor, f)));
  return Stack<T>::from_matrices(a);
}

/// U diag(s) V^T (rows x cols, rows >= cols) with Haar U (rows x cols of a square orthogonal)
/// and V, and singular values geometric from 1 down to 1 / kappa.
inline Matrix<double> conditioned_matrix(index_t rows, index_t cols, double kappa, Rng& rng) {
  const Matrix<double> U = random_orthogonal<double>(rows, rng);
  const Matrix<double> V = random_orthogonal<double>(cols, rng);
  Matrix<double> us(rows, cols);
  for (index_t k = 0; k < cols; ++k) {
    const double s = cols > 1 ? std::pow(kappa, -double(k) / double(cols - 1)) : 1.0;
    for (index_t i = 0; i < rows; ++i) us(i, k) = U(i, k) * s;
  }
  return mul(us, V, false, true);
}

/// conditioned_matrix's values as T, column-major.
template <typename T>
std::vector<T> conditioned_values(index_t rows, index_t cols, double kappa, Rng& rng) {
  const Matrix<double> m = conditioned_matrix(rows, cols, kappa, rng);
  return std::vector<T>(m.values().begin(), m.values().end());
}

template <typename T>
constexpr double eps() {
  return std::numeric_limits<T>::epsilon();
}

}  // namespace dcalign::testing
