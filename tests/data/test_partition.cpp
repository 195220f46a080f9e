// Partitions among users, the Gamma / Dirichlet samplers, row gathering and standardisation.
// Statistical checks use fixed seeds, so they are deterministic; their tolerances are several
// standard errors wide, yet narrow enough to catch a wrong sampler.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "dcalign/data.hpp"

using namespace dcalign;
using namespace dcalign::data;
using ::testing::HasSubstr;

namespace {

// Every index in range and held by at most one user; returns how many are held.
index_t check_disjoint(const Partition& p, index_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  index_t total = 0;
  for (const auto& u : p) {
    EXPECT_TRUE(std::is_sorted(u.begin(), u.end()));
    for (index_t i : u) {
      EXPECT_GE(i, 0);
      EXPECT_LT(i, n);
      if (i >= 0 && i < n) {
        EXPECT_EQ(seen[static_cast<size_t>(i)]++, 0) << "index " << i;
      }
      ++total;
    }
  }
  return total;
}

// Labels 0..k-1, `per_class` of each, interleaved (0, 1, ..., k-1, 0, 1, ...).
std::vector<double> balanced_labels(index_t k, index_t per_class) {
  std::vector<double> y;
  for (index_t i = 0; i < k * per_class; ++i) y.push_back(static_cast<double>(i % k));
  return y;
}

template <typename F>
std::string invalid_input_message(F f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidInput thrown";
  return "";
}

// Mean over users of the largest class share: 1/k for perfectly mixed users, 1 for users
// holding a single class.
double mean_max_share(const Partition& p, const std::vector<double>& y, index_t k) {
  double sum = 0;
  for (const auto& u : p) {
    std::vector<double> c(static_cast<size_t>(k), 0);
    for (index_t i : u) c[static_cast<size_t>(y[static_cast<size_t>(i)])] += 1;
    sum += *std::max_element(c.begin(), c.end()) / static_cast<double>(u.size());
  }
  return sum / static_cast<double>(p.size());
}

// Quantile bins of regression targets: equal counts per bin (up to one), bins ordered by value,
// ties in one bin; then Dirichlet skew over them as over classes.
TEST(QuantileBins, EqualCountsOrderedBinsAndTies) {
  std::vector<double> y;
  for (int i = 0; i < 100; ++i) y.push_back(std::sin(i * 1.7) * 50);  // distinct, unordered
  const std::vector<double> b = quantile_bins(y, 10);
  std::vector<int> count(10, 0);
  for (double v : b) count[static_cast<size_t>(v)]++;
  for (int c : count) EXPECT_EQ(c, 10);
  for (size_t i = 0; i < y.size(); ++i)
    for (size_t j = 0; j < y.size(); ++j)
      if (y[i] < y[j]) {
        EXPECT_LE(b[i], b[j]);
      }
  // Ties: ten equal values straddling a bin edge share a bin.
  std::vector<double> t(20, 0.0);
  for (int i = 0; i < 20; ++i) t[i] = i < 5 ? i : (i < 15 ? 5.0 : i);
  const std::vector<double> bt = quantile_bins(t, 4);
  for (int i = 5; i < 15; ++i) EXPECT_EQ(bt[i], bt[5]);
  EXPECT_THROW(quantile_bins(y, 0), InvalidInput);
  EXPECT_THROW(quantile_bins(y, 101), InvalidInput);
  y[3] = std::nan("");
  EXPECT_THROW(quantile_bins(y, 10), InvalidInput);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// IID and even splits

TEST(DataPartition, IidSizesDisjointDeterministic) {
  const Partition p = partition_iid(1000, 7, 100, 42);
  ASSERT_EQ(p.size(), 7u);
  for (const auto& u : p) EXPECT_EQ(u.size(), 100u);
  EXPECT_EQ(check_disjoint(p, 1000), 700);
  EXPECT_EQ(partition_iid(1000, 7, 100, 42), p);
  EXPECT_NE(partition_iid(1000, 7, 100, 43), p);
  // Using every sample is allowed and covers them all.
  EXPECT_EQ(check_disjoint(partition_iid(60, 6, 10, 1), 60), 60);
  // Not the identity or a fixed stride: indices spread over the whole range.
  EXPECT_GT(p[0].back() - p[0].front(), 800);
}

TEST(DataPartition, IidIsUniformOverSamples) {
  // Each of 100 samples is chosen with probability 30/100 per draw of 3 users x 10; over
  // 2000 seeds the counts are Binomial(2000, 0.3): mean 600, sd 20.5.
  std::vector<int> hits(100, 0);
  for (std::uint64_t s = 0; s < 2000; ++s)
    for (const auto& u : partition_iid(100, 3, 10, s))
      for (index_t i : u) ++hits[static_cast<size_t>(i)];
  for (int h : hits) EXPECT_NEAR(h, 600, 100);
}

TEST(DataPartition, IidTooManySamplesSaysBothNumbers) {
  const std::string msg = invalid_input_message([] { partition_iid(60000, 10, 7000, 1); });
  EXPECT_THAT(msg, HasSubstr("70000"));
  EXPECT_THAT(msg, HasSubstr("60000"));
  EXPECT_THROW(partition_iid(10, 0, 1, 1), InvalidInput);
  EXPECT_THROW(partition_iid(10, 2, 0, 1), InvalidInput);
  EXPECT_THAT(invalid_input_message([] { partition_iid(10, 3, index_t{1} << 62, 1); }),
              HasSubstr("more than"));
}

TEST(DataPartition, EvenSplitCoversAllWithSizesDifferingByOne) {
  const Partition p = partition_even(103, 10, 5);
  ASSERT_EQ(p.size(), 10u);
  for (size_t u = 0; u < 10; ++u) EXPECT_EQ(p[u].size(), u < 3 ? 11u : 10u);
  EXPECT_EQ(check_disjoint(p, 103), 103);
  EXPECT_EQ(partition_even(103, 10, 5), p);
  EXPECT_NE(partition_even(103, 10, 6), p);
  EXPECT_EQ(check_disjoint(partition_even(3, 5, 1), 3), 3);  // some users get nothing
  EXPECT_THROW(partition_even(10, 0, 1), InvalidInput);
}

// ---------------------------------------------------------------------------------------------
// Label skew

TEST(DataPartition, LabelSkewEachUserOneClassRoundRobin) {
  const std::vector<double> y = balanced_labels(3, 50);
  const Partition p = partition_label_skew(y, 3, 7, 15, 9);
  ASSERT_EQ(p.size(), 7u);
  EXPECT_EQ(check_disjoint(p, 150), 105);
  for (size_t u = 0; u < 7; ++u) {
    EXPECT_EQ(p[u].size(), 15u);
    for (index_t i : p[u]) EXPECT_EQ(y[static_cast<size_t>(i)], static_cast<double>(u % 3)) << u;
  }
  EXPECT_EQ(partition_label_skew(y, 3, 7, 15, 9), p);
  EXPECT_NE(partition_label_skew(y, 3, 7, 15, 10), p);
}

TEST(DataPartition, LabelSkewAllSamplesAsInTdc) {
  // Binary labels, four users: users 0 and 2 share class 0, users 1 and 3 class 1.
  std::vector<double> y(101, 0.0);
  for (size_t i = 0; i < 31; ++i) y[i * 3] = 1.0;
  const Partition p = partition_label_skew(y, 2, 4, 0, 3);
  EXPECT_EQ(check_disjoint(p, 101), 101);
  EXPECT_EQ(p[0].size(), 35u);
  EXPECT_EQ(p[2].size(), 35u);
  EXPECT_EQ(p[1].size(), 16u);
  EXPECT_EQ(p[3].size(), 15u);
  for (size_t u = 0; u < 4; ++u)
    for (index_t i : p[u]) EXPECT_EQ(y[static_cast<size_t>(i)], static_cast<double>(u % 2));
}

TEST(DataPartition, LabelSkewErrors) {
  // Classes 0 and 1 have 50 samples, class 2 has 40; six users, two per class.
  std::vector<double> y(140, 2.0);
  std::fill(y.begin(), y.begin() + 50, 0.0);
  std::fill(y.begin() + 50, y.begin() + 100, 1.0);
  const std::string msg = invalid_input_message([&] { partition_label_skew(y, 3, 6, 21, 1); });
  EXPECT_THAT(msg, HasSubstr("class 2 has 40 samples"));
  EXPECT_THAT(msg, HasSubstr("2 x 21 = 42"));
  EXPECT_NO_THROW(partition_label_skew(y, 3, 6, 20, 1));
  y[5] = 3.0;
  EXPECT_THAT(invalid_input_message([&] { partition_label_skew(y, 3, 3, 1, 1); }),
              HasSubstr("label 3.0"));
  y[5] = 0.5;
  EXPECT_THROW(partition_label_skew(y, 3, 3, 1, 1), InvalidInput);
  EXPECT_THROW(partition_label_skew(balanced_labels(2, 1), 2, 4, 0, 1), InvalidInput);
}

// ---------------------------------------------------------------------------------------------
// Dirichlet label skew

TEST(DataPartition, DirichletSizesDisjointDeterministic) {
  const std::vector<double> y = balanced_labels(10, 300);
  const Partition p = partition_dirichlet(y, 10, 20, 100, 0.5, 11);
  ASSERT_EQ(p.size(), 20u);
  for (const auto& u : p) EXPECT_EQ(u.size(), 100u);
  EXPECT_EQ(check_disjoint(p, 3000), 2000);
  EXPECT_EQ(partition_dirichlet(y, 10, 20, 100, 0.5, 11), p);
  EXPECT_NE(partition_dirichlet(y, 10, 20, 100, 0.5, 12), p);
  // All samples taken although classes run out along the way.
  EXPECT_EQ(check_disjoint(partition_dirichlet(y, 10, 30, 100, 0.1, 1), 3000), 3000);
}

TEST(DataPartition, DirichletSkewDecreasesWithAlpha) {
  const std::vector<double> y = balanced_labels(10, 2000);
  std::vector<double> share;
  for (double alpha : {0.01, 0.1, 1.0, 10.0, 1000.0})
    share.push_back(mean_max_share(partition_dirichlet(y, 10, 50, 100, alpha, 2024), y, 10));
  for (size_t i = 1; i < share.size(); ++i) EXPECT_GT(share[i - 1], share[i]) << i;
  // Reference values of E[max share] for 100 multinomial draws from p ~ Dirichlet(alpha * 1_10),
  // from an independent simulation (Python's random.gammavariate); the tolerances are about
  // four standard errors of a mean over 50 users.
  EXPECT_GT(share[0], 0.88);            // reference 0.944
  EXPECT_NEAR(share[1], 0.665, 0.10);   // alpha 0.1
  EXPECT_NEAR(share[2], 0.303, 0.05);   // alpha 1
  EXPECT_NEAR(share[3], 0.177, 0.02);   // alpha 10
  EXPECT_NEAR(share[4], 0.151, 0.012);  // alpha 1000: multinomial noise around 1/10
}

TEST(DataPartition, DirichletLargeAlphaMatchesGlobalProportions) {
  // Classes with shares 0.5, 0.3, 0.2 globally; with alpha huge every user has proportions
  // ~1/3 each, so users' class counts follow p_u, not the global shares.
  std::vector<double> y;
  for (int i = 0; i < 5000; ++i) y.push_back(i < 2500 ? 0.0 : (i < 4000 ? 1.0 : 2.0));
  const Partition p = partition_dirichlet(y, 3, 10, 300, 1e6, 5);
  std::vector<double> c(3, 0);
  for (const auto& u : p)
    for (index_t i : u) c[static_cast<size_t>(y[static_cast<size_t>(i)])] += 1;
  for (double v : c) EXPECT_NEAR(v / 3000.0, 1.0 / 3.0, 0.03);
}

TEST(DataPartition, DirichletErrors) {
  const std::vector<double> y = balanced_labels(2, 10);
  EXPECT_THAT(invalid_input_message([&] { partition_dirichlet(y, 2, 3, 7, 1.0, 1); }),
              HasSubstr("21 samples needed, but only 20"));
  EXPECT_THROW(partition_dirichlet(y, 2, 2, 5, 0.0, 1), InvalidInput);
  EXPECT_THROW(partition_dirichlet(y, 2, 2, 5, -1.0, 1), InvalidInput);
  EXPECT_THROW(partition_dirichlet(y, 2, 2, 5, std::nan(""), 1), InvalidInput);
  EXPECT_THROW(partition_dirichlet(y, 1, 2, 5, 1.0, 1), InvalidInput);  // label 1 >= 1 class
}

// ---------------------------------------------------------------------------------------------
// Samplers

TEST(DataSampler, GammaMomentsMatchShape) {
  // Gamma(a, 1): mean a, variance a. With n = 200000 the mean's standard error is
  // sqrt(a / n) and the variance's about a * sqrt((2 + 6 / a) / n).
  const int n = 200000;
  for (double a : {0.05, 0.3, 1.0, 2.5, 10.0}) {
    Rng rng(77);
    double s = 0, s2 = 0;
    for (int i = 0; i < n; ++i) {
      const double g = sample_gamma(a, rng);
      ASSERT_GE(g, 0.0);
      s += g;
      s2 += g * g;
    }
    const double mean = s / n, var = s2 / n - mean * mean;
    EXPECT_NEAR(mean, a, 5 * std::sqrt(a / n)) << a;
    EXPECT_NEAR(var, a, 6 * a * std::sqrt((2 + 6 / a) / n)) << a;
  }
}

TEST(DataSampler, GammaDistributionAtKnownQuantiles) {
  const int n = 200000;
  // Shape 1 is Exp(1): P(X > 1) = e^-1. Shape 0.5 is Z^2 / 2: P(X < 0.5) = erf(sqrt(0.5)).
  // Binomial standard error at n = 200000 is about 0.0011.
  Rng rng(3);
  int above = 0, below = 0;
  for (int i = 0; i < n; ++i) {
    if (sample_gamma(1.0, rng) > 1.0) ++above;
    if (sample_gamma(0.5, rng) < 0.5) ++below;
  }
  EXPECT_NEAR(above / static_cast<double>(n), std::exp(-1.0), 0.005);
  EXPECT_NEAR(below / static_cast<double>(n), std::erf(std::sqrt(0.5)), 0.005);
  EXPECT_THROW(sample_gamma(0.0, rng), InvalidInput);
  EXPECT_THROW(sample_gamma(INFINITY, rng), InvalidInput);
}

TEST(DataSampler, DirichletSumsToOneWithSymmetricMean) {
  Rng rng(8);
  std::vector<double> mean(4, 0.0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const auto p = sample_dirichlet(4, 0.7, rng);
    ASSERT_EQ(p.size(), 4u);
    EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-12);
    for (size_t k = 0; k < 4; ++k) mean[k] += p[k] / n;
  }
  // Var p_k = (1/4)(3/4) / (4 * 0.7 + 1) ~ 0.049, standard error of the mean ~ 0.0016.
  for (double m : mean) EXPECT_NEAR(m, 0.25, 0.01);
  // Tiny alpha: Gamma variates underflow to 0 in linear space, but the log-space computation
  // still gives a valid point of the simplex, concentrated on one component.
  // E[1 - max] is of order alpha * k here, so the mean largest component is nearly 1.
  double mean_top = 0;
  for (int i = 0; i < 100; ++i) {
    const auto p = sample_dirichlet(10, 1e-4, rng);
    double sum = 0, top = 0;
    for (double v : p) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      top = std::max(top, v);
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
    mean_top += top / 100;
  }
  EXPECT_GT(mean_top, 0.99);
}

// ---------------------------------------------------------------------------------------------
// Rows, splits, standardisation

TEST(DataRows, TakeRowsAndTake) {
  Matrix<double> X(4, 3);
  for (index_t i = 0; i < 4; ++i)
    for (index_t j = 0; j < 3; ++j) X(i, j) = 10.0 * i + j;
  const Matrix<double> S = take_rows(X, {3, 0, 3});
  ASSERT_EQ(S.rows(), 3);
  ASSERT_EQ(S.cols(), 3);
  for (index_t j = 0; j < 3; ++j) {
    EXPECT_EQ(S(0, j), 30.0 + j);
    EXPECT_EQ(S(1, j), 0.0 + j);
    EXPECT_EQ(S(2, j), 30.0 + j);
  }
  EXPECT_EQ(take_rows(X, {}).rows(), 0);
  EXPECT_EQ(take(std::vector<double>{5, 6, 7}, {2, 0}), (std::vector<double>{7, 5}));
  EXPECT_THROW(take_rows(X, {4}), InvalidInput);
  EXPECT_THROW(take_rows(X, {-1}), InvalidInput);
  EXPECT_THAT(invalid_input_message([&] {
                take_rows(X, {0, 2, 7});
              }),
              HasSubstr("row index 7 at position 2 is outside the 4 rows"));
  EXPECT_THROW(take(std::vector<double>{1}, {1}), InvalidInput);
  Matrix<float> F(2, 2, {1, 2, 3, 4});  // column-major: F(1, 0) = 2
  EXPECT_EQ(take_rows(F, {1})(0, 1), 4.0f);
}

TEST(DataRows, VstackKeepsTheRowsOfEveryPartInOrder) {
  Matrix<double> A(2, 3), B(1, 3), E(0, 3);
  for (index_t j = 0; j < 3; ++j) {
    A(0, j) = 10.0 + j;
    A(1, j) = 20.0 + j;
    B(0, j) = 30.0 + j;
  }
  const Matrix<double> S = vstack(std::vector<Matrix<double>>{A, E, B});
  ASSERT_EQ(S.rows(), 3);
  ASSERT_EQ(S.cols(), 3);
  for (index_t j = 0; j < 3; ++j) {
    EXPECT_EQ(S(0, j), 10.0 + j);
    EXPECT_EQ(S(1, j), 20.0 + j);
    EXPECT_EQ(S(2, j), 30.0 + j);
  }
  // The pointer form reads the parts in place; a part may appear twice.
  const Matrix<double> P = vstack(std::vector<const Matrix<double>*>{&B, &A, &B});
  ASSERT_EQ(P.rows(), 4);
  EXPECT_EQ(P(0, 2), 32.0);
  EXPECT_EQ(P(2, 1), 21.0);
  EXPECT_EQ(P(3, 0), 30.0);
  EXPECT_EQ(vstack(std::vector<Matrix<double>>{}).rows(), 0);
  EXPECT_THAT(invalid_input_message([&] {
                vstack(std::vector<Matrix<double>>{A, Matrix<double>(1, 2)});
              }),
              HasSubstr("part 1 has 2 columns, expected the 3 of part 0"));
}

TEST(DataRows, RandomSplitAndTakeDataset) {
  Dataset d;
  d.name = "toy";
  d.X = Matrix<double>(50, 2);
  for (index_t i = 0; i < 50; ++i) {
    d.X(i, 0) = i;
    d.X(i, 1) = -i;
    d.y.push_back(static_cast<double>(i % 2));
  }
  d.num_classes = 2;
  d.feature_names = {"a", "b"};
  const TrainTest tt = random_split(d, 12, 4);
  ASSERT_EQ(tt.test.samples(), 12);
  ASSERT_EQ(tt.train.samples(), 38);
  std::set<double> all;
  for (const Dataset* part : {&tt.train, &tt.test})
    for (index_t i = 0; i < part->samples(); ++i) {
      EXPECT_EQ(part->X(i, 1), -part->X(i, 0));
      EXPECT_EQ(part->y[static_cast<size_t>(i)], std::fmod(part->X(i, 0), 2.0));
      all.insert(part->X(i, 0));
    }
  EXPECT_EQ(all.size(), 50u);
  EXPECT_EQ(tt.test.feature_names, d.feature_names);
  EXPECT_EQ(random_split(d, 12, 4).test.X.values(), tt.test.X.values());
  EXPECT_NE(random_split(d, 12, 5).test.X.values(), tt.test.X.values());
  EXPECT_THROW(random_split(d, 51, 1), InvalidInput);
}

TEST(DataRows, StandardizerFitsColumnsAndLeavesOthers) {
  Matrix<double> X(4, 3, {1, 2, 3, 4, /*col 1*/ 5, 5, 5, 5, /*col 2*/ 0, 1, 0, 1});
  const Standardizer s = Standardizer::fit(X, {0, 1});
  EXPECT_DOUBLE_EQ(s.mean[0], 2.5);
  EXPECT_DOUBLE_EQ(s.sd[0], std::sqrt(1.25));
  EXPECT_EQ(s.sd[1], 1.0);  // constant column
  s.apply(X);
  EXPECT_DOUBLE_EQ(X(0, 0), -1.5 / std::sqrt(1.25));
  EXPECT_EQ(X(2, 1), 0.0);
  EXPECT_EQ(X(1, 2), 1.0);  // untouched
  EXPECT_THROW(Standardizer::fit(X, {3}), InvalidInput);
  EXPECT_THROW(Standardizer::fit(Matrix<double>(0, 2), {0}), InvalidInput);
}

// ---------------------------------------------------------------------------------------------
// Paper 004's data preparation: stratified subsample and repeated rows

TEST(DataSubsample, StratifiedAllocationIsLargestRemainder) {
  // Pima: 500 / 268 of 768, 750 kept: quotas 488.28 and 261.72, the one row left goes to the
  // larger remainder.
  EXPECT_EQ(stratified_allocation({500, 268}, 750), (std::vector<index_t>{488, 262}));
  // Quotas 3.5, 2.1, 1.4: floors 3 + 2 + 1, the last row to the class with remainder .5.
  EXPECT_EQ(stratified_allocation({5, 3, 2}, 7), (std::vector<index_t>{4, 2, 1}));
  // Equal remainders: the smaller class index first.
  EXPECT_EQ(stratified_allocation({1, 1, 1}, 2), (std::vector<index_t>{1, 1, 0}));
  EXPECT_EQ(stratified_allocation({4, 0, 6}, 0), (std::vector<index_t>{0, 0, 0}));
  EXPECT_EQ(stratified_allocation({4, 0, 6}, 10), (std::vector<index_t>{4, 0, 6}));
  // The rule on many shapes: the counts add up to n, each is floor or ceil of its quota and
  // within the class.
  Rng rng(5);
  for (int rep = 0; rep < 50; ++rep) {
    std::vector<index_t> sizes;
    index_t total = 0;
    const index_t k = 1 + static_cast<index_t>(rng.below(6));
    for (index_t c = 0; c < k; ++c) {
      sizes.push_back(static_cast<index_t>(rng.below(40)));
      total += sizes.back();
    }
    for (index_t n = 0; n <= total; ++n) {
      const auto counts = stratified_allocation(sizes, n);
      ASSERT_EQ(counts.size(), sizes.size());
      index_t sum = 0;
      for (size_t c = 0; c < sizes.size(); ++c) {
        const double quota =
            static_cast<double>(n) * static_cast<double>(sizes[c]) / static_cast<double>(total);
        EXPECT_GE(counts[c], static_cast<index_t>(std::floor(quota + 1e-9))) << n;
        EXPECT_LE(counts[c], static_cast<index_t>(std::ceil(quota - 1e-9))) << n;
        EXPECT_LE(counts[c], sizes[c]);
        sum += counts[c];
      }
      EXPECT_EQ(sum, n);
    }
  }
  EXPECT_THAT(invalid_input_message([] {
                stratified_allocation({3, 4}, 8);
              }),
              HasSubstr("8 rows requested, expected 0..7"));
  EXPECT_THAT(invalid_input_message([] {
                stratified_allocation({3, 4}, -1);
              }),
              HasSubstr("expected 0..7"));
  EXPECT_THAT(invalid_input_message([] {
                stratified_allocation({3, -4}, 1);
              }),
              HasSubstr("class 1 has size -4"));
}

namespace {
// Class counts of the samples idx.
std::vector<index_t> counts_of(const std::vector<double>& y, const std::vector<index_t>& idx,
                               index_t k) {
  std::vector<index_t> c(static_cast<size_t>(k), 0);
  for (index_t i : idx) ++c[static_cast<size_t>(y[static_cast<size_t>(i)])];
  return c;
}

}  // namespace

TEST(DataSubsample, StratifiedKeepsProportionsAndFollowsTheSeed) {
  // Pima's class sizes, 500 and 268, scattered over the rows (7 i mod 768 runs through
  // 0..767 once, 7 and 768 being coprime).
  std::vector<double> y;
  for (index_t i = 0; i < 768; ++i) y.push_back((7 * i) % 768 < 268 ? 1.0 : 0.0);
  ASSERT_EQ(std::count(y.begin(), y.end(), 1.0), 268);
  const auto a = subsample(y, 2, 750, true, 7);
  ASSERT_EQ(a.size(), 750u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<index_t>(a.begin(), a.end()).size(), 750u);
  EXPECT_GE(a.front(), 0);
  EXPECT_LT(a.back(), 768);
  EXPECT_EQ(counts_of(y, a, 2), stratified_allocation({500, 268}, 750));
  EXPECT_EQ(subsample(y, 2, 750, true, 7), a);  // same seed, same rows
  EXPECT_NE(subsample(y, 2, 750, true, 8), a);  // another seed, other rows
  EXPECT_EQ(counts_of(y, subsample(y, 2, 750, true, 8), 2), (std::vector<index_t>{488, 262}));
  // Unstratified: a uniform sample, whose class counts vary with the seed.
  std::set<std::vector<index_t>> uniform_counts;
  for (std::uint64_t s = 0; s < 20; ++s) {
    const auto u = subsample(y, 2, 750, false, s);
    ASSERT_EQ(std::set<index_t>(u.begin(), u.end()).size(), 750u);
    uniform_counts.insert(counts_of(y, u, 2));
  }
  EXPECT_GT(uniform_counts.size(), 1u);
  EXPECT_EQ(subsample(y, 2, 768, true, 3).size(), 768u);
  EXPECT_TRUE(subsample(y, 2, 0, true, 3).empty());
  EXPECT_THAT(invalid_input_message([&] { subsample(y, 2, 769, true, 1); }),
              HasSubstr("769 samples requested, expected 0..768"));
  EXPECT_THAT(invalid_input_message([&] { subsample(y, 2, -2, false, 1); }),
              HasSubstr("expected 0..768"));
  EXPECT_THAT(invalid_input_message([] {
                subsample({0, 1, 2}, 2, 1, true, 1);
              }),
              HasSubstr("not a class index"));
}

TEST(DataSubsample, StratifiedDrawIsUniformWithinEachClass) {
  // 60 rows of class 0 and 40 of class 1, 50 kept: 30 and 20, so every row is kept with
  // probability 1/2. Over 400 seeds each row's count is Binomial(400, 1/2): 200 +- 10.
  std::vector<double> y;
  for (index_t i = 0; i < 100; ++i) y.push_back(i % 5 < 3 ? 0.0 : 1.0);
  std::vector<int> hits(100, 0);
  for (std::uint64_t s = 0; s < 400; ++s)
    for (index_t i : subsample(y, 2, 50, true, 1000 + s)) ++hits[static_cast<size_t>(i)];
  for (index_t i = 0; i < 100; ++i) {
    EXPECT_GT(hits[static_cast<size_t>(i)], 150) << i;
    EXPECT_LT(hits[static_cast<size_t>(i)], 250) << i;
  }
}

TEST(DataRows, RepeatRowsCyclesThroughTheRowsInOrder) {
  Dataset d;
  d.name = "three";
  d.num_classes = 2;
  d.X = Matrix<double>(3, 2);
  for (index_t i = 0; i < 3; ++i) {
    d.X(i, 0) = 10.0 * i;
    d.X(i, 1) = -1.0 * i;
    d.y.push_back(static_cast<double>(i % 2));
  }
  d.feature_names = {"a", "b"};
  d.class_names = {"no", "yes"};
  d.continuous_columns = {0};
  const Dataset r = repeat_rows(d, 8);
  ASSERT_EQ(r.samples(), 8);
  ASSERT_EQ(r.features(), 2);
  for (index_t k = 0; k < 8; ++k) {
    EXPECT_EQ(r.X(k, 0), 10.0 * (k % 3)) << k;
    EXPECT_EQ(r.X(k, 1), -1.0 * (k % 3)) << k;
    EXPECT_EQ(r.y[static_cast<size_t>(k)], static_cast<double>((k % 3) % 2)) << k;
  }
  EXPECT_EQ(r.feature_names, d.feature_names);
  EXPECT_EQ(r.class_names, d.class_names);
  EXPECT_EQ(r.continuous_columns, d.continuous_columns);
  EXPECT_EQ(r.num_classes, 2);
  EXPECT_EQ(repeat_rows(d, 3).X.values(), d.X.values());
  EXPECT_THAT(invalid_input_message([&] { repeat_rows(d, 2); }),
              HasSubstr("2 rows requested, expected at least the 3 rows of 'three'"));
  Dataset empty = d;
  empty.X = Matrix<double>(0, 2);
  empty.y.clear();
  EXPECT_THAT(invalid_input_message([&] { repeat_rows(empty, 5); }), HasSubstr("no rows"));
}

TEST(DataColumns, TakeColumnsGathersInOrderAndRejectsBadIndices) {
  Matrix<double> X(3, 4);
  for (index_t i = 0; i < 3; ++i)
    for (index_t j = 0; j < 4; ++j)
      X(i, j) = 10.0 * static_cast<double>(i) + static_cast<double>(j);
  const Matrix<double> Y = take_columns(X, {3, 0, 3});
  ASSERT_EQ(Y.rows(), 3);
  ASSERT_EQ(Y.cols(), 3);
  for (index_t i = 0; i < 3; ++i) {
    EXPECT_EQ(Y(i, 0), X(i, 3));
    EXPECT_EQ(Y(i, 1), X(i, 0));
    EXPECT_EQ(Y(i, 2), X(i, 3));
  }
  EXPECT_EQ(take_columns(X, {}).cols(), 0);
  EXPECT_THROW(take_columns(X, {4}), InvalidInput);
  EXPECT_THROW(take_columns(X, {-1}), InvalidInput);
}

TEST(DataColumns, AttributeBlocksKeepOneHotGroupsTogether) {
  // age, workclass (3 levels), education-num, sex (2 levels), hours: 5 attributes, 8 columns.
  const std::vector<std::string> names = {"age",         "workclass=a",   "workclass=b",
                                          "workclass=c", "education-num", "sex=F",
                                          "sex=M",       "hours"};
  const auto two = attribute_blocks(names, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], (std::vector<index_t>{0, 1, 2, 3, 4}));  // 3 attributes
  EXPECT_EQ(two[1], (std::vector<index_t>{5, 6, 7}));        // 2 attributes
  const auto five = attribute_blocks(names, 5);
  EXPECT_EQ(five[1], (std::vector<index_t>{1, 2, 3}));
  EXPECT_EQ(five[4], (std::vector<index_t>{7}));
  // Levels of one attribute that are not adjacent still land in its block.
  const auto mixed = attribute_blocks({"x=1", "y", "x=2", "z"}, 2);
  EXPECT_EQ(mixed[0], (std::vector<index_t>{0, 1, 2}));
  EXPECT_EQ(mixed[1], (std::vector<index_t>{3}));
  EXPECT_THROW(attribute_blocks(names, 6), InvalidInput);  // a block would be empty
  EXPECT_THROW(attribute_blocks(names, 0), InvalidInput);
  EXPECT_THROW(attribute_blocks({}, 1), InvalidInput);
}
