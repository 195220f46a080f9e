#pragma once
// Test matrices of the polar benchmarks (bm_polar, bm_polar_paths): M = U diag(s) V^T with U, V
// Haar-orthogonal from `rng` and geometrically spaced singular values s_j = kappa^(-j/(l-1)), so
// that sigma_max / sigma_min = kappa; `polar` receives the exact polar factor U V^T.
#include <cblas.h>

#include <cmath>

#include "dcalign/matrix.hpp"
#include "dcalign/random.hpp"

namespace dcalign::bench {

inline void matrix_with_spectrum(index_t l, double kappa, Rng& rng, MatrixView<double> M,
                                 MatrixView<double> polar) {
  auto U = random_orthogonal<double>(l, rng), V = random_orthogonal<double>(l, rng);
  auto US = U;
  for (index_t j = 0; j < l; ++j) {
    const double s = l == 1 ? 1.0 : std::pow(kappa, -static_cast<double>(j) / (l - 1));
    for (index_t i = 0; i < l; ++i) US(i, j) *= s;
  }
  const int n = static_cast<int>(l);
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0, US.data(), n, V.data(), n, 0.0,
              M.data(), static_cast<int>(M.ld()));
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0, U.data(), n, V.data(), n, 0.0,
              polar.data(), static_cast<int>(polar.ld()));
}

}  // namespace dcalign::bench
