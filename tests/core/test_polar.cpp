// The batched polar factor (src/core/polar.cpp) on the CPU backend: the iterative path against
// the SVD path and against the exact factor U V^T of matrices built as U diag(s) V^T, over
// orders on both sides of cuSOLVER's 32 x 32 batched-SVD limit, condition numbers up to 1e12
// (double) and 1e5 (float), clustered, repeated and zero singular values; and the per-matrix
// scalar logic of base/polar_scalar.hpp that the CUDA kernels run as well.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/polar_scalar.hpp"
#include "dcalign/align.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/random.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::eps;

// One CPU backend for the whole suite (the primitives are references into it).
Backend& cpu() {
  static const std::shared_ptr<Backend> b = make_backend(Device::cpu);
  return *b;
}

// A batch of c matrices M_k = U_k diag(s_k) V_k^T (Haar U_k, V_k) and their exact polar
// factors U_k V_k^T, all in double, built with the backend's own GEMM (fast for l = 1000).
struct Batch {
  Stack<double> M, exact;
};

// Singular values 1 .. 1/kappa, geometrically spaced, in a per-matrix random order.
std::vector<double> geometric(index_t l, double kappa) {
  std::vector<double> s(static_cast<size_t>(l));
  for (index_t j = 0; j < l; ++j)
    s[j] = l == 1 ? 1.0 : std::pow(kappa, -static_cast<double>(j) / static_cast<double>(l - 1));
  return s;
}

Batch make_batch(index_t c, index_t l, const std::vector<double>& s, std::uint64_t seed) {
  auto& p = cpu().f64();
  Batch b{Stack<double>(c, l, l), Stack<double>(c, l, l)};
  for (index_t k = 0; k < c; ++k) {
    Rng rng = Rng::stream(seed, static_cast<std::uint64_t>(k));
    Matrix<double> U = random_orthogonal<double>(l, rng), V = random_orthogonal<double>(l, rng);
    Matrix<double> US = U;
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < l; ++i) US(i, j) *= s[j];
    p.gemm(Op::none, Op::trans, 1.0, US.view(), V.view(), 0.0, b.M[k]);
    p.gemm(Op::none, Op::trans, 1.0, U.view(), V.view(), 0.0, b.exact[k]);
  }
  return b;
}

template <typename T, typename U>
Stack<T> cast(const Stack<U>& s) {
  Stack<T> out(s.count(), s.rows(), s.cols());
  for (index_t i = 0; i < s.size(); ++i) out.data()[i] = static_cast<T>(s.data()[i]);
  return out;
}

// max_k ||A_k - B_k||_F / ||B_k||_F.
template <typename T, typename U>
double max_rel_diff(const Stack<T>& A, const Stack<U>& B) {
  double worst = 0;
  for (index_t k = 0; k < A.count(); ++k) {
    double d = 0, n = 0;
    for (index_t i = 0; i < A.stride(); ++i) {
      const double b = static_cast<double>(B.data()[k * B.stride() + i]);
      const double e = static_cast<double>(A.data()[k * A.stride() + i]) - b;
      d += e * e;
      n += b * b;
    }
    worst = std::max(worst, std::sqrt(d / n));
  }
  return worst;
}

// max_k ||G_k^T G_k - I||_F of the stored G, evaluated in double so that the measurement adds
// no float rounding of its own.
template <typename T>
double max_orthogonality(Primitives<T>&, const Stack<T>& G) {
  const Stack<double> Gd = cast<double>(G);
  double worst = 0;
  for (double e : cpu().f64().orthogonality_errors(Gd.view())) worst = std::max(worst, e);
  return worst;
}

template <typename T>
PolarInfo<T> run(const Stack<T>& M, Stack<T>& G, PolarMethod method, double fallback = -1,
                 bool promote = true) {
  auto& p = cpu().primitives<T>();
  PolarOptions o;
  o.method = method;
  o.fallback_ratio = fallback;
  o.promote = promote;
  return polar_factor(p, M.view(), false, G.view(), o);
}

template <typename T>
class Polar : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Polar, Precisions);

// Tolerances: agreement with the SVD path within 1e-10 (double) / 1e-4 (float) relative for
// kappa up to 1e6 / 1e3 (the forward error of any backward-stable polar algorithm is about
// kappa u, 1.1e-10 / 6e-5 there); orthogonality 1e-12 / 1e-5 (a few hundred u, since the
// Newton-Schulz polish leaves O(l u) and the Frobenius norm adds sqrt(l)).
template <typename T>
double agreement_tolerance() {
  return std::is_same_v<T, double> ? 1e-10 : 1e-4;
}
template <typename T>
double orthogonality_tolerance() {
  return std::is_same_v<T, double> ? 1e-12 : 1e-5;
}

TYPED_TEST(Polar, AgreesWithSvdPathAcrossOrdersAndConditions) {
  using T = TypeParam;
  auto& p = cpu().primitives<T>();
  const double kmax = std::is_same_v<T, double> ? 1e6 : 1e3;
  struct Case {
    index_t l, c;
  };
  const Case cases[] = {{1, 7},  {2, 7},  {3, 7},   {16, 7},  {31, 7},  {32, 7},
                        {33, 7}, {64, 7}, {128, 3}, {500, 1}, {1000, 1}};
  for (const auto& cs : cases)
    for (double kappa : {1.0, 1e1, 1e3, kmax}) {
      if (kappa > kmax) continue;
      SCOPED_TRACE("l = " + std::to_string(cs.l) + ", kappa = " + std::to_string(kappa));
      const Batch b = make_batch(cs.c, cs.l, geometric(cs.l, kappa), 11 + cs.l);
      const Stack<T> M = cast<T>(b.M);
      Stack<T> Gi(cs.c, cs.l, cs.l), Gs(cs.c, cs.l, cs.l);
      const PolarInfo<T> info = run(M, Gi, PolarMethod::iterative, 0.0);
      EXPECT_EQ(run(M, Gs, PolarMethod::svd).schulz_steps, 0);
      EXPECT_FALSE(info.used_svd);
      EXPECT_LE(max_rel_diff(Gi, Gs), agreement_tolerance<T>());
      EXPECT_LE(max_orthogonality(p, Gi), orthogonality_tolerance<T>());
      // Against the exact factor: the first-order bound kappa u, times sqrt(l) for the rounding
      // of l-term inner products.
      EXPECT_LE(max_rel_diff(Gi, b.exact), 20 * kappa * eps<T>() * std::sqrt(double(cs.l)));
      // Byers-Xu: at most 9 steps with optimal scaling up to kappa = 1e16; Frobenius scaling
      // and the switch-off near convergence may cost one or two more.
      EXPECT_LE(info.max_iterations, 11);
      // The polish always runs, and from the hand-over bound b <= 0.1 the map
      // b -> 1.5 b^2 + 0.5 b^3 reaches u within 4 steps in float (5.7e-14 < 6e-8) and 5 in
      // double (the fourth leaves 5.7e-14 > 1.1e-16).
      EXPECT_GE(info.schulz_steps, 1);
      EXPECT_LE(info.schulz_steps, (std::is_same_v<T, double> ? 5 : 4));
    }
}

// The SVD path meets the iteration's orthogonality target too: U V^T is only as orthogonal as
// the SVD's U and V (sgesdd: 1.6e-5 at l = 128; cuSOLVER's gesvdjBatched 3.2e-5 at l = 31 on
// the H200 of the first GPU run), so float32's SVD path ends with one Newton-Schulz step.
TYPED_TEST(Polar, SvdPathMeetsTheOrthogonalityTarget) {
  using T = TypeParam;
  auto& p = cpu().primitives<T>();
  struct Case {
    index_t l, c;
  };
  for (const Case cs : {Case{31, 20}, Case{128, 6}, Case{500, 1}})
    for (double kappa : {1.0, 1e3}) {
      SCOPED_TRACE("l = " + std::to_string(cs.l) + ", kappa = " + std::to_string(kappa));
      const Batch b = make_batch(cs.c, cs.l, geometric(cs.l, kappa), 41 + cs.l);
      const Stack<T> M = cast<T>(b.M);
      Stack<T> G(cs.c, cs.l, cs.l);
      const PolarInfo<T> info = run(M, G, PolarMethod::svd);
      EXPECT_TRUE(info.used_svd);
      EXPECT_LE(max_orthogonality(p, G), orthogonality_tolerance<T>());
      EXPECT_LE(max_rel_diff(G, b.exact), 20 * kappa * eps<T>() * std::sqrt(double(cs.l)));
    }
}

TYPED_TEST(Polar, IllConditionedStaysOrthogonal) {
  using T = TypeParam;
  auto& p = cpu().primitives<T>();
  const std::vector<double> kappas = std::is_same_v<T, double>
                                         ? std::vector<double>{1e8, 1e10, 1e12}
                                         : std::vector<double>{1e4, 1e5};
  for (index_t l : {16, 50, 128})
    for (double kappa : kappas) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", kappa = " + std::to_string(kappa));
      const Batch b = make_batch(4, l, geometric(l, kappa), 5 + l);
      const Stack<T> M = cast<T>(b.M);
      Stack<T> G(4, l, l);
      const PolarInfo<T> info = run(M, G, PolarMethod::iterative, 0.0);
      EXPECT_FALSE(info.used_svd) << "no failure: the iteration's own result";
      EXPECT_LE(max_orthogonality(p, G), orthogonality_tolerance<T>());
      // Forward error is intrinsic (kappa u) whatever the algorithm; allow 20 kappa u.
      EXPECT_LE(max_rel_diff(G, b.exact), 20 * kappa * eps<T>());
      EXPECT_LE(info.max_iterations, 12);
      // The bounds it reports bracket the true ratio 1/kappa within the factor l.
      for (index_t k = 0; k < 4; ++k) {
        const double r = static_cast<double>(info.sigma_min[k]) / info.sigma_max[k];
        EXPECT_LE(r, 1.0 / kappa * (1 + 1e-3));
        EXPECT_GE(r, 1.0 / (kappa * static_cast<double>(l)) * (1 - 1e-3));
      }
    }
}

TYPED_TEST(Polar, ManyUsers) {
  using T = TypeParam;
  auto& p = cpu().primitives<T>();
  for (index_t l : {16, 33}) {
    const Batch b = make_batch(1000, l, geometric(l, 1e3), 3);
    const Stack<T> M = cast<T>(b.M);
    Stack<T> Gi(1000, l, l), Gs(1000, l, l);
    run(M, Gi, PolarMethod::iterative);
    run(M, Gs, PolarMethod::svd);
    EXPECT_LE(max_rel_diff(Gi, Gs), agreement_tolerance<T>());
    EXPECT_LE(max_orthogonality(p, Gi), orthogonality_tolerance<T>());
  }
}

TYPED_TEST(Polar, ClusteredAndRepeatedSingularValues) {
  using T = TypeParam;
  const index_t l = 40;
  std::vector<double> repeated(l), clustered(l), one(l, 3.0);
  for (index_t j = 0; j < l; ++j) {
    repeated[j] = j < l / 2 ? 1.0 : 0.25;                // two values, each l/2 times
    clustered[j] = 1.0 + 1e-9 * static_cast<double>(j);  // spread far below the precision
  }
  for (const auto& s : {repeated, clustered, one}) {
    const Batch b = make_batch(5, l, s, 77);
    const Stack<T> M = cast<T>(b.M);
    Stack<T> Gi(5, l, l), Gs(5, l, l);
    run(M, Gi, PolarMethod::iterative);
    run(M, Gs, PolarMethod::svd);
    // The polar factor of a nonsingular matrix is unique even when singular values repeat.
    EXPECT_LE(max_rel_diff(Gi, Gs), agreement_tolerance<T>());
    EXPECT_LE(max_rel_diff(Gi, b.exact), 100 * eps<T>());
  }
}

TYPED_TEST(Polar, InvariancesAndStridedTransposedInput) {
  using T = TypeParam;
  const index_t l = 37, c = 6;
  const Batch b = make_batch(c, l, geometric(l, 100.0), 9);
  const Stack<T> M = cast<T>(b.M);
  Stack<T> G(c, l, l);
  run(M, G, PolarMethod::iterative);
  // Row blocks of a (c l) x l matrix holding M_k^T: the layout of the product W^T Z.
  std::vector<T> tall(static_cast<size_t>(c * l * l));
  for (index_t k = 0; k < c; ++k)
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < l; ++i) tall[(k * l + i) + j * c * l] = M(k, j, i);
  auto& p = cpu().primitives<T>();
  Stack<T> Gt(c, l, l);
  PolarOptions o;
  o.method = PolarMethod::iterative;
  polar_factor(p, StackView<const T>(tall.data(), c, l, l, c * l, l), true, Gt.view(), o);
  EXPECT_LE(max_rel_diff(Gt, G), 10 * l * eps<T>()) << "polar(M^T)^T must equal polar(M)";
  // polar(alpha M) = polar(M) for alpha > 0; an orthogonal matrix is its own polar factor.
  Stack<T> M3 = M, G3(c, l, l), Q = cast<T>(b.exact), GQ(c, l, l);
  for (index_t i = 0; i < M3.size(); ++i) M3.data()[i] *= T(1e3);
  run(M3, G3, PolarMethod::iterative);
  EXPECT_LE(max_rel_diff(G3, G), 10 * l * eps<T>());
  const PolarInfo<T> qi = run(Q, GQ, PolarMethod::iterative);
  EXPECT_LE(max_rel_diff(GQ, Q), 10 * l * eps<T>());
  EXPECT_LE(qi.max_iterations, 3);
}

TYPED_TEST(Polar, SingularAndZeroMatricesGoToTheSvdPath) {
  using T = TypeParam;
  const index_t l = 20;
  std::vector<double> s = geometric(l, 10.0);
  s[l - 1] = 0;  // exactly rank l - 1
  const Batch b = make_batch(3, l, s, 4);
  Stack<T> M = cast<T>(b.M);
  for (index_t i = 0; i < l * l; ++i) M.data()[2 * l * l + i] = T(0);  // the third is zero
  Stack<T> G(3, l, l);
  // float32 without promotion: the float32 SVD path for the batch.
  const PolarInfo<T> info = run(M, G, PolarMethod::iterative, -1, false);
  EXPECT_TRUE(info.used_svd);
  EXPECT_FALSE(info.estimated);
  for (index_t k = 0; k < 3; ++k)
    EXPECT_LE(static_cast<double>(info.sigma_min[k]),
              static_cast<double>(l) * eps<T>() * static_cast<double>(info.sigma_max[k]));
  if constexpr (std::is_same_v<T, float>) {
    // With promotion (the default), all three straight to float64, with no float32 SVD: the
    // zero matrix takes float64's SVD path, and every ratio stays below float32's limit (the
    // float32-rounded rank l - 1 matrices have float64 ratios near eps_f).
    Stack<T> Gp(3, l, l);
    const PolarInfo<T> up = run(M, Gp, PolarMethod::iterative);
    EXPECT_EQ(up.promoted, 3);
    EXPECT_TRUE(up.used_svd);
    EXPECT_GE(up.svd_matrices, 1);
    for (index_t k = 0; k < 3; ++k)
      EXPECT_LE(static_cast<double>(up.sigma_min[k]),
                static_cast<double>(l) * eps<T>() * static_cast<double>(up.sigma_max[k]));
  }
}

// Only the doubtful matrices of a batch take the SVD path: the others keep the iteration's
// factor (up to the rounding of one Newton-Schulz step more or less, as the batch runs its
// worst matrix's count) and their estimated sigma values; the doubtful one gets the SVD path's
// factor and exact singular values (float32: float64's SVD path, after the promotion).
TYPED_TEST(Polar, OnlyTheDoubtfulMatricesTakeTheSvdPath) {
  using T = TypeParam;
  const index_t l = 12, c = 6;
  const Batch b = make_batch(c, l, geometric(l, 10.0), 8);
  const Stack<T> M = cast<T>(b.M);
  Stack<T> Ms = M;
  for (index_t i = 0; i < l; ++i) Ms(2, i, 5) = T(0);  // matrix 2: an exactly zero column
  Stack<T> G(c, l, l), Gs(c, l, l), one(1, l, l);
  const PolarInfo<T> all = run(M, G, PolarMethod::iterative);
  const PolarInfo<T> info = run(Ms, Gs, PolarMethod::iterative);
  EXPECT_FALSE(all.used_svd);
  EXPECT_TRUE(info.used_svd);
  EXPECT_TRUE(info.estimated);
  EXPECT_EQ(info.svd_matrices, 1);
  EXPECT_LE(static_cast<double>(info.sigma_min[2]), l * eps<T>() * info.sigma_max[2]);
  for (index_t k = 0; k < c; ++k) {
    if (k == 2) continue;
    SCOPED_TRACE("matrix " + std::to_string(k));
    EXPECT_EQ(info.sigma_min[k], all.sigma_min[k]);
    for (index_t i = 0; i < l * l; ++i)
      EXPECT_NEAR(Gs.data()[k * l * l + i], G.data()[k * l * l + i], 10 * eps<T>());
  }
  Stack<T> m2(1, l, l);
  for (index_t i = 0; i < l * l; ++i) m2.data()[i] = Ms.data()[2 * l * l + i];
  run(m2, one, PolarMethod::svd);
  for (index_t i = 0; i < l * l; ++i) EXPECT_EQ(Gs.data()[2 * l * l + i], one.data()[i]);
}

// PolarOptions::defer_doubtful: in float32, the doubtful matrix gets no SVD and no promotion, a
// zero sigma_min (the caller recomputes it) and the iteration's factor; the others are as
// without it. float64 ignores the option.
TYPED_TEST(Polar, DeferredDoubtfulMatricesAreLeftToTheCaller) {
  using T = TypeParam;
  const index_t l = 12, c = 6;
  const Batch b = make_batch(c, l, geometric(l, 10.0), 8);
  Stack<T> M = cast<T>(b.M);
  for (index_t i = 0; i < l; ++i) M(2, i, 5) = T(0);  // matrix 2: an exactly zero column
  Stack<T> G(c, l, l), Gd(c, l, l);
  auto& p = cpu().primitives<T>();
  PolarOptions o;
  o.method = PolarMethod::iterative;
  const PolarInfo<T> usual = polar_factor(p, StackView<const T>(M.view()), false, G.view(), o);
  o.defer_doubtful = true;
  const PolarInfo<T> deferred = polar_factor(p, StackView<const T>(M.view()), false, Gd.view(), o);
  const bool single = std::is_same_v<T, float>;
  EXPECT_EQ(deferred.svd_matrices, single ? 0 : usual.svd_matrices);
  EXPECT_EQ(deferred.promoted, 0);
  EXPECT_EQ(deferred.sigma_min[2], single ? T(0) : usual.sigma_min[2]);
  for (index_t k = 0; k < c; ++k) {
    if (k == 2) continue;
    SCOPED_TRACE("matrix " + std::to_string(k));
    EXPECT_EQ(deferred.sigma_min[k], usual.sigma_min[k]);
    for (index_t i = 0; i < l * l; ++i)
      EXPECT_EQ(Gd.data()[k * l * l + i], G.data()[k * l * l + i]);
  }
}

TYPED_TEST(Polar, NanIsAnError) {
  using T = TypeParam;
  const Batch b = make_batch(2, 8, geometric(8, 10.0), 1);
  Stack<T> M = cast<T>(b.M), G(2, 8, 8);
  M(1, 3, 4) = std::numeric_limits<T>::quiet_NaN();
  for (auto m : {PolarMethod::iterative, PolarMethod::svd})
    EXPECT_THROW(run(M, G, m), NumericalError);
}

TYPED_TEST(Polar, OdcAlignmentIsTheSameOnBothPaths) {
  using T = TypeParam;
  auto s = testing::make_synthetic(300, 40, 12, 5, SpanCondition::diff_span_orth, 21);
  const Stack<T> A = testing::released_anchors<T>(s);
  AlignOptions o;
  o.polar = PolarMethod::svd;
  const Alignment<T> a = align(A, o);
  o.polar = PolarMethod::iterative;
  const Alignment<T> b = align(A, o);
  // The agreement tolerance of the other tests (1e-4 in float) assumes kappa(M_i) <= 1e3 or so:
  // the polar factor moves by up to about kappa eps under rounding. A diff-span instance (mixing
  // not orthonormal) had kappa up to 1.6e5 and agreed to 1.2e-4 to 1.7e-4 in float, depending on
  // the BLAS kernels and the optimisation level; this orthonormal-mixing instance has kappa about
  // 1.7e3 (checked, the SVD path reports it exactly) and agrees to 2e-6 to 3e-6.
  const double kappa = 1.0 / a.report.min_rank_ratio;
  EXPECT_LT(kappa, 1e4);
  EXPECT_LE(max_rel_diff(b.G, a.G), agreement_tolerance<T>()) << "kappa " << kappa;
  EXPECT_GT(b.report.iterations, 0);
  EXPECT_NEAR(b.report.objective, a.report.objective,
              1e3 * eps<T>() * std::abs(a.report.objective));
}

// The per-matrix decisions, exactly as the kernels run them.
TEST(PolarScalar, StartFlagsZeroAndNonFinite) {
  double st[polar::kStateSize];
  EXPECT_EQ(polar::start(st, 4.0), 0.5);
  EXPECT_TRUE(polar::active(st));
  EXPECT_EQ(polar::start(st, 0.0), 0.0);
  EXPECT_TRUE(polar::failed(st));
  EXPECT_EQ(polar::flags(st), polar::kZero);
  EXPECT_EQ(polar::start(st, std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_EQ(polar::flags(st), polar::kNonFinite);
  EXPECT_EQ(polar::start(st, std::numeric_limits<double>::quiet_NaN()), 0.0);
  EXPECT_EQ(polar::flags(st), polar::kNonFinite);
}

TEST(PolarScalar, ByersXuScalingAndConditionEstimate) {
  float st[polar::kStateSize];
  polar::start(st, 9.0);  // alpha = 3
  // l = 4. ||X_0||_F = 1, ||X_0^{-1}||_F = 100: kappa estimate 100, ||M^{-1}||_F = 100 / 3, and
  // zeta_0 = 1 / sqrt(alpha beta) = sqrt(100 / 1) with alpha = 1, beta = 1 / 100.
  EXPECT_FLOAT_EQ(polar::newton_zeta(st, 1.0, 1e4, 0), 10.0f);
  EXPECT_FLOAT_EQ(st[polar::kKappa], 100.0f);
  EXPECT_FLOAT_EQ(st[polar::kInvNorm], 100.0f / 3.0f);
  polar::newton_after(st, 0.25, 25.0, 1e-3, 4);  // b = sqrt(22) - 1: keep going
  EXPECT_TRUE(polar::active(st));
  // zeta_1 = sqrt(2 sqrt(alpha beta) / (alpha + beta)) = sqrt(2 / (10 + 1 / 10)), whatever the
  // norms of X_1; the estimate is taken on the first step only.
  const float z1 = std::sqrt(2.0f / 10.1f);
  EXPECT_FLOAT_EQ(polar::newton_zeta(st, 25.0, 1.0, 1), z1);
  EXPECT_FLOAT_EQ(st[polar::kKappa], 100.0f);
  polar::newton_after(st, 1.0, 9.0, 1e-3, 4);  // b = sqrt(6) - 1: keep going
  EXPECT_TRUE(polar::active(st));
  // zeta_2 = 1 / sqrt((zeta_1 + 1 / zeta_1) / 2).
  EXPECT_FLOAT_EQ(polar::newton_zeta(st, 9.0, 4.0, 2), 1.0f / std::sqrt((z1 + 1.0f / z1) / 2.0f));
  // A scaled step below 1e-2 switches scaling off, but its size says little about the error:
  // with b = sqrt(1.41) - 1 = 0.187 > kSchulzFrom the matrix stays active.
  polar::newton_after(st, 1e-6, 4.41, 1e-3, 4);
  EXPECT_TRUE(polar::active(st));
  EXPECT_EQ(polar::flags(st), polar::kNoScaling);
  EXPECT_FLOAT_EQ(polar::newton_zeta(st, 4.41, 4.0, 3), 1.0f) << "no scaling any more";
  EXPECT_FLOAT_EQ(st[polar::kIterations], 3.0f);
}

// stop_below: the first step's estimate decides, with the caller's test 1 / kappa <= stop_below
// on the stored kKappa; a stopped matrix is inactive, not failed, and returns 0 (no step).
TEST(PolarScalar, StopsADoubtfulMatrixAtTheFirstEstimate) {
  float st[polar::kStateSize];
  polar::start(st, 9.0, 1e-2);
  EXPECT_FLOAT_EQ(st[polar::kStopBelow], 1e-2f);
  // ||X_0||_F ||X_0^{-1}||_F = 1 * 1000: 1 / 1000 <= 1e-2, stopped.
  EXPECT_EQ(polar::newton_zeta(st, 1.0, 1e6, 0), 0.0f);
  EXPECT_EQ(polar::flags(st), polar::kDoubtful);
  EXPECT_FALSE(polar::active(st));
  EXPECT_FALSE(polar::failed(st));
  EXPECT_FLOAT_EQ(st[polar::kKappa], 1000.0f);  // recorded for the caller
  EXPECT_FLOAT_EQ(st[polar::kInvNorm], 1000.0f / 3.0f);
  // Estimate 99: goes on, scaled as without the limit.
  polar::start(st, 9.0, 1e-2);
  EXPECT_FLOAT_EQ(polar::newton_zeta(st, 1.0, 99.0 * 99.0, 0), std::sqrt(99.0f));
  EXPECT_TRUE(polar::active(st));
  // No limit (0, or a negative value): never stopped.
  for (double below : {0.0, -1.0}) {
    polar::start(st, 9.0, below);
    EXPECT_EQ(st[polar::kStopBelow], 0.0f);
    EXPECT_FLOAT_EQ(polar::newton_zeta(st, 1.0, 1e12, 0), 1e3f);
    EXPECT_TRUE(polar::active(st));
  }
  // Only the first step decides.
  polar::start(st, 9.0, 1e-2);
  polar::newton_zeta(st, 1.0, 1.0, 0);
  EXPECT_GT(polar::newton_zeta(st, 1.0, 1e8, 1), 0.0f);
  EXPECT_TRUE(polar::active(st));
}

TEST(PolarScalar, NewtonPhaseEndsByTheErrorBoundOrTheStep) {
  // Every singular value within kSchulzFrom of 1: ||X||_F^2 = 4.2 with l = 4 bounds s_max by
  // sqrt(1.2) = 1 + 0.0954. Newton-Schulz from 0.0954: 1.41e-2, 2.99e-4, 1.34e-7, 2.7e-14 (below
  // float's u = 6e-8 after 4 steps), 1.1e-27 (below double's 1.1e-16 after 5).
  float sf[polar::kStateSize];
  polar::start(sf, 1.0);
  polar::newton_after(sf, 0.04, 4.2, 1e-3, 4);  // a large (scaled) step: the bound decides
  EXPECT_FALSE(polar::active(sf));
  EXPECT_FALSE(polar::failed(sf));
  EXPECT_EQ(polar::flags(sf), polar::kConverged);
  EXPECT_FLOAT_EQ(sf[polar::kSchulz], 4.0f);
  double sd[polar::kStateSize];
  polar::start(sd, 1.0);
  polar::newton_after(sd, 0.04, 4.2, 1e-3, 4);
  EXPECT_EQ(sd[polar::kSchulz], 5.0);
  // Just above the bound: not yet.
  polar::start(sd, 1.0);
  polar::newton_after(sd, 0.04, 4.22, 1e-3, 4);
  EXPECT_TRUE(polar::active(sd));
  // The unscaled step below the tolerance ends it too (kNoScaling set by an earlier step);
  // ||X||_F^2 = l: b = 0, one polish step.
  polar::set_flag(sd, polar::kNoScaling);
  polar::newton_after(sd, 1e-8 * 4.5, 4.5, 1e-3, 4);  // step 1e-4, b = sqrt(1.5) - 1 = 0.22
  EXPECT_FALSE(polar::active(sd));
  EXPECT_EQ(sd[polar::kSchulz], double(polar::schulz_steps<double>(std::sqrt(1.5) - 1)));
  EXPECT_EQ(polar::schulz_steps<double>(0.0), 1) << "the polish always runs";
  EXPECT_EQ(polar::schulz_steps<double>(1e-8), 2);  // 1.5e-16 > u, then 3.4e-32
  EXPECT_EQ(polar::schulz_steps<float>(1e-8), 1);
}

TEST(PolarScalar, OverflowedInverseStopsTheMatrix) {
  double st[polar::kStateSize];
  polar::start(st, 1.0);
  EXPECT_EQ(polar::newton_zeta(st, 1.0, std::numeric_limits<double>::infinity(), 0), 0.0);
  EXPECT_TRUE(polar::failed(st));
  polar::start(st, 1.0);
  polar::mark_singular(st);
  EXPECT_TRUE(polar::failed(st));
  EXPECT_FALSE(polar::active(st));
}

// The contract every backend's polar_newton_step relies on to count the matrices still active:
// a zero zeta always comes with a stopped matrix. A state whose condition estimate is 0 (no
// first step recorded) or beyond float's range gives no usable zeta at iteration 1.
TEST(PolarScalar, ZeroZetaAlwaysStopsTheMatrix) {
  float st[polar::kStateSize];
  polar::start(st, 1.0);  // kKappa = 0: zeta_1 = sqrt(2 / (0 + inf)) = 0
  EXPECT_EQ(polar::newton_zeta(st, 1.0, 1.0, 1), 0.0f);
  EXPECT_FALSE(polar::active(st));
  EXPECT_TRUE(polar::failed(st));
  polar::start(st, 1.0);
  st[polar::kKappa] = std::numeric_limits<float>::infinity();  // kappa beyond float's range
  EXPECT_EQ(polar::newton_zeta(st, 1.0, 1.0, 1), 0.0f);
  EXPECT_TRUE(polar::failed(st));
  // zeta_0 = (||X^{-1}||_F / ||X||_F)^(1/2) = 1e100 overflows float although both squared
  // norms are finite doubles.
  polar::start(st, 1.0);
  EXPECT_EQ(polar::newton_zeta(st, 1e-200, 1e200, 0), 0.0f);
  EXPECT_TRUE(polar::failed(st));
  // In double the same norms are fine: zeta_0 = (1e100 / 1e-100)^(1/2) = 1e100, still active.
  double sd[polar::kStateSize];
  polar::start(sd, 1.0);
  EXPECT_DOUBLE_EQ(polar::newton_zeta(sd, 1e-200, 1e200, 0), 1e100);
  EXPECT_TRUE(polar::active(sd));
}

TEST(PolarMethodNames, ParseAndPrint) {
  EXPECT_EQ(parse_polar_method("auto"), PolarMethod::automatic);
  EXPECT_EQ(parse_polar_method("svd"), PolarMethod::svd);
  EXPECT_EQ(parse_polar_method("iterative"), PolarMethod::iterative);
  EXPECT_EQ(to_string(PolarMethod::iterative), "iterative");
  EXPECT_THROW(parse_polar_method("qdwh"), InvalidInput);
  // Case-insensitive, as every other enumeration's parser (core/names.cpp).
  EXPECT_EQ(parse_polar_method("SVD"), PolarMethod::svd);
  EXPECT_EQ(parse_polar_method("Iterative"), PolarMethod::iterative);
  for (auto m : {PolarMethod::automatic, PolarMethod::svd, PolarMethod::iterative})
    EXPECT_EQ(parse_polar_method(to_string(m)), m);
}

}  // namespace
}  // namespace dcalign
