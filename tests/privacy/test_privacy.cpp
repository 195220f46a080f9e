// The Analytic Gaussian Mechanism (include/dcalign/privacy.hpp): sigma against independently
// computed values, both branches of Balle and Wang's Algorithm 1, the privacy condition of the
// returned sigma evaluated here from its own formula, monotonicity, and the noise draws.
#include "dcalign/privacy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dcalign/random.hpp"

namespace dcalign {
namespace {

// Balle and Wang, Theorem 8: the Gaussian mechanism with noise sigma and sensitivity Delta is
// (epsilon, delta)-DP iff delta >= Phi(Delta / (2 sigma) - epsilon sigma / Delta)
//                                   - e^epsilon Phi(-Delta / (2 sigma) - epsilon sigma / Delta).
// Written here in long double from erfcl, independently of the library's B+/B- search.
long double exact_delta(double epsilon, double sigma, double sensitivity) {
  const long double a = static_cast<long double>(sensitivity) / (2.0L * sigma);
  const long double b = static_cast<long double>(epsilon) * sigma / sensitivity;
  const long double r2 = std::sqrt(2.0L);
  const auto Phi = [&](long double x) { return 0.5L * std::erfc(-x / r2); };
  return Phi(a - b) - std::exp(static_cast<long double>(epsilon)) * Phi(-a - b);
}

// |got - want| within half a unit of the last digit printed in the source (`ulp_printed`), plus
// 1e-12 for the conversion of the printed decimal.
void expect_printed(double got, double want, double ulp_printed, const std::string& what) {
  EXPECT_LE(std::abs(got - want), 0.5 * ulp_printed + 1e-12) << what << ": got " << got;
}

TEST(PrivacyAgm, MatchesTheIssuesIndependentValues) {
  // Delta = 1, delta = 1e-3, printed to 8 significant digits.
  const double delta = 1e-3;
  expect_printed(analytic_gaussian_sigma(2, delta, 1), 1.4452392, 1e-7, "eps 2");
  expect_printed(analytic_gaussian_sigma(8, delta, 1), 0.48001375, 1e-8, "eps 8");
  expect_printed(analytic_gaussian_sigma(64, delta, 1), 0.11480389, 1e-8, "eps 64");
}

TEST(PrivacyAgm, MatchesTheDerivedVectorsOfNotesWave2) {
  // notes-wave2.md section 1.5 (an mpmath re-implementation of Algorithm 3; Delta = 1,
  // delta = 1e-3): sigma and delta0 to half a unit of the printed digit, as printed.
  struct Row {
    double eps, sigma, sigma_ulp, delta0, classical, classical_ulp;
  };
  const std::vector<Row> rows = {
      {0.5, 4.610128, 1e-6, 0.238422, 7.55296, 1e-5},
      {1, 2.574657, 1e-6, 0.286208, 3.77648, 1e-5},
      {2, 1.4452392, 1e-7, 0.331898, 1.88824, 1e-5},
      {4, 0.82307769, 1e-8, 0.372302, 0.94412, 1e-5},
      {8, 0.48001375, 1e-8, 0.405589, 0.47206, 1e-5},
      {16, 0.28860582, 1e-8, 0.431500, 0.23603, 1e-5},
      {32, 0.17928231, 1e-8, 0.450877, 0.118015, 1e-6},
      {64, 0.11480389, 1e-8, 0.465007, 0.0590075, 1e-7},
  };
  for (const auto& r : rows) {
    const std::string what = "eps " + std::to_string(r.eps);
    const AnalyticGaussian g = analytic_gaussian(r.eps, 1e-3, 1);
    expect_printed(g.sigma, r.sigma, r.sigma_ulp, what);
    expect_printed(g.delta0, r.delta0, 1e-6, what + " delta0");
    expect_printed(classical_gaussian_sigma(r.eps, 1e-3, 1), r.classical, r.classical_ulp,
                   what + " classical");
    // delta = 1e-3 < delta0 for every row: the lower (u*) branch, alpha > 1.
    EXPECT_FALSE(g.upper_branch) << what;
    EXPECT_GT(g.alpha, 1) << what;
  }
  // Balle and Wang's own example, which the notes reproduce: eps = 1, delta = 1e-5: 3.73063.
  expect_printed(analytic_gaussian_sigma(1, 1e-5, 1), 3.73063, 1e-5, "eps 1, delta 1e-5");
}

TEST(PrivacyAgm, UpperBranchForDeltaAtOrAboveDelta0) {
  // delta >= delta0 takes the v* branch (alpha <= 1). Reference sigmas derived for this test with
  // a 50-digit mpmath bisection of Algorithm 1 (400 steps), relative tolerance 1e-9.
  struct Case {
    double eps, delta, sigma;
  };
  for (const auto& c : std::vector<Case>{{1, 0.5, 0.507065031476331},
                                         {0.1, 0.2, 1.65947794249592},
                                         {0.5, 0.3, 0.865868816946179},
                                         {4, 0.45, 0.330647019937769}}) {
    const AnalyticGaussian g = analytic_gaussian(c.eps, c.delta, 1);
    EXPECT_TRUE(g.upper_branch) << c.eps << " " << c.delta;
    EXPECT_GE(c.delta, g.delta0);
    EXPECT_LT(g.alpha, 1);
    EXPECT_GT(g.boundary, 0);
    EXPECT_NEAR(g.sigma, c.sigma, 1e-9 * c.sigma) << c.eps << " " << c.delta;
  }
}

TEST(PrivacyAgm, BranchesMeetAtDelta0) {
  // At delta = delta0 both branches give alpha = 1, sigma = Delta / sqrt(2 eps); just above and
  // just below (relative 1e-9) sigma must stay within 1e-6 of it on either side, the upper branch
  // at or below it and the lower branch above it.
  for (double eps : {0.3, 1.0, 8.0, 64.0}) {
    const double d0 = analytic_gaussian(eps, 1e-3, 1).delta0;
    const double s0 = 1 / std::sqrt(2 * eps);
    const AnalyticGaussian up = analytic_gaussian(eps, d0 * (1 + 1e-9), 1);
    const AnalyticGaussian down = analytic_gaussian(eps, d0 * (1 - 1e-9), 1);
    EXPECT_TRUE(up.upper_branch) << eps;
    EXPECT_FALSE(down.upper_branch) << eps;
    EXPECT_LE(up.sigma, s0) << eps;
    EXPECT_GT(down.sigma, s0) << eps;
    EXPECT_NEAR(up.sigma, s0, 1e-6 * s0) << eps;
    EXPECT_NEAR(down.sigma, s0, 1e-6 * s0) << eps;
  }
}

TEST(PrivacyAgm, ReturnedSigmaMeetsThePrivacyConditionTightly) {
  // Theorem 8 evaluated at the returned sigma: delta(sigma) <= delta up to 1e-9 relative (the
  // search keeps the safe side; what is left is the rounding of double CDF terms inside it), and
  // >= delta (1 - 1e-7), i.e. sigma is not larger than needed. At sigma (1 - 1e-6), a noise scale
  // slightly too small, the condition must fail: delta(sigma) > delta.
  for (double eps : {0.05, 0.5, 1.0, 2.0, 8.0, 20.0, 64.0}) {
    for (double delta : {1e-10, 1e-5, 1e-3, 0.05, 0.3, 0.49, 0.9}) {
      for (double sens : {1.0, 28.0}) {
        const double sigma = analytic_gaussian_sigma(eps, delta, sens);
        const long double d = exact_delta(eps, sigma, sens);
        const std::string what = "eps " + std::to_string(eps) + " delta " + std::to_string(delta) +
                                 " Delta " + std::to_string(sens);
        EXPECT_LE(d, delta * (1 + 1e-9L)) << what;
        EXPECT_GE(d, delta * (1 - 1e-7L)) << what;
        EXPECT_GT(exact_delta(eps, sigma * (1 - 1e-6), sens), static_cast<long double>(delta))
            << what;
      }
    }
  }
}

TEST(PrivacyAgm, MonotoneInEpsilonAndDeltaLinearInSensitivity) {
  const std::vector<double> eps = {0.01, 0.1, 0.5, 1, 2, 4, 8, 16, 32, 64, 128};
  const std::vector<double> deltas = {1e-12, 1e-8, 1e-5, 1e-3, 1e-2, 0.1, 0.3, 0.5, 0.8};
  for (double delta : deltas)
    for (size_t k = 1; k < eps.size(); ++k)
      EXPECT_LT(analytic_gaussian_sigma(eps[k], delta, 1),
                analytic_gaussian_sigma(eps[k - 1], delta, 1))
          << "eps " << eps[k] << " delta " << delta;
  for (double e : eps)
    for (size_t k = 1; k < deltas.size(); ++k)
      EXPECT_LT(analytic_gaussian_sigma(e, deltas[k], 1),
                analytic_gaussian_sigma(e, deltas[k - 1], 1))
          << "eps " << e << " delta " << deltas[k];
  // sigma = alpha Delta / sqrt(2 eps) with alpha independent of Delta: linear up to the rounding
  // of two multiplications (4 ulps).
  for (double sens : {1e-3, 0.5, 3.0, 28.0, 1e6}) {
    const double ratio = analytic_gaussian_sigma(8, 1e-3, sens) / sens;
    EXPECT_NEAR(ratio, analytic_gaussian_sigma(8, 1e-3, 1), 4 * 0.48 * 2.3e-16) << sens;
  }
}

TEST(PrivacyAgm, NeverAboveTheClassicalSigmaWhereThatIsValid) {
  // The classical calibration is (eps, delta)-DP for eps < 1; the AGM is the smallest sigma that
  // is, so it must be strictly smaller there. Above eps = 1 the classical value is no guarantee:
  // at eps = 64 it is smaller than the AGM's (notes-wave2 section 1.5), and it fails Theorem 8.
  for (double e : {0.01, 0.1, 0.5, 0.9})
    for (double delta : {1e-8, 1e-5, 1e-3, 1e-1})
      EXPECT_LT(analytic_gaussian_sigma(e, delta, 1), classical_gaussian_sigma(e, delta, 1))
          << e << " " << delta;
  const double classical = classical_gaussian_sigma(64, 1e-3, 1);
  EXPECT_LT(classical, analytic_gaussian_sigma(64, 1e-3, 1));
  EXPECT_GT(exact_delta(64, classical, 1), 1e-3L);
}

TEST(PrivacyAgm, ExtremeButValidInputsStayFinite) {
  // e^1000 overflows a double; the search works with e^(-eps v / 2) M(x) instead. References from
  // the same 50-digit mpmath bisection, relative tolerance 1e-9.
  EXPECT_NEAR(analytic_gaussian_sigma(1000, 1e-10, 1), 0.025752834505378, 2.6e-11);
  EXPECT_NEAR(analytic_gaussian_sigma(500, 1e-3, 1), 0.0348273755769492, 3.5e-11);
  EXPECT_NEAR(analytic_gaussian_sigma(1e-3, 1e-3, 1), 276.128875569203, 2.8e-7);
  EXPECT_NEAR(analytic_gaussian_sigma(8, 1e-12, 1), 0.912251998839958, 9.2e-10);
  const double tiny = analytic_gaussian_sigma(1e5, 1e-300, 1);
  EXPECT_TRUE(std::isfinite(tiny) && tiny > 0) << tiny;
  // eps -> 0: Theorem 8 becomes 2 Phi(Delta / (2 sigma)) - 1 <= delta, sigma ~ Delta / (delta
  // sqrt(2 pi)) = 398.94 Delta to first order (the next term is 1e-4 here).
  const double small = analytic_gaussian_sigma(1e-300, 1e-3, 1);
  EXPECT_NEAR(small, 1 / (1e-3 * 2.5066282746310005), 1e-3) << small;
  // 276.13 x 1e308 is no double.
  EXPECT_THROW(analytic_gaussian_sigma(1e-3, 1e-3, 1e308), NumericalError);
}

// `f` must throw InvalidInput whose message holds every fragment.
template <typename F>
void expect_invalid(F f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning " << fragments.front();
  } catch (const InvalidInput& e) {
    for (const auto& s : fragments)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  }
}

TEST(PrivacyAgm, BadInputsNameTheParameterAndRange) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double e : {0.0, -1.0, inf, -inf, nan}) {
    expect_invalid([&] { analytic_gaussian_sigma(e, 1e-3, 1); },
                   {"epsilon", "a finite number > 0"});
    expect_invalid([&] { classical_gaussian_sigma(e, 1e-3, 1); },
                   {"epsilon", "a finite number > 0"});
  }
  for (double d : {0.0, 1.0, -0.1, 1.5, inf, nan}) {
    expect_invalid([&] { analytic_gaussian_sigma(1, d, 1); }, {"delta", "(0, 1)"});
    expect_invalid([&] { classical_gaussian_sigma(1, d, 1); }, {"delta", "(0, 1)"});
  }
  for (double s : {0.0, -2.0, inf, nan})
    expect_invalid([&] { analytic_gaussian_sigma(1, 1e-3, s); },
                   {"sensitivity", "a finite number > 0"});
  Matrix<double> X(3, 2);
  for (double s : {-1.0, inf, nan})
    expect_invalid([&] { add_gaussian_noise(X, s, 1); }, {"sigma", "a finite number >= 0"});
}

TEST(PrivacyNoise, MeanAndVarianceWithinStatisticalBounds) {
  // 200,000 draws added to a non-constant matrix; W = (X' - X) / sigma must look standard normal.
  // Bounds at 5 standard errors: the mean's is 1 / sqrt(N), the sample variance's sqrt(2 / N),
  // the lag-1 correlation's 1 / sqrt(N) (a fixed seed: the check is deterministic, and a correct
  // generator would fail it for fewer than 1 in 10^6 seeds).
  const index_t rows = 400, cols = 500;
  const double sigma = 0.7;
  Matrix<double> X(rows, cols);
  for (index_t j = 0; j < cols; ++j)
    for (index_t i = 0; i < rows; ++i) X(i, j) = static_cast<double>(i % 7) - 0.25 * j;
  Matrix<double> noisy = X;
  add_gaussian_noise(noisy, sigma, 12345);
  const double n = static_cast<double>(X.size());
  std::vector<double> w(X.size());
  double mean = 0;
  for (index_t k = 0; k < X.size(); ++k) {
    w[k] = (noisy.data()[k] - X.data()[k]) / sigma;
    mean += w[k];
  }
  mean /= n;
  double var = 0, lag = 0;
  for (index_t k = 0; k < X.size(); ++k) {
    var += (w[k] - mean) * (w[k] - mean);
    if (k > 0) lag += (w[k] - mean) * (w[k - 1] - mean);
  }
  var /= n - 1;
  lag /= (n - 1) * var;
  EXPECT_LE(std::abs(mean), 5 / std::sqrt(n)) << mean;
  EXPECT_LE(std::abs(var - 1), 5 * std::sqrt(2 / n)) << var;
  EXPECT_LE(std::abs(lag), 5 / std::sqrt(n)) << lag;
  // And the spread is sigma's, not 1's: a noise of scale 1 would give var ~ 1 / 0.49 here.
  EXPECT_GT(var, 0.9);
  EXPECT_LT(var, 1.1);
}

TEST(PrivacyNoise, DeterministicUnderTheSeedInStorageOrder) {
  Matrix<double> A(5, 4), B(5, 4), C(5, 4);
  for (index_t k = 0; k < A.size(); ++k) A.data()[k] = B.data()[k] = C.data()[k] = 0.1 * k;
  add_gaussian_noise(A, 2.0, 99);
  add_gaussian_noise(B, 2.0, 99);
  add_gaussian_noise(C, 2.0, 100);
  Rng rng(99);
  int differ = 0;
  for (index_t k = 0; k < A.size(); ++k) {
    EXPECT_EQ(A.data()[k], B.data()[k]) << k;
    // The documented draw: element k (column-major) gets the k-th normal of Rng(seed).
    EXPECT_EQ(A.data()[k], 0.1 * k + 2.0 * rng.normal()) << k;
    differ += A.data()[k] != C.data()[k];
  }
  EXPECT_EQ(differ, A.size());
  // Float gets the same draws, rounded once.
  Matrix<float> F(5, 4);
  for (index_t k = 0; k < F.size(); ++k) F.data()[k] = static_cast<float>(0.1 * k);
  add_gaussian_noise(F, 2.0, 99);
  Rng again(99);
  for (index_t k = 0; k < F.size(); ++k)
    EXPECT_EQ(F.data()[k], static_cast<float>(static_cast<float>(0.1 * k) + 2.0 * again.normal()));
  // sigma = 0 adds nothing.
  Matrix<double> D = B;
  add_gaussian_noise(D, 0.0, 7);
  for (index_t k = 0; k < D.size(); ++k) EXPECT_EQ(D.data()[k], B.data()[k]);
}

}  // namespace
}  // namespace dcalign
