#pragma once
// Statistics of paper 001's evaluation (sections 8 and 9, Tables 13-19): paired t-tests with the
// paired effect size d_z (the concordance tests), one-way ANOVA with Cohen's f (anchor size) and
// two-way ANOVA with interaction (anchor source x anchor size), with partial eta squared and f.
//
// p-values come from Boost.Math's students_t and fisher_f distributions (upper tails through
// complement(), so that p-values down to about 1e-300 keep their relative accuracy). Every
// function validates its input and throws InvalidInput saying what was wrong and what was
// expected; NaN or infinite observations are errors, and no result field is ever NaN.
//
// Degenerate data (the "0/0 rule"). A statistic whose numerator and denominator are both zero is
// defined as 0 with p = 1: when all paired differences are zero, t = d_z = 0 and p = 1 (001
// Tables 13-14 print d = +0.00 for ODC's identical SVM runs); when an ANOVA effect and the error
// both have zero sum of squares, F = eta^2 = f = 0 and p = 1. A nonzero numerator over a zero
// denominator gives +-infinity with p = 0 (p = 1 for a one-sided alternative pointing the other
// way); eta^2 is then 1. Zero spread is detected exactly (all paired differences identical; every
// group or cell of the ANOVA constant), not by a tolerance, so data with a tiny but real spread
// get finite statistics.
#include <cstddef>
#include <string>
#include <vector>

namespace dcalign::stats {

/// Alternative hypothesis of a test on the mean difference mu_d = E[x - y] (SciPy's names).
enum class Alternative {
  two_sided,  ///< mu_d != 0; p = 2 P(T >= |t|)
  less,       ///< mu_d < 0 (left-tailed); p = P(T <= t)
  greater,    ///< mu_d > 0 (right-tailed); p = P(T >= t)
};

/// "two-sided", "less" or "greater" (SciPy's names); InvalidInput for anything else.
Alternative parse_alternative(const std::string& name);

/// Result of paired_t_test. The differences are d_i = x_i - y_i, i = 1..n.
struct PairedTTest {
  std::size_t n = 0;         ///< number of pairs
  double mean_diff = 0;      ///< dbar = (1/n) sum_i d_i
  double sd_diff = 0;        ///< s_d = sqrt(sum_i (d_i - dbar)^2 / (n - 1))
  double t = 0;              ///< dbar / (s_d / sqrt(n)); see the 0/0 rule above
  double df = 0;             ///< n - 1
  double p = 1;              ///< p-value for `alternative`
  double cohens_dz = 0;      ///< paired Cohen's d_z = dbar / s_d (= t / sqrt(n))
  double confidence = 0.95;  ///< level of the interval below
  double ci_lower = 0;       ///< dbar - t_{(1+level)/2, n-1} s_d / sqrt(n) (always two-sided)
  double ci_upper = 0;       ///< dbar + t_{(1+level)/2, n-1} s_d / sqrt(n)
  Alternative alternative = Alternative::two_sided;
};

/// Paired t-test of x against y (the same n >= 2 units measured twice; x[i] pairs with y[i]),
/// as scipy.stats.ttest_rel(x, y, alternative). The confidence interval is the two-sided one of
/// the mean difference at `confidence` in (0, 1), whatever the alternative. Throws InvalidInput
/// on sizes that differ, n < 2, a NaN or infinite value, or a level outside (0, 1).
PairedTTest paired_t_test(const std::vector<double>& x, const std::vector<double>& y,
                          Alternative alternative = Alternative::two_sided,
                          double confidence = 0.95);

/// Result of one_way_anova (k groups, N observations in all).
struct OneWayAnova {
  double ss_between = 0;   ///< sum_g n_g (mean_g - grand mean)^2
  double ss_within = 0;    ///< sum_g sum_i (y_gi - mean_g)^2
  double ss_total = 0;     ///< ss_between + ss_within
  double df_between = 0;   ///< k - 1
  double df_within = 0;    ///< N - k
  double F = 0;            ///< (ss_between / df_between) / (ss_within / df_within)
  double p = 1;            ///< P(F(df_between, df_within) >= F)
  double eta_squared = 0;  ///< ss_between / ss_total
  double cohens_f = 0;     ///< sqrt(eta^2 / (1 - eta^2)) = f_from_F(F, df_between, df_within)
};

/// One-way ANOVA of k >= 2 groups of possibly unequal sizes, as scipy.stats.f_oneway. Throws
/// InvalidInput on fewer than 2 groups, an empty group, N - k < 1 (no error degrees of
/// freedom), or a NaN or infinite value.
OneWayAnova one_way_anova(const std::vector<std::vector<double>>& groups);

/// Which sums of squares two_way_anova reports.
enum class SumOfSquares {
  /// Type II (hierarchical): A adjusted for B, B adjusted for A, A:B adjusted for both;
  /// SS_A = RSS(1 + B) - RSS(1 + A + B) and so on. Independent of the coding; the tests of A
  /// and B are the most powerful when there is no interaction. Allows empty cells as long as
  /// every effect stays estimable. As statsmodels' anova_lm(typ=2) and R's car::Anova(type=2).
  type2,
  /// Type III (marginal): every term adjusted for all others, in the model with sum-to-zero
  /// (effect) coding, so that A tests equal unweighted marginal means. Requires every cell to
  /// hold an observation. As statsmodels' anova_lm(typ=3) on C(a, Sum) * C(b, Sum).
  type3,
};

/// "type2" or "type3"; InvalidInput for anything else.
SumOfSquares parse_sum_of_squares(const std::string& name);

/// One row of a two-way ANOVA table.
struct AnovaTerm {
  std::string name;                ///< "A", "B" or "A:B"
  double ss = 0;                   ///< sum of squares of the term (see SumOfSquares)
  double df = 0;                   ///< its degrees of freedom
  double F = 0;                    ///< (ss / df) / (ss_residual / df_residual)
  double p = 1;                    ///< P(F(df, df_residual) >= F)
  double partial_eta_squared = 0;  ///< ss / (ss + ss_residual)
  double cohens_f = 0;             ///< sqrt(peta^2 / (1 - peta^2)) = sqrt(F df / df_residual)
};

/// Result of two_way_anova.
struct TwoWayAnova {
  SumOfSquares type = SumOfSquares::type2;
  std::size_t levels_a = 0;  ///< distinct labels of factor A
  std::size_t levels_b = 0;  ///< distinct labels of factor B
  std::size_t n = 0;         ///< observations
  AnovaTerm a;               ///< main effect of A
  AnovaTerm b;               ///< main effect of B
  AnovaTerm interaction;     ///< A:B
  double ss_residual = 0;    ///< residual sum of squares of the full model 1 + A + B + A:B
  double df_residual = 0;    ///< n - rank of that model (n - a b when every cell is filled)
};

/// Two-way ANOVA with interaction, y ~ A + B + A:B, for a possibly unbalanced design: y[i] was
/// observed at level a_labels[i] of A and b_labels[i] of B (labels are arbitrary strings; their
/// order does not matter). Degrees of freedom are ranks of the design, so with every cell filled
/// they are a-1, b-1, (a-1)(b-1) and n - ab. The fits use Householder QR with column pivoting
/// (LAPACK dgelsy), and each SS is the squared norm of the difference of two nested fits rather
/// than a difference of residual sums, which would cancel. Throws InvalidInput on sizes that
/// differ, a NaN or infinite y, a factor with a single level, an empty cell under type III, an
/// effect that the design cannot estimate (confounded factors, or an interaction with no
/// degrees of freedom left by empty cells), or no residual degrees of freedom.
TwoWayAnova two_way_anova(const std::vector<double>& y, const std::vector<std::string>& a_labels,
                          const std::vector<std::string>& b_labels,
                          SumOfSquares type = SumOfSquares::type2);

/// Cohen's f of an F statistic: sqrt(F df_effect / df_error), which equals sqrt(eta^2 / (1 -
/// eta^2)) for a one-way ANOVA and the partial-eta^2 form for a term of a factorial ANOVA (001
/// Tables 17-19). F = +infinity gives +infinity. Throws InvalidInput on F < 0 or NaN, or on
/// degrees of freedom that are not finite and positive.
double f_from_F(double F, double df_effect, double df_error);

/// Upper-tail p-value P(F(df1, df2) >= F). F = +infinity gives 0. Throws InvalidInput as
/// f_from_F does.
double p_from_F(double F, double df1, double df2);

/// p-value of a t statistic with df degrees of freedom for `alternative` (t may be infinite).
/// Throws InvalidInput on a NaN t or a df that is not finite and positive.
double p_from_t(double t, double df, Alternative alternative);

}  // namespace dcalign::stats
