// The collusion attack and the epsilon-DR ratio (include/dcalign/privacy_attacks.hpp): exact
// recovery for l = m, the error against its closed form as l falls (strictly rising), the
// anchor-rank case a < m, DP noise, the permutation measure, the affine attack on NRI-DC's
// centred and permuted releases (exact at l = m where the linear one is not; the projection of
// the raw rows at l < m), the ratios against an explicit projector computed here, the
// down-sampling defence, and bad inputs.
#include "dcalign/privacy_attacks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dcalign/privacy.hpp"
#include "dcalign/random.hpp"
#include "dcalign/user.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::frob;
using testing::frob_diff;
using testing::mul;

// Gauss-Jordan inverse with partial pivoting, independent of the library's SVD.
Matrix<double> inverse(Matrix<double> M) {
  const index_t n = M.rows();
  Matrix<double> I = Matrix<double>::identity(n);
  for (index_t c = 0; c < n; ++c) {
    index_t p = c;
    for (index_t r = c + 1; r < n; ++r)
      if (std::abs(M(r, c)) > std::abs(M(p, c))) p = r;
    for (index_t j = 0; j < n; ++j) {
      std::swap(M(c, j), M(p, j));
      std::swap(I(c, j), I(p, j));
    }
    const double d = M(c, c);
    for (index_t j = 0; j < n; ++j) {
      M(c, j) /= d;
      I(c, j) /= d;
    }
    for (index_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = M(r, c);
      for (index_t j = 0; j < n; ++j) {
        M(r, j) -= f * M(c, j);
        I(r, j) -= f * I(c, j);
      }
    }
  }
  return I;
}

// P = F (F^T F)^{-1} F^T, the orthogonal projector onto span(F) for F of full column rank.
Matrix<double> projector(const Matrix<double>& F) {
  return mul(mul(F, inverse(mul(F, F, true, false))), F, false, true);
}

Matrix<double> columns(const Matrix<double>& M, index_t k) {
  Matrix<double> out(M.rows(), k);
  for (index_t j = 0; j < k; ++j)
    for (index_t i = 0; i < M.rows(); ++i) out(i, j) = M(i, j);
  return out;
}

// X = U diag(s) V^T, n x m, s_k = 0.8^k: a strictly decaying spectrum with every s_k > 0.
struct Instance {
  Matrix<double> X, V;
  std::vector<double> s;
};
Instance decaying(index_t n, index_t m, std::uint64_t seed) {
  Rng rng(seed);
  const Matrix<double> U = columns(random_orthogonal<double>(n, rng), m);
  Instance in;
  in.V = random_orthogonal<double>(m, rng);
  Matrix<double> US(n, m);
  for (index_t k = 0; k < m; ++k) {
    in.s.push_back(std::pow(0.8, static_cast<double>(k)));
    for (index_t i = 0; i < n; ++i) US(i, k) = U(i, k) * in.s.back();
  }
  in.X = mul(US, in.V, false, true);
  return in;
}

template <typename F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no InvalidInput thrown (expected a message naming '" << needle << "')";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Attack, RecoversTheDataExactlyWhenLEqualsMAndTheAnchorHasFullColumnRank) {
  const index_t n = 30, m = 20, a = 40;
  Rng rng(11);
  const Matrix<double> X = random_uniform<double>(n, m, rng);
  const Matrix<double> A = random_uniform<double>(a, m, rng);
  const CollusionAttacker attacker(A);
  EXPECT_EQ(attacker.anchor_rank(), m);
  // An orthogonal F_j (the -Orth conditions) and an invertible non-orthogonal one (uniform E).
  for (const Matrix<double>& F :
       {random_orthogonal<double>(m, rng), random_uniform<double>(m, m, rng)}) {
    const Matrix<double> Fh = attacker.estimate_basis(mul(A, F));
    EXPECT_LE(frob_diff(Fh, F) / frob(F), 1e-10);
    const auto err = reconstruction_error(X, attacker.reconstruct(mul(A, F), mul(X, F)));
    EXPECT_LE(err.relative, 1e-10);
    EXPECT_LE(err.median_row, 1e-10);
    ASSERT_EQ(err.per_row.size(), static_cast<size_t>(n));
    for (double e : err.per_row) EXPECT_LE(e, 1e-10);
  }
}

TEST(Attack, ErrorRisesStrictlyAsLFallsAndEqualsTheDiscardedSpectrum) {
  const index_t n = 40, m = 16, a = 50;
  const Instance in = decaying(n, m, 21);
  Rng rng(22);
  const Matrix<double> A = random_uniform<double>(a, m, rng);
  const CollusionAttacker attacker(A);
  double total = 0;
  for (double v : in.s) total += v * v;
  double previous = -1;
  for (index_t l = m; l >= 1; --l) {
    // F_j = V_l E_j: the user's top-l right singular vectors, Haar-mixed (SameSpan-Orth).
    Rng mix(100 + static_cast<std::uint64_t>(l));
    const Matrix<double> F =
        mul(top_right_singular_vectors(in.X, l, false), random_orthogonal<double>(l, mix));
    const auto err = reconstruction_error(in.X, attacker.reconstruct(mul(A, F), mul(in.X, F)));
    double tail = 0;
    for (index_t k = l; k < m; ++k) tail += in.s[static_cast<size_t>(k)] * in.s[k];
    EXPECT_NEAR(err.relative, std::sqrt(tail / total), 1e-10) << "l = " << l;
    EXPECT_GT(err.relative, previous) << "l = " << l;
    previous = err.relative;
  }
  EXPECT_GT(previous, 0.5);  // l = 1 keeps 0.36 of the energy
}

TEST(Attack, AnAnchorWithFewerRowsThanFeaturesRevealsOnlyItsRowSpace) {
  const index_t n = 25, m = 20, a = 10;
  Rng rng(31);
  const Matrix<double> X = random_uniform<double>(n, m, rng);
  const Matrix<double> A = random_uniform<double>(a, m, rng);
  const CollusionAttacker attacker(A);
  EXPECT_EQ(attacker.anchor_rank(), a);
  const Matrix<double> F = random_orthogonal<double>(m, rng);
  // Minimum norm: F^ = P_A F with P_A = A^T (A A^T)^{-1} A the projector onto A's row space;
  // for orthogonal F then X^ = X F (P_A F)^+ = X P_A.
  const Matrix<double> PA = mul(mul(A, inverse(mul(A, A, false, true)), true, false), A);
  EXPECT_LE(frob_diff(attacker.estimate_basis(mul(A, F)), mul(PA, F)), 1e-10);
  const Matrix<double> Xh = attacker.reconstruct(mul(A, F), mul(X, F));
  EXPECT_LE(frob_diff(Xh, mul(X, PA)) / frob(X), 1e-10);
  const double err = reconstruction_error(X, Xh).relative;
  EXPECT_GT(err, 0.05);
  EXPECT_NEAR(err, frob_diff(X, mul(X, PA)) / frob(X), 1e-10);
}

TEST(Attack, DpNoiseOnTheReleasedDataIncreasesTheError) {
  const index_t n = 40, m = 16, a = 50, l = 8;
  const Instance in = decaying(n, m, 41);
  Rng rng(42);
  const Matrix<double> A = random_uniform<double>(a, m, rng);
  const CollusionAttacker attacker(A);
  Rng mix(43);
  const Matrix<double> F =
      mul(top_right_singular_vectors(in.X, l, false), random_orthogonal<double>(l, mix));
  const Matrix<double> clean = mul(in.X, F);
  Matrix<double> W(n, l);
  add_gaussian_noise(W, 1.0, 44);
  const double base = reconstruction_error(in.X, attacker.reconstruct(mul(A, F), clean)).relative;
  double previous = -1;
  for (double sigma : {0.0, 1e-3, 1e-2, 1e-1, 1.0}) {
    Matrix<double> released = clean;
    add_gaussian_noise(released, sigma, 44);
    const double err =
        reconstruction_error(in.X, attacker.reconstruct(mul(A, F), released)).relative;
    // X^ - X = -X (I - F F^T) + sigma W F^T, orthogonal row by row (F orthonormal).
    const double want =
        std::sqrt(base * base + sigma * sigma * frob(W) * frob(W) / (frob(in.X) * frob(in.X)));
    EXPECT_NEAR(err, want, 1e-10) << "sigma = " << sigma;
    EXPECT_GT(err, previous) << "sigma = " << sigma;
    previous = err;
  }
  EXPECT_GT(previous, 2 * base);
}

TEST(Attack, PermutedRowsAreMatchedAsASet) {
  const index_t n = 30, m = 20, a = 40;
  Rng rng(51);
  const Matrix<double> X = random_uniform<double>(n, m, rng);
  const Matrix<double> A = random_uniform<double>(a, m, rng);
  const CollusionAttacker attacker(A);
  std::vector<index_t> origin(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) origin[static_cast<size_t>(i)] = (7 * i + 3) % n;  // 7 is a unit
  const Matrix<double> PX = select_rows(X, origin);
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < m; ++j) ASSERT_EQ(PX(i, j), X(origin[static_cast<size_t>(i)], j));
  // l = m: every row is recovered, so every row is identified.
  const Matrix<double> F = random_orthogonal<double>(m, rng);
  const auto full = match_rows(X, attacker.reconstruct(mul(A, F), mul(PX, F)), origin);
  EXPECT_EQ(full.identified_fraction, 1.0);
  EXPECT_EQ(full.nearest, origin);
  EXPECT_LE(full.median_nearest_error, 1e-10);
  // l = 2: the fraction equals a nearest-row count done here.
  const Matrix<double> F2 = columns(F, 2);
  const Matrix<double> Xh = attacker.reconstruct(mul(A, F2), mul(PX, F2));
  const auto part = match_rows(X, Xh, origin);
  index_t hits = 0;
  for (index_t k = 0; k < n; ++k) {
    index_t best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (index_t i = 0; i < n; ++i) {
      double d = 0;
      for (index_t j = 0; j < m; ++j) d += (Xh(k, j) - X(i, j)) * (Xh(k, j) - X(i, j));
      if (d < best_d) best_d = d, best = i;
    }
    EXPECT_EQ(part.nearest[static_cast<size_t>(k)], best);
    EXPECT_NEAR(part.nearest_error[static_cast<size_t>(k)],
                std::sqrt(best_d) / frob(select_rows(X, {best})), 1e-12);
    if (best == origin[static_cast<size_t>(k)]) ++hits;
  }
  EXPECT_DOUBLE_EQ(part.identified_fraction, static_cast<double>(hits) / n);
  EXPECT_LT(part.identified_fraction, 1.0);
}

// NRI-DC's centred release: A~ = (A - 1 mu) F, X~ = P (X - 1 mu) F with one mu for both.
struct AffineRelease {
  Matrix<double> anchor, data;
};
AffineRelease affine_release(const Matrix<double>& A, const Matrix<double>& X,
                             const std::vector<double>& mu, const Matrix<double>& F,
                             const std::vector<index_t>& origin) {
  const auto centred = [&](const Matrix<double>& M) {
    Matrix<double> out = M;
    for (index_t j = 0; j < M.cols(); ++j)
      for (index_t i = 0; i < M.rows(); ++i) out(i, j) -= mu[static_cast<size_t>(j)];
    return out;
  };
  return {mul(centred(A), F), mul(centred(select_rows(X, origin)), F)};
}

TEST(AffineAttack, RecoversCentredPermutedReleasesExactlyWhereTheLinearAttackCannot) {
  const index_t n = 30, m = 20, a = 40;
  Rng rng(91);
  const Matrix<double> X = random_uniform<double>(n, m, rng);
  const Matrix<double> A = random_normal<double>(a, m, rng);
  std::vector<double> mu(static_cast<size_t>(m));
  for (index_t j = 0; j < m; ++j) mu[static_cast<size_t>(j)] = 0.5 + 0.1 * rng.normal();
  std::vector<index_t> origin(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) origin[static_cast<size_t>(i)] = (7 * i + 3) % n;
  const Matrix<double> PX = select_rows(X, origin);  // the true rows in the released order
  const CollusionAttacker affine(A, ReleaseMap::affine), linear(A);
  EXPECT_EQ(affine.map(), ReleaseMap::affine);
  EXPECT_EQ(affine.features(), m);
  EXPECT_EQ(affine.design_columns(), m + 1);
  EXPECT_EQ(affine.anchor_rank(), m + 1);  // [A, 1] has full column rank: a >= m + 1
  EXPECT_EQ(linear.design_columns(), m);
  for (const Matrix<double>& F :
       {random_orthogonal<double>(m, rng), random_uniform<double>(m, m, rng)}) {
    const AffineRelease r = affine_release(A, X, mu, F, origin);
    const auto est = affine.estimate(r.anchor);
    EXPECT_LE(frob_diff(est.basis, F) / frob(F), 1e-10);
    ASSERT_EQ(est.shift.size(), static_cast<size_t>(m));
    for (index_t q = 0; q < m; ++q) {
      double b = 0;  // b = -mu F
      for (index_t j = 0; j < m; ++j) b -= mu[static_cast<size_t>(j)] * F(j, q);
      EXPECT_NEAR(est.shift[static_cast<size_t>(q)], b, 1e-10 * (1 + std::abs(b)));
    }
    const Matrix<double> Xh = affine.reconstruct(r.anchor, r.data);
    const auto err = reconstruction_error(PX, Xh);
    EXPECT_LE(err.relative, 1e-10);
    for (double e : err.per_row) EXPECT_LE(e, 1e-10);
    // The attacker pairs every reconstructed row with its true row.
    EXPECT_EQ(match_rows(X, Xh, origin).identified_fraction, 1.0);
    // The linear attack on the same release: A^+ A~ = F - A^+ 1 mu F is biased.
    const double linear_error =
        reconstruction_error(PX, linear.reconstruct(r.anchor, r.data)).relative;
    EXPECT_GT(linear_error, 1e-2);
  }
  // The affine attack on a linear release (mu = 0) is exact too, with b^ = 0.
  const Matrix<double> F = random_orthogonal<double>(m, rng);
  const auto est = affine.estimate(mul(A, F));
  for (double b : est.shift) EXPECT_LE(std::abs(b), 1e-10);
  EXPECT_LE(reconstruction_error(X, affine.reconstruct(mul(A, F), mul(X, F))).relative, 1e-10);
  for (double b : linear.estimate(mul(A, F)).shift) EXPECT_EQ(b, 0.0);
  // a = m: [A, 1] is m x (m + 1), rank m < m + 1, so the map is not identified.
  const CollusionAttacker square(random_normal<double>(m, m, rng), ReleaseMap::affine);
  EXPECT_EQ(square.anchor_rank(), m);
  EXPECT_LT(square.anchor_rank(), square.design_columns());
}

TEST(AffineAttack, WithLBelowMRecoversTheProjectionOfTheRawRows) {
  const index_t n = 40, m = 16, a = 50, l = 6;
  const Instance in = decaying(n, m, 93);
  Rng rng(94);
  Matrix<double> X = in.X;  // shifted away from the origin, so that centring matters
  std::vector<double> mu(static_cast<size_t>(m), 0.0);
  for (index_t j = 0; j < m; ++j) {
    const double shift = 0.3 * rng.normal();
    for (index_t i = 0; i < n; ++i) X(i, j) += shift;
    for (index_t i = 0; i < n; ++i) mu[static_cast<size_t>(j)] += X(i, j) / n;
  }
  const Matrix<double> F = top_right_singular_vectors(X, l, true);  // the PCA basis
  std::vector<index_t> origin(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) origin[static_cast<size_t>(i)] = (3 * i + 5) % n;
  const Matrix<double> A = random_normal<double>(a, m, rng);
  const AffineRelease r = affine_release(A, X, mu, F, origin);
  const CollusionAttacker attacker(A, ReleaseMap::affine);
  const Matrix<double> PX = select_rows(X, origin);
  const auto err = reconstruction_error(PX, attacker.reconstruct(r.anchor, r.data));
  // X^ = P X F F^+: each row's error is the epsilon-DR ratio of the raw row.
  const std::vector<double> ratios = dr_ratios(PX, F);
  double largest = 0;
  for (index_t k = 0; k < n; ++k) {
    EXPECT_NEAR(err.per_row[static_cast<size_t>(k)], ratios[static_cast<size_t>(k)], 1e-10);
    largest = std::max(largest, ratios[static_cast<size_t>(k)]);
  }
  EXPECT_GT(largest, 0.05);
}

TEST(AttackDrRatio, MatchesAnExplicitProjector) {
  const index_t n = 25, m = 12, l = 5;
  Rng rng(61);
  Matrix<double> X = random_normal<double>(n, m, rng);
  const Matrix<double> F = random_uniform<double>(m, l, rng);  // not orthonormal
  const Matrix<double> P = projector(F);
  for (index_t j = 0; j < m; ++j) X(4, j) = 0;  // a zero row: ratio 0 by the documented rule
  const std::vector<double> r = dr_ratios(X, F);
  ASSERT_EQ(r.size(), static_cast<size_t>(n));
  const Matrix<double> R = mul(X, P);
  for (index_t i = 0; i < n; ++i) {
    double res = 0, base = 0;
    for (index_t j = 0; j < m; ++j) {
      res += (X(i, j) - R(i, j)) * (X(i, j) - R(i, j));
      base += X(i, j) * X(i, j);
    }
    const double want = base > 0 ? std::sqrt(res / base) : 0.0;
    EXPECT_NEAR(r[static_cast<size_t>(i)], want, 1e-12) << "row " << i;
    EXPECT_FALSE(std::isnan(r[static_cast<size_t>(i)]));
  }
  EXPECT_EQ(r[4], 0.0);
  // The attacker's F^ = A^+ A F gives the same ratios when the anchor has full column rank.
  const Matrix<double> A = random_uniform<double>(30, m, rng);
  const std::vector<double> rh = dr_ratios(X, CollusionAttacker(A).estimate_basis(mul(A, F)));
  for (index_t i = 0; i < n; ++i) EXPECT_NEAR(rh[i], r[i], 1e-10);
}

TEST(AttackDrRatio, TheDefenceDropsExactlyTheRowsBelowTheThreshold) {
  const index_t n = 20, m = 10, l = 3;
  Rng rng(71);
  Matrix<double> X = random_normal<double>(n, m, rng);
  const Matrix<double> F = random_normal<double>(m, l, rng);
  // Rows 3 and 7 inside span(F) (ratio ~ 0), row 11 zero (ratio 0).
  for (index_t j = 0; j < m; ++j) {
    X(3, j) = F(j, 0) - 2 * F(j, 2);
    X(7, j) = 0.5 * F(j, 1);
    X(11, j) = 0;
  }
  const auto s = dr_privacy(X, F, 1e-6);
  std::vector<index_t> want;
  for (index_t i = 0; i < n; ++i)
    if (i != 3 && i != 7 && i != 11) want.push_back(i);
  EXPECT_EQ(s.kept, want);
  EXPECT_EQ(s.below, 3);
  EXPECT_DOUBLE_EQ(s.fraction_below, 3.0 / n);
  EXPECT_LT(s.min, 1e-10);
  // At a threshold between ratios: kept is exactly {i : r_i >= epsilon}, and the kept rows of X
  // are what select_rows returns.
  const double eps = 0.8;
  const auto t = dr_privacy(X, F, eps);
  index_t below = 0;
  for (index_t i = 0; i < n; ++i) {
    const bool kept = std::find(t.kept.begin(), t.kept.end(), i) != t.kept.end();
    EXPECT_EQ(kept, t.ratios[static_cast<size_t>(i)] >= eps) << "row " << i;
    if (!kept) ++below;
  }
  EXPECT_EQ(t.below, below);
  EXPECT_GT(below, 3);
  EXPECT_LT(below, n);
  EXPECT_EQ(dr_downsample({0.1, 0.5, 0.5, 0.9}, 0.5), (std::vector<index_t>{1, 2, 3}));
  const Matrix<double> Xk = select_rows(X, t.kept);
  ASSERT_EQ(Xk.rows(), static_cast<index_t>(t.kept.size()));
  for (index_t j = 0; j < m; ++j) EXPECT_EQ(Xk(0, j), X(t.kept[0], j));
}

TEST(Attack, BadInputsFailNamingTheArgument) {
  Rng rng(81);
  const Matrix<double> A = random_uniform<double>(8, 4, rng);
  const Matrix<double> F = random_uniform<double>(4, 2, rng);
  const Matrix<double> X = random_uniform<double>(5, 4, rng);
  Matrix<double> nan_anchor = A;
  nan_anchor(2, 1) = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { CollusionAttacker{nan_anchor}; }, "anchor A");
  expect_invalid([&] { CollusionAttacker{Matrix<double>()}; }, "anchor A");
  expect_invalid([&] { CollusionAttacker{nan_anchor, ReleaseMap::affine}; }, "anchor A");
  expect_invalid([&] { CollusionAttacker(A, ReleaseMap::affine).reconstruct(F, F); },
                 "released anchor A_j");
  const CollusionAttacker attacker(A);
  expect_invalid([&] { attacker.estimate_basis(Matrix<double>(7, 2)); }, "released anchor A_j");
  expect_invalid([&] { attacker.reconstruct(mul(A, F), Matrix<double>(5, 3)); },
                 "released data X~_j");
  Matrix<double> nan_released = mul(X, F);
  nan_released(0, 0) = std::numeric_limits<double>::infinity();
  expect_invalid([&] { attacker.reconstruct(mul(A, F), nan_released); }, "released data X~_j");
  expect_invalid([&] { reconstruction_error(X, Matrix<double>(5, 3)); }, "reconstruction X^");
  expect_invalid([&] { dr_ratios(X, Matrix<double>(3, 2)); }, "basis F");
  Matrix<double> nan_x = X;
  nan_x(1, 1) = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { dr_ratios(nan_x, F); }, "data X");
  for (double eps : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN()})
    expect_invalid([&] { dr_privacy(X, F, eps); }, "epsilon");
  expect_invalid(
      [&] {
        dr_downsample({0.5, std::numeric_limits<double>::quiet_NaN()}, 0.1);
      },
      "ratio 1");
  expect_invalid(
      [&] {
        select_rows(X, {0, 5});
      },
      "privacy attack: take_rows: row index 5 at position 1");
  expect_invalid([&] { match_rows(X, X, {0, 1, 2}); }, "origin");
  expect_invalid([&] { match_rows(X, X, {0, 1, 2, 3, 9}); }, "origin[4]");
  expect_invalid([&] { pseudo_inverse(Matrix<double>(0, 3), "M"); }, "M");
}

}  // namespace
}  // namespace dcalign
