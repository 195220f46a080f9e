// The acceptance rule of the CUDA backend's batched CholeskyQR2 (src/base/cholesky_qr.hpp), on
// the same algorithm run with host LAPACK: whatever it accepts is an accurate thin QR, and it
// accepts every matrix well inside CholeskyQR2's range (kappa <= 1e-2 u^{-1/2}).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/cholesky_qr.hpp"
#include "base/host_blas.hpp"
#include "dcalign/random.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

lapack_int potrf_upper(lapack_int n, float* A) {
  return DCALIGN_LAPACK_CALL(LAPACK_spotrf, "U", &n, A, &n);
}
lapack_int potrf_upper(lapack_int n, double* A) {
  return DCALIGN_LAPACK_CALL(LAPACK_dpotrf, "U", &n, A, &n);
}
void solve_right_upper(lapack_int m, lapack_int n, const float* R, float* B) {
  cblas_strsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, m, n, 1.0f, R, n,
              B, m);
}
void solve_right_upper(lapack_int m, lapack_int n, const double* R, double* B) {
  cblas_dtrsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, m, n, 1.0, R, n, B,
              m);
}

struct Result {
  bool accepted;
  double orthogonality;  ///< ||Q^T Q - I||_F
  double residual;       ///< ||A - Q R||_F / ||A||_F
};

/// CholeskyQR2 of the a x l matrix A as src/cuda/solver_ops.cu runs it, per matrix.
template <typename T>
Result cholesky_qr2(const std::vector<T>& A, lapack_int a, lapack_int l) {
  std::vector<T> Q = A, G(static_cast<size_t>(l * l)), R1, R2;
  int info[2] = {0, 0};
  double deviation = 0;
  for (int pass = 0; pass < 2; ++pass) {
    base::gemm(true, false, l, l, a, T(1), Q.data(), a, Q.data(), a, T(0), G.data(), l);
    if (pass == 1) {
      double d = 0;
      for (lapack_int j = 0; j < l; ++j)
        for (lapack_int i = 0; i < l; ++i) {
          const double e = double(G[i + j * l]) - (i == j ? 1.0 : 0.0);
          d += e * e;
        }
      deviation = std::sqrt(d);
    }
    info[pass] = static_cast<int>(potrf_upper(l, G.data()));
    for (lapack_int j = 0; j < l; ++j)
      for (lapack_int i = j + 1; i < l; ++i) G[i + j * l] = T(0);
    solve_right_upper(a, l, G.data(), Q.data());
    (pass == 0 ? R1 : R2) = G;
  }
  std::vector<T> R(static_cast<size_t>(l * l));
  base::gemm(false, false, l, l, l, T(1), R2.data(), l, R1.data(), l, T(0), R.data(), l);
  Result out{cholesky_qr::accepted(info[0], info[1], deviation), 0, 0};
  std::vector<T> QtQ(static_cast<size_t>(l * l)), QR(static_cast<size_t>(a * l));
  base::gemm(true, false, l, l, a, T(1), Q.data(), a, Q.data(), a, T(0), QtQ.data(), l);
  base::gemm(false, false, a, l, l, T(1), Q.data(), a, R.data(), l, T(0), QR.data(), a);
  double o = 0, r = 0, norm = 0;
  for (lapack_int j = 0; j < l; ++j)
    for (lapack_int i = 0; i < l; ++i) {
      const double e = double(QtQ[i + j * l]) - (i == j ? 1.0 : 0.0);
      o += e * e;
    }
  for (size_t e = 0; e < QR.size(); ++e) {
    const double d = double(QR[e]) - double(A[e]);
    r += d * d;
    norm += double(A[e]) * double(A[e]);
  }
  out.orthogonality = std::sqrt(o);
  out.residual = std::sqrt(r / norm);
  return out;
}

/// A matrix of condition kappa (testing::conditioned_values), drawn from `seed`.
template <typename T>
std::vector<T> with_condition(index_t a, index_t l, double kappa, std::uint64_t seed) {
  Rng rng = Rng::stream(seed, 5);
  return testing::conditioned_values<T>(a, l, kappa, rng);
}

template <typename T>
class CholeskyQr2 : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CholeskyQr2, Precisions);

TYPED_TEST(CholeskyQr2, AcceptedFactorsAreAccurateAndTheRangeIsAccepted) {
  using T = TypeParam;
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const index_t a = 120, l = 16;
  int accepted = 0, refused = 0;
  for (double kappa : {1.0, 1e2, 1e3, 1e4, 1e6, 1e8, 1e10, 1e12, 1e15})
    for (std::uint64_t seed : {1, 2, 3}) {
      const Result r = cholesky_qr2(with_condition<T>(a, l, kappa, seed), a, l);
      SCOPED_TRACE("kappa " + std::to_string(kappa));
      if (kappa <= 1e-2 / std::sqrt(u)) {
        EXPECT_TRUE(r.accepted);
      }
      if (r.accepted) {
        ++accepted;
        // Orthogonality and backward error of Householder QR's order: O(l u) and O(a l u).
        EXPECT_LE(r.orthogonality, 10 * double(l) * u);
        EXPECT_LE(r.residual, 10 * double(l) * u);
      } else {
        ++refused;
      }
    }
  // The sweep crosses the limit: both outcomes occur.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

TEST(CholeskyQr2Rule, RefusesFailedFactorisationsAndNaN) {
  EXPECT_TRUE(cholesky_qr::accepted(0, 0, 0.0));
  EXPECT_TRUE(cholesky_qr::accepted(0, 0, cholesky_qr::kMaxFirstPassDeviation));
  EXPECT_FALSE(cholesky_qr::accepted(3, 0, 0.0));
  EXPECT_FALSE(cholesky_qr::accepted(0, 1, 0.0));
  EXPECT_FALSE(cholesky_qr::accepted(0, 0, 0.51));
  EXPECT_FALSE(cholesky_qr::accepted(0, 0, std::nan("")));
}

}  // namespace
}  // namespace dcalign
