// The block code of the fused polar kernel (src/base/polar_block.hpp), run through
// polar::SerialBlock: the same function that kernels/polar_fused.cu runs in one CUDA thread block
// per matrix. Checked against independent references: A A^{-1} = I for the Gauss-Jordan
// inverse, and the CPU backend's own Newton phase (LAPACK or its own inverses) step for step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/polar_block.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/random.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

/// A matrix of condition kappa (testing::conditioned_values), drawn from `seed`.
template <typename T>
std::vector<T> conditioned(index_t n, double kappa, std::uint64_t seed) {
  Rng rng = Rng::stream(seed, 3);
  return testing::conditioned_values<T>(n, n, kappa, rng);
}

/// max_ij |(A B - I)_ij|, in double.
template <typename T>
double identity_error(const std::vector<T>& A, const std::vector<T>& B, index_t n) {
  double worst = 0;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) {
      double v = i == j ? -1.0 : 0.0;
      for (index_t k = 0; k < n; ++k) v += double(A[i + k * n]) * double(B[k + j * n]);
      worst = std::max(worst, std::abs(v));
    }
  return worst;
}

template <typename T>
bool invert(std::vector<T>& A, index_t n) {
  polar::SerialBlock b;
  std::vector<T> column(static_cast<size_t>(n));
  std::vector<int> swaps(static_cast<size_t>(n));
  return polar::gauss_jordan_inverse(b, A.data(), static_cast<int>(n), column.data(), swaps.data());
}

template <typename T>
class PolarBlock : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(PolarBlock, Precisions);

// A A^{-1} = I to n eps kappa (the backward error of Gauss-Jordan with partial pivoting is of
// LU's order; a factor 4 for the growth these matrices show).
TYPED_TEST(PolarBlock, GaussJordanInverts) {
  using T = TypeParam;
  const double eps = std::numeric_limits<T>::epsilon();
  for (index_t n : {1, 2, 5, 17, 50})
    for (double kappa : {1.0, 1e3}) {
      const std::vector<T> A = conditioned<T>(n, kappa, 10 + n);
      std::vector<T> inv = A;
      ASSERT_TRUE(invert(inv, n));
      EXPECT_LE(identity_error(A, inv, n), 4 * double(n) * eps * kappa) << n << " " << kappa;
    }
}

// Pivoting: a permutation matrix (zeros on the diagonal) has its transpose as inverse, exactly.
TYPED_TEST(PolarBlock, GaussJordanPivotsAPermutation) {
  using T = TypeParam;
  const index_t n = 7;
  std::vector<T> P(static_cast<size_t>(n * n), T(0));
  for (index_t j = 0; j < n; ++j) P[static_cast<size_t>((j + 3) % n + j * n)] = T(1);
  std::vector<T> inv = P;
  ASSERT_TRUE(invert(inv, n));
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) EXPECT_EQ(inv[i + j * n], P[j + i * n]) << i << " " << j;
}

// An exactly singular matrix (a zero column) is reported, as LAPACK's getrf reports it.
TYPED_TEST(PolarBlock, GaussJordanReportsAZeroPivot) {
  using T = TypeParam;
  const index_t n = 6;
  std::vector<T> A = conditioned<T>(n, 10.0, 4);
  for (index_t i = 0; i < n; ++i) A[i + 2 * n] = T(0);
  EXPECT_FALSE(invert(A, n));
}

// The whole Newton phase, against the CPU backend's polar_newton_steps from the same start:
// the same decisions (steps, flags, the polish's step count) and the same X to rounding, over
// well and badly conditioned matrices; and after the Newton-Schulz polish that count asks for,
// an orthogonal X.
TYPED_TEST(PolarBlock, NewtonPhaseMatchesTheCpuBackend) {
  using T = TypeParam;
  constexpr bool single = std::is_same_v<T, float>;
  const double eps = std::numeric_limits<T>::epsilon();
  auto backend = make_backend(Device::cpu, BackendOptions{1, 0, false});
  Primitives<T>& p = backend->template primitives<T>();
  const index_t n = 24;
  const std::vector<double> kappas = single ? std::vector<double>{1.0, 30.0, 1e3, 1e5}
                                            : std::vector<double>{1.0, 30.0, 1e3, 1e6, 1e10};
  const index_t c = static_cast<index_t>(kappas.size());
  std::vector<T> M;
  for (index_t k = 0; k < c; ++k) {
    const std::vector<T> m = conditioned<T>(n, kappas[k], 100 + k);
    M.insert(M.end(), m.begin(), m.end());
  }
  const double u = eps / 2;
  const double tolerance = std::sqrt(2.0 * std::sqrt(u / 1.5)) / std::sqrt(double(n));
  Buffer<T> m = p.allocate(c * n * n), x = p.allocate(c * n * n), y = p.allocate(c * n * n);
  Buffer<T> s = p.allocate(c * polar::kStateSize);
  p.to_device(M.data(), m.data(), c * n * n);
  p.polar_start(StackView<const T>(m.data(), c, n, n), false, x.stack(c, n, n), s.data(), 0.0);
  std::vector<T> X(x.data(), x.data() + c * n * n), S(s.data(), s.data() + c * polar::kStateSize);
  p.polar_newton_steps(x.stack(c, n, n), y.stack(c, n, n), s.data(), 100, tolerance);

  polar::SerialBlock b;
  std::vector<T> Y(static_cast<size_t>(n * n)), column(static_cast<size_t>(n));
  std::vector<int> swaps(static_cast<size_t>(n));
  for (index_t k = 0; k < c; ++k) {
    T* xk = X.data() + k * n * n;
    T* sk = S.data() + k * polar::kStateSize;
    const T* ref_state = s.data() + k * polar::kStateSize;
    const bool active = polar::newton_phase(b, xk, Y.data(), sk, static_cast<int>(n), 100,
                                            tolerance, column.data(), swaps.data());
    EXPECT_FALSE(active) << "kappa " << kappas[k];
    EXPECT_EQ(polar::flags(sk), polar::flags(ref_state)) << "kappa " << kappas[k];
    EXPECT_EQ(sk[polar::kIterations], ref_state[polar::kIterations]) << "kappa " << kappas[k];
    EXPECT_EQ(sk[polar::kSchulz], ref_state[polar::kSchulz]) << "kappa " << kappas[k];
    // X agrees to the rounding of the inverses, amplified by the condition of the first steps.
    double diff = 0, norm = 0;
    for (index_t e = 0; e < n * n; ++e) {
      const double d = double(xk[e]) - double(x.data()[k * n * n + e]);
      diff += d * d;
      norm += double(xk[e]) * double(xk[e]);
    }
    EXPECT_LE(std::sqrt(diff / norm), 100 * double(n) * eps * std::sqrt(kappas[k]))
        << "kappa " << kappas[k];
    // The polish: X <- X (3I - X^T X) / 2, as many steps as the state asks for.
    std::vector<T> G(xk, xk + n * n), H(static_cast<size_t>(n * n));
    for (int step = 0; step < static_cast<int>(sk[polar::kSchulz]); ++step) {
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < n; ++i) {
          double g = 0;  // (G^T G)(i, j)
          for (index_t r = 0; r < n; ++r) g += double(G[r + i * n]) * double(G[r + j * n]);
          H[i + j * n] = static_cast<T>((i == j ? 1.5 : 0.0) - 0.5 * g);
        }
      std::vector<T> next(static_cast<size_t>(n * n));
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < n; ++i) {
          double v = 0;
          for (index_t r = 0; r < n; ++r) v += double(G[i + r * n]) * double(H[r + j * n]);
          next[i + j * n] = static_cast<T>(v);
        }
      G = next;
    }
    std::vector<T> Gt(static_cast<size_t>(n * n));
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < n; ++i) Gt[i + j * n] = G[j + i * n];
    EXPECT_LE(identity_error(Gt, G, n), 20 * double(n) * eps) << "kappa " << kappas[k];

    // The block's own polish (what the fused kernel runs after the Newton phase): the count of
    // polar::polish_steps, the same orthogonality, and the reference's result to the rounding
    // of its steps (each adds about u per entry in its own order of operations; a polish step
    // keeps the difference's skew part and halves nothing, so n eps per step bounds it).
    ASSERT_EQ(polar::polish_steps(sk), static_cast<int>(sk[polar::kSchulz]));
    std::vector<T> Xb(xk, xk + n * n), D(static_cast<size_t>(n * n)),
        out(static_cast<size_t>(n * n));
    polar::schulz_phase(b, Xb.data(), D.data(), out.data(), static_cast<int>(n),
                        polar::polish_steps(sk));
    std::vector<T> outt(static_cast<size_t>(n * n));
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < n; ++i) outt[i + j * n] = out[j + i * n];
    EXPECT_LE(identity_error(outt, out, n), 20 * double(n) * eps) << "kappa " << kappas[k];
    double worst = 0;
    for (index_t e = 0; e < n * n; ++e)
      worst = std::max(worst, std::abs(double(out[e]) - double(G[e])));
    EXPECT_LE(worst, double(n) * eps * sk[polar::kSchulz]) << "kappa " << kappas[k];
  }
}

// The polish of polar_block.hpp by itself: from a matrix orthogonal only to about 1e-2 (an
// orthogonal Q plus a perturbation), the steps of polar::schulz_steps reach orthogonality to
// 20 n eps and stay within the perturbation's size of Q (Newton-Schulz converges to the polar
// factor of its start, which is within ||E|| of Q); one step maps an error e to about 1.5 e^2.
// A failed or unconverged state asks for one step.
TYPED_TEST(PolarBlock, SchulzPhaseOrthogonalises) {
  using T = TypeParam;
  const double eps = std::numeric_limits<T>::epsilon();
  const index_t n = 33;
  Rng rng = Rng::stream(77, 5);
  const std::vector<T> Q = testing::conditioned_values<T>(n, n, 1.0, rng);  // orthogonal
  std::vector<T> X = Q;
  for (auto& v : X) v = static_cast<T>(double(v) + 1e-3 * rng.normal());
  std::vector<T> st(polar::kStateSize, T(0));
  polar::set_flag(st.data(), polar::kConverged);
  const int steps = polar::schulz_steps<T>(0.05);
  st[polar::kSchulz] = static_cast<T>(steps);
  ASSERT_EQ(polar::polish_steps(st.data()), steps);
  polar::SerialBlock b;
  std::vector<T> D(static_cast<size_t>(n * n)), out(static_cast<size_t>(n * n));
  std::vector<T> X1 = X;
  polar::schulz_phase(b, X1.data(), D.data(), out.data(), static_cast<int>(n), 1);
  std::vector<T> t(static_cast<size_t>(n * n));
  auto orth = [&](const std::vector<T>& G) {
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < n; ++i) t[i + j * n] = G[j + i * n];
    return identity_error(t, G, n);
  };
  const double e0 = orth(X), e1 = orth(out);
  // quadratic: the error matrix E becomes about -3 E^2 / 4, entrywise at most n max|E|^2
  EXPECT_LE(e1, double(n) * e0 * e0 + 20 * double(n) * eps) << e0;
  polar::schulz_phase(b, X.data(), D.data(), out.data(), static_cast<int>(n), steps);
  EXPECT_LE(orth(out), 20 * double(n) * eps);
  double worst = 0;
  for (index_t e = 0; e < n * n; ++e)
    worst = std::max(worst, std::abs(double(out[e]) - double(Q[e])));
  EXPECT_LE(worst, 0.05);
  EXPECT_GT(worst, 1e-5);  // it is the polar factor of X, not Q itself

  std::vector<T> failed(polar::kStateSize, T(0));
  polar::set_flag(failed.data(), polar::kSingular);
  EXPECT_EQ(polar::polish_steps(failed.data()), 1);
  std::vector<T> running(polar::kStateSize, T(0));
  EXPECT_EQ(polar::polish_steps(running.data()), 1);
}

// A singular start stops with kSingular, as on the CPU backend; a NaN stops as non-finite.
TYPED_TEST(PolarBlock, NewtonPhaseStopsOnSingularAndNonFiniteMatrices) {
  using T = TypeParam;
  const index_t n = 5;
  polar::SerialBlock b;
  std::vector<T> Y(n * n), column(n), st(polar::kStateSize);
  std::vector<int> swaps(n);
  std::vector<T> X = conditioned<T>(n, 10.0, 8);
  for (index_t i = 0; i < n; ++i) X[i + 1 * n] = T(0);
  double fro2 = 0;
  for (T v : X) fro2 += double(v) * double(v);
  polar::start(st.data(), fro2);
  EXPECT_FALSE(polar::newton_phase(b, X.data(), Y.data(), st.data(), int(n), 50, 1e-3,
                                   column.data(), swaps.data()));
  EXPECT_TRUE(polar::flags(st.data()) & polar::kSingular);

  X = conditioned<T>(n, 10.0, 9);
  X[7] = std::numeric_limits<T>::quiet_NaN();
  polar::start(st.data(), 1.0);  // as if the start had not seen it: the step's norms must
  EXPECT_FALSE(polar::newton_phase(b, X.data(), Y.data(), st.data(), int(n), 50, 1e-3,
                                   column.data(), swaps.data()));
  EXPECT_TRUE(polar::flags(st.data()) & polar::kNonFinite);
}

}  // namespace
}  // namespace dcalign
