#include "dcalign/random.hpp"

#include <vector>

#include "base/host_blas.hpp"

namespace dcalign {

template <typename T>
Matrix<T> random_uniform(index_t rows, index_t cols, Rng& rng) {
  Matrix<T> m(rows, cols);
  for (index_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(rng.uniform());
  return m;
}

template <typename T>
Matrix<T> random_normal(index_t rows, index_t cols, Rng& rng) {
  Matrix<T> m(rows, cols);
  for (index_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(rng.normal());
  return m;
}

template <typename T>
Matrix<T> random_orthogonal(index_t n, Rng& rng) {
  // Drawn and factorised in double whatever T is, so float and double users of one seed get
  // the same matrix up to rounding.
  Matrix<double> q = random_normal<double>(n, n, rng);
  if (n == 0) return Matrix<T>();
  const auto ln = static_cast<lapack_int>(n);
  std::vector<double> tau(n);
  base::check_info(LAPACKE_dgeqrf(LAPACK_COL_MAJOR, ln, ln, q.data(), ln, tau.data()), "geqrf");
  std::vector<double> sign(n);
  for (index_t j = 0; j < n; ++j) sign[j] = q(j, j) < 0 ? -1.0 : 1.0;
  base::check_info(LAPACKE_dorgqr(LAPACK_COL_MAJOR, ln, ln, ln, q.data(), ln, tau.data()), "orgqr");
  Matrix<T> out(n, n);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) out(i, j) = static_cast<T>(q(i, j) * sign[j]);
  return out;
}

template Matrix<float> random_uniform<float>(index_t, index_t, Rng&);
template Matrix<double> random_uniform<double>(index_t, index_t, Rng&);
template Matrix<float> random_normal<float>(index_t, index_t, Rng&);
template Matrix<double> random_normal<double>(index_t, index_t, Rng&);
template Matrix<float> random_orthogonal<float>(index_t, Rng&);
template Matrix<double> random_orthogonal<double>(index_t, Rng&);

}  // namespace dcalign
