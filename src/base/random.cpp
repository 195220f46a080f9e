#include "dcalign/random.hpp"

#include <cstddef>
#include <type_traits>
#include <vector>

#include "base/host_blas.hpp"

namespace dcalign {

void Rng::fill_normal(double* out, std::size_t count) {
  std::size_t k = 0;
  if (count > 0 && has_spare_) {
    out[k++] = spare_;
    has_spare_ = false;
  }
  // Pass 1, in order: each pair's uniforms (u1 redrawn while 0, as in normal()) in place of
  // the two values it becomes; an odd remainder's last pair is kept aside, its second value
  // being the spare.
  const std::size_t whole = (count - k) / 2;
  double* pairs = out + k;
  for (std::size_t p = 0; p < whole; ++p) {
    pairs[2 * p] = positive_uniform();
    pairs[2 * p + 1] = uniform();
  }
  const bool odd = (count - k) % 2 == 1;
  double last_u1 = 0.0, last_u2 = 0.0;
  if (odd) {
    last_u1 = positive_uniform();
    last_u2 = uniform();
  }
  // Pass 2: the transforms, independent of each other.
  const auto n = static_cast<std::ptrdiff_t>(whole);
#pragma omp parallel for schedule(static) if (n >= (std::ptrdiff_t(1) << 14))
  for (std::ptrdiff_t p = 0; p < n; ++p)
    box_muller(pairs[2 * p], pairs[2 * p + 1], pairs[2 * p], pairs[2 * p + 1]);
  if (odd) {
    box_muller(last_u1, last_u2, out[count - 1], spare_);
    has_spare_ = true;
  }
}

template <typename T>
Matrix<T> random_uniform(index_t rows, index_t cols, Rng& rng) {
  Matrix<T> m(rows, cols);
  for (index_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(rng.uniform());
  return m;
}

template <typename T>
Matrix<T> random_normal(index_t rows, index_t cols, Rng& rng) {
  Matrix<T> m(rows, cols);
  const auto count = static_cast<std::size_t>(m.size());
  if constexpr (std::is_same_v<T, double>) {
    rng.fill_normal(m.data(), count);
  } else {
    std::vector<double> v(count);
    rng.fill_normal(v.data(), count);
    for (std::size_t i = 0; i < count; ++i) m.data()[i] = static_cast<T>(v[i]);
  }
  return m;
}

template <typename T>
Matrix<T> random_orthogonal(index_t n, Rng& rng) {
  // Drawn and factorised in double whatever T is, so float and double users of one seed get
  // the same matrix up to rounding.
  Matrix<double> q = random_normal<double>(n, n, rng);
  if (n == 0) return Matrix<T>();
  const auto ln = static_cast<lapack_int>(n);
  std::vector<double> tau(n), work(static_cast<std::size_t>(base::qr_lwork<double>(ln, ln)));
  const auto lwork = static_cast<lapack_int>(work.size());
  base::check_info(base::geqrf(ln, ln, q.data(), ln, tau.data(), work.data(), lwork), "geqrf");
  std::vector<double> sign(n);
  for (index_t j = 0; j < n; ++j) sign[j] = q(j, j) < 0 ? -1.0 : 1.0;
  base::check_info(base::orgqr(ln, ln, ln, q.data(), ln, tau.data(), work.data(), lwork), "orgqr");
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
