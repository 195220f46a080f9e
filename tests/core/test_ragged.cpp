// Users with different latent dimensions l_i (align_ragged): Imakura-DC and Kawakami-DC with
// l_i x dim change-of-basis matrices, against align() where every l_i is equal and against the
// methods' own optimality conditions where they differ.
#include <gtest/gtest.h>

#include <random>

#include "dcalign/align.hpp"
#include "dcalign/error.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

// A x (F_i) with A a x m Gaussian and F_i m x l_i Gaussian: anchors of one span per user.
std::vector<Matrix<double>> ragged_anchors(index_t a, const std::vector<index_t>& l,
                                           std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d;
  const index_t m = 12;
  Matrix<double> A(a, m);
  for (index_t k = 0; k < A.size(); ++k) A.data()[k] = d(gen);
  std::vector<Matrix<double>> out;
  for (index_t li : l) {
    Matrix<double> F(m, li), AF(a, li);
    for (index_t k = 0; k < F.size(); ++k) F.data()[k] = d(gen);
    for (index_t j = 0; j < li; ++j)
      for (index_t r = 0; r < a; ++r) {
        double s = 0;
        for (index_t k = 0; k < m; ++k) s += A(r, k) * F(k, j);
        AF(r, j) = s;
      }
    out.push_back(AF);
  }
  return out;
}

// Users whose spans share exactly `common` directions: A_i = [B C_i] M_i with B (a x common)
// the same for everyone, C_i (a x (l_i - common)) and M_i (l_i x l_i, invertible) their own.
std::vector<Matrix<double>> shared_span_anchors(index_t a, const std::vector<index_t>& l,
                                                index_t common, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d;
  Matrix<double> B(a, common);
  for (index_t k = 0; k < B.size(); ++k) B.data()[k] = d(gen);
  std::vector<Matrix<double>> out;
  for (index_t li : l) {
    Matrix<double> BC(a, li), M(li, li);
    for (index_t j = 0; j < li; ++j)
      for (index_t r = 0; r < a; ++r) BC(r, j) = j < common ? B(r, j) : d(gen);
    for (index_t k = 0; k < M.size(); ++k) M.data()[k] = d(gen);
    out.push_back(testing::mul(BC, M));
  }
  return out;
}

double max_abs_diff(const Matrix<double>& x, const MatrixView<const double>& y) {
  double worst = 0;
  for (index_t j = 0; j < x.cols(); ++j)
    for (index_t i = 0; i < x.rows(); ++i) worst = std::max(worst, std::abs(x(i, j) - y(i, j)));
  return worst;
}

TEST(Ragged, EqualDimensionsGiveWhatAlignGives) {
  const auto A = ragged_anchors(60, {5, 5, 5, 5}, 1);
  for (Method m : {Method::imakura, Method::kawakami}) {
    SCOPED_TRACE(to_string(m));
    AlignOptions opts;
    opts.method = m;
    opts.seed = 3;
    const auto uniform = align(Stack<double>::from_matrices(A), opts);
    const auto ragged = align_ragged(A, 5, opts);
    ASSERT_EQ(ragged.G.size(), 4u);
    for (index_t i = 0; i < 4; ++i)
      EXPECT_LT(max_abs_diff(ragged.G[static_cast<std::size_t>(i)], uniform.G[i]), 1e-10)
          << "user " << i;
    EXPECT_NEAR(ragged.report.objective, uniform.report.objective,
                1e-9 * (1 + uniform.report.objective));
  }
}

TEST(Ragged, ImakuraSolvesEachUsersLeastSquaresAgainstOneOrthonormalTarget) {
  const std::vector<index_t> l = {4, 6, 9};
  const auto A = ragged_anchors(50, l, 2);
  AlignOptions opts;
  opts.method = Method::imakura;
  const auto r = align_ragged(A, 3, opts);
  const Matrix<double>& Z = r.target;
  ASSERT_EQ(Z.rows(), 50);
  ASSERT_EQ(Z.cols(), 3);
  // Z = U: orthonormal columns.
  const auto ZtZ = testing::mul(Z, Z, true);
  for (index_t i = 0; i < 3; ++i)
    for (index_t j = 0; j < 3; ++j) EXPECT_NEAR(ZtZ(i, j), i == j ? 1.0 : 0.0, 1e-12);
  // G_i (l_i x 3) satisfies the normal equations A_i^T (A_i G_i - Z) = 0.
  for (std::size_t i = 0; i < l.size(); ++i) {
    const auto& G = r.G[i];
    ASSERT_EQ(G.rows(), l[i]);
    ASSERT_EQ(G.cols(), 3);
    Matrix<double> res = testing::mul(A[i], G);
    for (index_t k = 0; k < res.size(); ++k) res.data()[k] -= Z.data()[k];
    const auto normal = testing::mul(A[i], res, true);
    EXPECT_LT(testing::frob(normal), 1e-10 * testing::frob(A[i]) * testing::frob(Z)) << i;
  }
}

TEST(Ragged, KawakamiKeepsItsConstraintAndAlignsTheUsers) {
  const std::vector<index_t> l = {7, 5, 10, 6};
  const auto A = shared_span_anchors(80, l, 4, 3);
  AlignOptions opts;
  opts.method = Method::kawakami;
  const auto r = align_ragged(A, 4, opts);
  // sum_i ||A_i g_ik||^2 = 1 for every column k (problem (47)'s constraint).
  EXPECT_LT(r.report.constraint_error, 1e-12);
  // The four common directions are in every user's span, and only they: the top singular
  // values of [Q_1 ... Q_c] are sqrt(c) there, so every A_i G_i is the same U / sqrt(c) and the
  // objective vanishes (against sum_i ||A_i G_i||^2 = dim).
  EXPECT_LT(r.report.objective, 1e-20 * 4 + 1e-24) << r.report.objective;
  for (std::size_t i = 0; i < l.size(); ++i) EXPECT_EQ(r.G[i].rows(), l[i]);
  // The eigen form is solved through the QR-SVD form and says so.
  opts.kawakami_form = KawakamiForm::eigen;
  const auto e = align_ragged(A, 4, opts);
  EXPECT_NE(e.report.svd.find("eigen form solved through"), std::string::npos);
}

TEST(Ragged, FloatAgreesWithDouble) {
  const auto A = ragged_anchors(40, {3, 5}, 4);
  std::vector<Matrix<float>> Af;
  for (const auto& m : A) {
    Matrix<float> f(m.rows(), m.cols());
    std::transform(m.data(), m.data() + m.size(), f.data(), [](double v) { return float(v); });
    Af.push_back(f);
  }
  AlignOptions opts;
  opts.method = Method::imakura;
  const auto d = align_ragged(A, 2, opts);
  const auto f = align_ragged(Af, 2, opts);
  for (std::size_t i = 0; i < 2; ++i)
    for (index_t k = 0; k < d.G[i].size(); ++k)
      EXPECT_NEAR(f.G[i].data()[k], d.G[i].data()[k], 1e-3 * (1 + std::abs(d.G[i].data()[k])));
}

void expect_invalid(const std::function<void()>& body, const std::string& words) {
  try {
    body();
    ADD_FAILURE() << "expected InvalidInput with '" << words << "'";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Ragged, WhatCannotWorkIsRefusedWithTheReason) {
  const auto A = ragged_anchors(30, {3, 5}, 5);
  AlignOptions opts;
  for (Method m : {Method::odc, Method::gopp, Method::opp}) {
    opts.method = m;
    expect_invalid([&] { align_ragged(A, 3, opts); }, "l_i = 3, 5: use imakura or kawakami");
  }
  opts.method = Method::imakura;
  expect_invalid([&] { align_ragged(std::vector<Matrix<double>>{}, 3, opts); }, "no users");
  expect_invalid([&] { align_ragged(A, 0, opts); }, "dim 0 is out of range");
  expect_invalid([&] { align_ragged(A, 9, opts); }, "expected 1 to min(a, sum of l_i) = 8");
  auto bad = A;
  bad[1] = Matrix<double>(29, 5);
  expect_invalid([&] { align_ragged(bad, 3, opts); }, "user 1's anchor has 29 rows");
  bad = A;
  bad[1](4, 2) = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { align_ragged(bad, 3, opts); }, "user 1's anchor has a non-finite entry");
  // A rank-deficient user (a repeated column), for both methods.
  bad = A;
  for (index_t r = 0; r < 30; ++r) bad[0](r, 2) = bad[0](r, 0);
  expect_invalid([&] { align_ragged(bad, 3, opts); }, "user 0");
  opts.method = Method::kawakami;
  expect_invalid([&] { align_ragged(bad, 3, opts); }, "user 0");
}

}  // namespace
}  // namespace dcalign
