// User side: anchors, secret bases and the full DC round trip of paper 001, Algorithm 1.
#include <gtest/gtest.h>

#include <cmath>

#include "dcalign/align.hpp"
#include "dcalign/random.hpp"
#include "dcalign/user.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::frob;
using testing::frob_diff;
using testing::mul;

TEST(Anchor, ReproducibleFromSeedAndInRange) {
  const auto a1 = make_anchor<double>(50, 7, AnchorKind::uniform, 42);
  const auto a2 = make_anchor<double>(50, 7, AnchorKind::uniform, 42);
  const auto a3 = make_anchor<double>(50, 7, AnchorKind::uniform, 43);
  EXPECT_EQ(a1.values(), a2.values());
  EXPECT_NE(a1.values(), a3.values());
  double mean = 0;
  for (double v : a1.values()) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
    mean += v;
  }
  EXPECT_NEAR(mean / a1.size(), 0.5, 0.05);
  const auto n = make_anchor<double>(200, 50, AnchorKind::normal, 1);
  double s = 0, s2 = 0;
  for (double v : n.values()) s += v, s2 += v * v;
  EXPECT_NEAR(s / n.size(), 0.0, 0.03);
  EXPECT_NEAR(s2 / n.size(), 1.0, 0.05);
  EXPECT_THROW(make_anchor<double>(0, 3, AnchorKind::uniform, 1), InvalidInput);
}

TEST(Random, HaarMatrixIsOrthogonalAndSeeded) {
  Rng r1(5), r2(5);
  const auto q1 = random_orthogonal<double>(12, r1), q2 = random_orthogonal<double>(12, r2);
  EXPECT_EQ(q1.values(), q2.values());
  EXPECT_LE(testing::orthogonality_error(q1), 1e-13);
  // Haar measure: the average of Q(0,0)^2 over draws is 1/n.
  Rng r(9);
  double s = 0;
  const int draws = 2000;
  for (int k = 0; k < draws; ++k) {
    const auto q = random_orthogonal<double>(4, r);
    s += q(0, 0) * q(0, 0);
  }
  EXPECT_NEAR(s / draws, 0.25, 0.02);
}

TEST(SecretBasis, TopRightSingularVectorsSpanDominantSubspace) {
  Rng rng(3);
  const Matrix<double> X = random_normal<double>(40, 9, rng);
  const auto V = top_right_singular_vectors(X, 4, false);
  EXPECT_LE(testing::orthogonality_error(V), 1e-13);
  // X^T X V = V diag(lambda): the columns are eigenvectors of the Gram matrix.
  const auto g = mul(X, X, true, false);
  const auto gv = mul(g, V);
  for (index_t j = 0; j < 4; ++j) {
    double lambda = 0;
    for (index_t i = 0; i < 9; ++i) lambda += V(i, j) * gv(i, j);
    for (index_t i = 0; i < 9; ++i) EXPECT_NEAR(gv(i, j), lambda * V(i, j), 1e-10 * frob(g));
  }
  EXPECT_THROW(top_right_singular_vectors(X, 10, false), InvalidInput);
}

TEST(User, ReleasesOnlyRepresentationsAndGuardsTheBasis) {
  Rng rng(4);
  User<double> u(random_normal<double>(30, 10, rng), "hospital A");
  EXPECT_THROW(u.release_data(), InvalidInput);
  EXPECT_THROW(u.reveal_secret_basis(), InvalidInput);
  u.choose_secret_basis(5, Mixing::haar, 8);
  EXPECT_EQ(u.release_data().cols(), 5);
  EXPECT_LE(testing::orthogonality_error(u.reveal_secret_basis()), 1e-13);
  const auto A = make_anchor<double>(20, 10, AnchorKind::uniform, 1);
  EXPECT_EQ(u.release_anchor(A).rows(), 20);
  try {
    u.release_anchor(make_anchor<double>(20, 11, AnchorKind::uniform, 1));
    ADD_FAILURE();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("hospital A"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("expected 10"), std::string::npos);
  }
  u.choose_secret_basis(5, Mixing::uniform, 8);
  EXPECT_GT(testing::orthogonality_error(u.reveal_secret_basis()), 0.1);
}

// Algorithm 1 end to end under SameSpan-Orth: the same new sample mapped by any user with its
// own F_i G_i lands on the same point (eq. 9), so one model h serves everyone.
// dcalign predict's Y F G with the basis held outside a User: User::map's products, bit for bit;
// shapes that do not chain are refused.
TEST(User, MapToCollaborationIsUserMap) {
  Rng rng(4);
  User<double> u(random_normal<double>(30, 6, rng));
  u.choose_secret_basis(3, Mixing::uniform, 9);
  const Matrix<double> Y = random_normal<double>(8, 6, rng), G = random_normal<double>(3, 3, rng);
  EXPECT_EQ(map_to_collaboration(Y, u.reveal_secret_basis(), G).values(), u.map(Y, G).values());
  EXPECT_THROW(map_to_collaboration(random_normal<double>(8, 5, rng), u.reveal_secret_basis(), G),
               InvalidInput);
  EXPECT_THROW(map_to_collaboration(Y, u.reveal_secret_basis(), random_normal<double>(4, 4, rng)),
               InvalidInput);
}

TEST(User, RoundTripMapsSharedSampleIdentically) {
  Rng rng(6);
  const index_t m = 15, l = 5, c = 4;
  const Matrix<double> basis = random_normal<double>(l + 2, m, rng);
  std::vector<User<double>> users;
  for (index_t i = 0; i < c; ++i)
    users.emplace_back(mul(random_normal<double>(50, l + 2, rng), basis));
  const auto V1 = top_right_singular_vectors(
      Matrix<double>(mul(random_normal<double>(50, l + 2, rng), basis)), l, false);
  for (index_t i = 0; i < c; ++i) users[i].choose_secret_basis_in(V1, Mixing::haar, 100 + i);
  const auto A = make_anchor<double>(60, m, AnchorKind::uniform, 2);
  std::vector<Matrix<double>> released;
  for (const auto& u : users) released.push_back(u.release_anchor(A));
  const auto res = align(Stack<double>::from_matrices(released), AlignOptions{});
  const Matrix<double> y = random_normal<double>(3, m, rng);
  const auto ref = users[0].map(y, res.G.matrix(0));
  for (index_t i = 1; i < c; ++i)
    EXPECT_LE(frob_diff(users[i].map(y, res.G.matrix(i)), ref), 1e-10 * frob(ref)) << i;
}

}  // namespace
}  // namespace dcalign
