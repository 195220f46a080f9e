// Metrics and summary statistics against values worked out by hand or in closed form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "dcalign/learn.hpp"
#include "dcalign/random.hpp"

namespace dcalign::learn {
namespace {

TEST(LearnMetrics, AccuracyAndRmse) {
  EXPECT_DOUBLE_EQ(accuracy({0, 1, 2, 1}, {0, 2, 2, 1}), 0.75);
  EXPECT_DOUBLE_EQ(accuracy({3}, {3}), 1.0);
  EXPECT_DOUBLE_EQ(rmse({1, 2, 3}, {1, 2, 5}), std::sqrt(4.0 / 3.0));
  EXPECT_DOUBLE_EQ(rmse({1, -1}, {1, -1}), 0.0);
}

TEST(LearnMetrics, RocAucHandCases) {
  const std::vector<double> y{0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(roc_auc(y, {0.1, 0.2, 0.3, 0.4}), 1.0);  // perfect ranking
  EXPECT_DOUBLE_EQ(roc_auc(y, {0.4, 0.3, 0.2, 0.1}), 0.0);  // reversed
  EXPECT_DOUBLE_EQ(roc_auc(y, {0.5, 0.5, 0.5, 0.5}), 0.5);  // all tied
  // scikit-learn's documented example: 3 of 4 positive-negative pairs ordered correctly.
  EXPECT_DOUBLE_EQ(roc_auc(y, {0.1, 0.4, 0.35, 0.8}), 0.75);
  // One positive-negative tie (0.5 vs 0.5) counts one half: (1 + 1 + 1 + 0.5) / 4.
  EXPECT_DOUBLE_EQ(roc_auc({0, 1, 0, 1}, {0.5, 0.5, 0.2, 0.9}), 0.875);
}

TEST(LearnMetrics, RocAucMatchesPairCountingWithTies) {
  // Rank formula against the definition P(s+ > s-) + P(s+ = s-) / 2, on integer scores
  // with many ties.
  Rng rng(7);
  std::vector<double> y(300), s(300);
  for (size_t i = 0; i < y.size(); ++i) {
    y[i] = rng.uniform() < 0.3 ? 1.0 : 0.0;
    s[i] = static_cast<double>(rng.below(10)) + (y[i] > 0 ? 2.0 : 0.0);
  }
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < y.size(); ++i)
    for (size_t j = 0; j < y.size(); ++j)
      if (y[i] == 1 && y[j] == 0) {
        pairs += 1;
        wins += s[i] > s[j] ? 1.0 : (s[i] == s[j] ? 0.5 : 0.0);
      }
  EXPECT_NEAR(roc_auc(y, s), wins / pairs, 1e-12);
}

TEST(LearnMetrics, AveragePrecisionHandCases) {
  // scikit-learn's documented example: thresholds 0.8 (P=1, R=.5), 0.4 (R unchanged),
  // 0.35 (P=2/3, R=1): AP = .5 * 1 + .5 * 2/3.
  EXPECT_NEAR(average_precision({0, 0, 1, 1}, {0.1, 0.4, 0.35, 0.8}), 0.5 + 1.0 / 3.0, 1e-15);
  EXPECT_DOUBLE_EQ(average_precision({0, 1, 0, 1}, {0.1, 0.9, 0.2, 0.8}), 1.0);
  // Positives ranked first and last: .5 * 1 + .5 * (2/4).
  EXPECT_DOUBLE_EQ(average_precision({1, 0, 0, 1}, {4, 3, 2, 1}), 0.75);
  // All scores tied: one threshold, AP = prevalence.
  EXPECT_DOUBLE_EQ(average_precision({1, 0, 0, 1}, {1, 1, 1, 1}), 0.5);
  // A tie group containing a positive and a negative: thresholds {3}, {2, 2}, {1}:
  // R .5 at P 1, then R 1 at P 2/3.
  EXPECT_NEAR(average_precision({1, 1, 0, 0}, {3, 2, 2, 1}), 0.5 + 0.5 * 2.0 / 3.0, 1e-15);
}

TEST(LearnMetrics, MulticlassOneVsRestMacro) {
  const std::vector<double> y{0, 0, 1, 1, 2, 2};
  // Column 0 ranks class 0 perfectly (AUC 1), column 1 ranks class 1 last (AUC 0),
  // column 2 is constant (AUC 0.5): macro mean 0.5.
  Matrix<double> p(6, 3,
                   {0.9, 0.8, 0.1, 0.1, 0.2, 0.2,    // column 0
                    0.5, 0.5, 0.0, 0.0, 0.5, 0.5,    // column 1
                    0.3, 0.3, 0.3, 0.3, 0.3, 0.3});  // column 2
  EXPECT_DOUBLE_EQ(roc_auc_ovr(y, p), 0.5);
  // AP per class: 1; 2/6 (both positives only at the last threshold); prevalence 1/3.
  EXPECT_NEAR(average_precision_ovr(y, p), (1.0 + 1.0 / 3.0 + 1.0 / 3.0) / 3.0, 1e-15);
}

TEST(LearnMetrics, TwoColumnMatrixUsesClassOneColumn) {
  const std::vector<double> y{0, 1, 1, 0, 1};
  Matrix<double> p(5, 2, {0.7, 0.4, 0.1, 0.8, 0.35, 0.3, 0.6, 0.9, 0.2, 0.65});
  const std::vector<double> col1{0.3, 0.6, 0.9, 0.2, 0.65};
  EXPECT_DOUBLE_EQ(roc_auc_ovr(y, p), roc_auc(y, col1));
  EXPECT_DOUBLE_EQ(roc_auc_ovr(y, p), 1.0);
  EXPECT_DOUBLE_EQ(average_precision_ovr(y, p), average_precision(y, col1));
}

TEST(LearnStats, IncompleteBetaClosedForms) {
  for (double x : {0.0, 0.1, 0.37, 0.5, 0.9, 1.0}) {
    EXPECT_NEAR(incomplete_beta(x, 1, 1), x, 1e-14);
    EXPECT_NEAR(incomplete_beta(x, 3, 1), x * x * x, 1e-14);
    EXPECT_NEAR(incomplete_beta(x, 1, 4), 1 - std::pow(1 - x, 4), 1e-14);
  }
  EXPECT_NEAR(incomplete_beta(0.5, 7.5, 7.5), 0.5, 1e-14);
  // I_x(a, b) + I_{1-x}(b, a) = 1 away from the symmetric point.
  EXPECT_NEAR(incomplete_beta(0.2, 2.5, 9) + incomplete_beta(0.8, 9, 2.5), 1.0, 1e-14);
}

TEST(LearnStats, StudentTQuantiles) {
  EXPECT_NEAR(student_t_quantile(0.975, 9), 2.262157, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 99), 1.984217, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.776445, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.95, 30), 1.697261, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.025, 9), -2.262157, 1e-6);
  EXPECT_EQ(student_t_quantile(0.5, 3), 0.0);
  // Closed forms: Cauchy (1 dof) t = tan(pi (p - 1/2)); 2 dof t = (2p - 1) / sqrt(2 p (1 - p)).
  const double pi = 3.14159265358979323846;
  for (double p : {0.6, 0.9, 0.975, 0.999, 0.01}) {
    EXPECT_NEAR(student_t_quantile(p, 1), std::tan(pi * (p - 0.5)),
                1e-11 * std::fabs(std::tan(pi * (p - 0.5))) + 1e-13);
    EXPECT_NEAR(student_t_quantile(p, 2), (2 * p - 1) / std::sqrt(2 * p * (1 - p)), 1e-11);
  }
  // Many degrees of freedom approach the normal quantile 1.959964.
  EXPECT_NEAR(student_t_quantile(0.975, 1e7), 1.959964, 1e-6);
  // The CDF inverts the quantile, also for fractional dof and far tails.
  for (double dof : {0.7, 3.0, 25.5})
    for (double p : {1e-6, 0.2, 0.8, 0.999999})
      EXPECT_NEAR(student_t_cdf(student_t_quantile(p, dof), dof), p,
                  1e-9 * std::min(p, 1 - p) + 1e-15);
}

TEST(LearnStats, SummaryMeanAndHalfWidth) {
  // Mean 3, sample sd sqrt(2.5), t_{0.975,4} = 2.776445: half-width 2.776445 * sqrt(2.5 / 5).
  const Summary s = summarize({1, 2, 3, 4, 5});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_NEAR(s.half_width, 2.776445 * std::sqrt(0.5), 1e-6);
  // Ten values at level 0.90: t_{0.95,9} = 1.833113.
  const Summary s90 = summarize({2, 4, 4, 4, 5, 5, 7, 9, 1, 9}, 0.90);
  double mean = 5.0, ss = 0;
  for (double v : {2, 4, 4, 4, 5, 5, 7, 9, 1, 9}) ss += (v - mean) * (v - mean);
  EXPECT_DOUBLE_EQ(s90.mean, mean);
  EXPECT_NEAR(s90.half_width, 1.833113 * std::sqrt(ss / 9.0) / std::sqrt(10.0), 1e-6);
  EXPECT_DOUBLE_EQ(summarize({4, 4, 4}).half_width, 0.0);
  EXPECT_TRUE(std::isnan(summarize({4}).half_width));
}

}  // namespace
}  // namespace dcalign::learn
