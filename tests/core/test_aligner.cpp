// Enrolment of users who join after the fit (include/dcalign/aligner.hpp): what each method's
// enrolment computes, checked against independent host computations; the saved model's round
// trip, atomic writes and every way a model or an A_new can be bad.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "dcalign/aligner.hpp"
#include "dcalign/npy.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;
using testing::frob;
using testing::frob_diff;
using testing::mul;
using testing::to_double;

const Method kAll[] = {Method::odc, Method::imakura, Method::kawakami, Method::gopp};

/// Users [from, from + count) of a stack.
template <typename T>
Stack<T> users(const Stack<T>& s, index_t from, index_t count) {
  std::vector<Matrix<T>> ms;
  for (index_t k = from; k < from + count; ++k) ms.push_back(s.matrix(k));
  return Stack<T>::from_matrices(ms);
}

/// Least squares X = A^+ B through modified Gram-Schmidt applied twice ("twice is enough"), in
/// double: independent of the LAPACK SVD behind Primitives::lstsq_batched.
Matrix<double> lstsq_reference(const Matrix<double>& A, const Matrix<double>& B) {
  const index_t a = A.rows(), l = A.cols();
  Matrix<double> Q = A, R(l, l);
  for (index_t j = 0; j < l; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (index_t i = 0; i < j; ++i) {
        double r = 0;
        for (index_t t = 0; t < a; ++t) r += Q(t, i) * Q(t, j);
        R(i, j) += r;
        for (index_t t = 0; t < a; ++t) Q(t, j) -= r * Q(t, i);
      }
    double n = 0;
    for (index_t t = 0; t < a; ++t) n += Q(t, j) * Q(t, j);
    R(j, j) = std::sqrt(n);
    for (index_t t = 0; t < a; ++t) Q(t, j) /= R(j, j);
  }
  Matrix<double> X = mul(Q, B, true, false);  // Q^T B, then R X = Q^T B by back substitution
  for (index_t c = 0; c < X.cols(); ++c)
    for (index_t i = l - 1; i >= 0; --i) {
      double s = X(i, c);
      for (index_t k = i + 1; k < l; ++k) s -= R(i, k) * X(k, c);
      X(i, c) = s / R(i, i);
    }
  return X;
}

/// True when the symmetric matrix S is positive definite (a Cholesky factorisation exists).
bool positive_definite(const Matrix<double>& S) {
  const index_t n = S.rows();
  Matrix<double> L(n, n);
  for (index_t j = 0; j < n; ++j) {
    double d = S(j, j);
    for (index_t k = 0; k < j; ++k) d -= L(j, k) * L(j, k);
    if (!(d > 0)) return false;
    L(j, j) = std::sqrt(d);
    for (index_t i = j + 1; i < n; ++i) {
      double s = S(i, j);
      for (index_t k = 0; k < j; ++k) s -= L(i, k) * L(j, k);
      L(i, j) = s / L(j, j);
    }
  }
  return true;
}

template <typename F>
void expect_error_of(F&& f, const std::vector<std::string>& fragments, bool io) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (io)
      EXPECT_NE(dynamic_cast<const IoError*>(&e), nullptr) << "not an IoError: " << msg;
    else
      EXPECT_NE(dynamic_cast<const InvalidInput*>(&e), nullptr) << "not InvalidInput: " << msg;
    for (const auto& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "'" << frag << "' missing in: " << msg;
  }
}
template <typename F>
void expect_invalid(F&& f, const std::vector<std::string>& fragments) {
  expect_error_of(f, fragments, false);
}
template <typename F>
void expect_io(F&& f, const std::vector<std::string>& fragments) {
  expect_error_of(f, fragments, true);
}

class TempDir : public dcalign::testing::TempDir {
 public:
  TempDir() : dcalign::testing::TempDir("dcalign_aligner") {}
};

template <typename T>
class AlignerEnrol : public ::testing::Test {
 protected:
  static constexpr bool kDouble = std::is_same_v<T, double>;
  // Relative tolerance for a G computed twice from the same data with different summation
  // orders: the products M_i = A_i^T Z differ by a few eps(T) relative, amplified by at most
  // cond(M_i) < 4e3 for the anchors drawn here (usually far less). Measured differences are
  // <= 3e-15 (double) and <= 4e-6 (float); 1e-10 and 1e-4 leave margins of 1e4 and 25.
  static double tol() { return kDouble ? 1e-10 : 1e-4; }
  // Orthogonality of a polar factor: a few eps(T) * l.
  static double orth_tol() { return kDouble ? 1e-12 : 1e-5; }
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AlignerEnrol, Precisions);

// ODC's G_i depends only on A_i and the target Z = A_r O: fitting on user 0 alone (c = 1,
// r = 0) and enrolling the others one at a time must reproduce the batch alignment of all users
// with the same seed. The only differences are the summation orders of the products A_i^T Z
// (one big product W^T Z in the batch, one per user here), so the tolerance is tol() relative
// to ||G_i||_F = sqrt(l) (see tol()).
TYPED_TEST(AlignerEnrol, OdcOneAtATimeEqualsBatchAlignment) {
  using T = TypeParam;
  struct Case {
    index_t a, m, l, c;
    SpanCondition cond;
    PolarMethod polar;
  } cases[] = {
      {60, 20, 6, 5, SpanCondition::diff_span_orth, PolarMethod::automatic},
      {60, 20, 6, 5, SpanCondition::same_span_orth, PolarMethod::svd},
      {200, 40, 20, 6, SpanCondition::diff_span_orth, PolarMethod::iterative},
      {25, 8, 1, 3, SpanCondition::diff_span_orth, PolarMethod::automatic},  // l = 1
      {8, 8, 8, 3, SpanCondition::same_span_orth, PolarMethod::automatic},   // l = a
  };
  for (const auto& cs : cases) {
    SCOPED_TRACE("(a, m, l, c) = (" + std::to_string(cs.a) + ", " + std::to_string(cs.m) + ", " +
                 std::to_string(cs.l) + ", " + std::to_string(cs.c) + ") " + to_string(cs.cond) +
                 " polar " + to_string(cs.polar));
    const auto all =
        testing::released_anchors<T>(testing::make_synthetic(cs.a, cs.m, cs.l, cs.c, cs.cond, 17));
    AlignOptions opts;
    opts.seed = 5;
    opts.polar = cs.polar;
    const Alignment<T> batch = align(all, opts);

    Aligner<T> aligner;
    const Alignment<T> first = aligner.fit(users(all, 0, 1), opts);
    EXPECT_EQ(aligner.users(), 1);
    const double scale = std::sqrt(double(cs.l));
    EXPECT_LE(frob_diff(to_double(first.G[0]), to_double(batch.G[0])), this->tol() * scale);
    for (index_t i = 1; i < cs.c; ++i) {
      const Enrolment<T> e = aligner.enroll(all.matrix(i));
      EXPECT_LE(frob_diff(to_double(e.G), to_double(batch.G[i])), this->tol() * scale)
          << "user " << i;
      EXPECT_LE(e.report.orthogonality_error.at(0), this->orth_tol() * scale);
    }
    // The batched enrolment of users 1..c-1 gives the same.
    if (cs.c > 1) {
      const BatchEnrolment<T> b = aligner.enroll(users(all, 1, cs.c - 1));
      ASSERT_EQ(b.G.count(), cs.c - 1);
      for (index_t i = 1; i < cs.c; ++i)
        EXPECT_LE(frob_diff(to_double(b.G[i - 1]), to_double(batch.G[i])), this->tol() * scale)
            << "user " << i;
      EXPECT_EQ(b.report.users, cs.c - 1);
      EXPECT_EQ(b.report.residual.size(), static_cast<size_t>(cs.c - 1));
    }
  }
}

// ODC with an explicit target (paper 004) keeps that target: enrolment equals the batch
// alignment of all users to it. Run on an explicitly created single-threaded backend.
TYPED_TEST(AlignerEnrol, OdcExplicitTargetIsKept) {
  using T = TypeParam;
  const auto all = testing::released_anchors<T>(
      testing::make_synthetic(50, 16, 5, 4, SpanCondition::diff_span_orth, 12));
  Rng rng(4);
  AlignOptions opts;
  opts.target = random_normal<double>(50, 5, rng);
  BackendOptions bo;
  bo.threads = 1;
  auto backend = make_backend(Device::cpu, bo);
  const auto batch = align(all, opts, *backend);
  Aligner<T> aligner;
  aligner.fit(users(all, 0, 2), opts, *backend);
  EXPECT_LE(frob_diff(to_double(aligner.target()), opts.target), 1e-6 * frob(opts.target))
      << "the kept target is not the given one (up to rounding to T)";
  for (index_t i = 2; i < 4; ++i) {
    const auto e = aligner.enroll(all.matrix(i), *backend);
    EXPECT_LE(frob_diff(to_double(e.G), to_double(batch.G[i])), this->tol() * std::sqrt(5.0))
        << "user " << i;
  }
  TempDir tmp;
  aligner.save(tmp.file("m"));
  const auto j = nlohmann::json::parse(std::ifstream(tmp.file("m/model.json")));
  EXPECT_EQ(j["options"]["target"], "explicit");
}

// Under SameSpan-Orth a new user is aligned exactly (Theorem 5.3 holds for any number of users):
// its residual against A_0 O is zero up to rounding, and F_new G_new = F_0 G_0.
TYPED_TEST(AlignerEnrol, OdcNewUserUnderSameSpanOrthIsConcordant) {
  using T = TypeParam;
  const auto syn = testing::make_synthetic(80, 20, 5, 4, SpanCondition::same_span_orth, 3);
  const auto all = testing::released_anchors<T>(syn);
  Aligner<T> aligner;
  const auto fit = aligner.fit(users(all, 0, 2), AlignOptions{});
  const auto e = aligner.enroll(all.matrix(3));
  const auto F0G0 = mul(syn.F[0], to_double(fit.G[0]));
  EXPECT_LE(frob_diff(mul(syn.F[3], to_double(e.G)), F0G0), this->tol() * frob(F0G0));
  EXPECT_LE(e.report.relative_residual.at(0), this->tol());
  EXPECT_EQ(e.report.method, "odc");
  EXPECT_EQ(e.report.fitted_users, 2);
}

// GOPP keeps its final Z; G_new is the polar factor of M = A_new^T Z, characterised
// independently: G_new orthogonal and G_new^T M symmetric positive definite.
TYPED_TEST(AlignerEnrol, GoppEnrolsByPolarFactorOfFinalTarget) {
  using T = TypeParam;
  const auto all = testing::released_anchors<T>(
      testing::make_synthetic(70, 25, 6, 5, SpanCondition::diff_span_orth, 9));
  AlignOptions opts;
  opts.method = Method::gopp;
  Aligner<T> aligner;
  const auto fit = aligner.fit(users(all, 0, 4), opts);
  ASSERT_EQ(aligner.target().size(), fit.target.size());
  EXPECT_EQ(std::memcmp(aligner.target().data(), fit.target.data(), sizeof(T) * fit.target.size()),
            0)
      << "the kept target is not the fit's final Z";
  const auto A = to_double(all.matrix(4));
  const auto Z = to_double(aligner.target());
  const auto e = aligner.enroll(all.matrix(4));
  const auto G = to_double(e.G);
  EXPECT_LE(testing::orthogonality_error(G), this->orth_tol() * std::sqrt(6.0));
  const auto M = mul(A, Z, true, false);
  const auto GtM = mul(G, M, true, false);
  Matrix<double> sym(6, 6), asym(6, 6);
  for (index_t i = 0; i < 6; ++i)
    for (index_t j = 0; j < 6; ++j) {
      sym(i, j) = (GtM(i, j) + GtM(j, i)) / 2;
      asym(i, j) = (GtM(i, j) - GtM(j, i)) / 2;
    }
  EXPECT_LE(frob(asym), this->tol() * frob(M));
  EXPECT_TRUE(positive_definite(sym));
  // The report's residual is ||A_new G_new - Z||_F^2.
  const double res = std::pow(frob_diff(mul(A, G), Z), 2);
  EXPECT_NEAR(e.report.residual.at(0), res, this->tol() * (res + frob(Z) * frob(Z)));
  EXPECT_GT(e.report.rank_ratio.at(0), 0.0);
}

// Imakura-DC keeps Z = U R; G_new = A_new^+ Z, checked against a Gram-Schmidt least-squares
// solve. Least squares amplifies rounding by up to cond(A_new)^2 (< 2e3 here) for an
// inconsistent system (DiffSpan), so float gets 1e-3.
TYPED_TEST(AlignerEnrol, ImakuraEnrolsByLeastSquaresAgainstUR) {
  using T = TypeParam;
  const auto all = testing::released_anchors<T>(
      testing::make_synthetic(60, 15, 5, 4, SpanCondition::diff_span, 4));
  AlignOptions opts;
  opts.method = Method::imakura;
  opts.right = RightFactor::uniform;
  opts.seed = 3;
  Aligner<T> aligner;
  const auto fit = aligner.fit(users(all, 0, 3), opts);
  EXPECT_EQ(std::memcmp(aligner.target().data(), fit.target.data(), sizeof(T) * fit.target.size()),
            0);
  const double tol = std::is_same_v<T, double> ? 1e-10 : 1e-3;
  const auto A = to_double(all.matrix(3));
  const auto Z = to_double(aligner.target());
  const auto ref = lstsq_reference(A, Z);
  const auto e = aligner.enroll(all.matrix(3));
  EXPECT_LE(frob_diff(to_double(e.G), ref), tol * frob(ref));
  // A fitted user enrolled again gets its fitted G_i: the same least-squares problem.
  const auto again = aligner.enroll(all.matrix(1));
  EXPECT_LE(frob_diff(to_double(again.G), to_double(fit.G[1])), tol * frob(to_double(fit.G[1])));
  EXPECT_GT(e.report.orthogonality_error.at(0), 0.0);  // not orthogonal, reported anyway
}

// Kawakami-DC keeps Zbar = mean_i A_i G_i and enrols by least squares against it.
TYPED_TEST(AlignerEnrol, KawakamiEnrolsByLeastSquaresAgainstMeanAlignedAnchor) {
  using T = TypeParam;
  const auto all = testing::released_anchors<T>(
      testing::make_synthetic(50, 12, 4, 4, SpanCondition::diff_span_orth, 6));
  for (KawakamiForm form : {KawakamiForm::qr_svd, KawakamiForm::eigen}) {
    AlignOptions opts;
    opts.method = Method::kawakami;
    opts.kawakami_form = form;
    Aligner<T> aligner;
    const auto fit = aligner.fit(users(all, 0, 3), opts);
    Matrix<double> zbar(50, 4);
    for (index_t i = 0; i < 3; ++i) {
      const auto AG = mul(to_double(all.matrix(i)), to_double(fit.G[i]));
      for (index_t t = 0; t < AG.size(); ++t) zbar.data()[t] += AG.data()[t] / 3;
    }
    const auto Z = to_double(aligner.target());
    EXPECT_LE(frob_diff(Z, zbar), this->tol() * frob(zbar));
    const double tol = std::is_same_v<T, double> ? 1e-10 : 1e-3;
    const auto ref = lstsq_reference(to_double(all.matrix(3)), Z);
    const auto e = aligner.enroll(all.matrix(3));
    EXPECT_LE(frob_diff(to_double(e.G), ref), tol * frob(ref));
  }
}

// save + load restores everything enrolment uses: the same G_new to the last bit.
TYPED_TEST(AlignerEnrol, SaveLoadRoundTripIsBitIdentical) {
  using T = TypeParam;
  TempDir tmp;
  const auto all = testing::released_anchors<T>(
      testing::make_synthetic(40, 12, 4, 5, SpanCondition::diff_span_orth, 8));
  for (Method m : kAll) {
    SCOPED_TRACE(to_string(m));
    AlignOptions opts;
    opts.method = m;
    opts.seed = 11;
    opts.polar = PolarMethod::svd;
    opts.right = RightFactor::uniform;
    Aligner<T> aligner;
    aligner.fit(users(all, 0, 3), opts);
    const std::string dir = tmp.file("model_" + to_string(m));
    aligner.save(dir);
    const Aligner<T> loaded = Aligner<T>::load(dir);
    EXPECT_EQ(loaded.method(), m);
    EXPECT_EQ(loaded.users(), 3);
    EXPECT_EQ(loaded.anchor_rows(), 40);
    EXPECT_EQ(loaded.dim(), 4);
    EXPECT_EQ(loaded.rank_tolerance(), aligner.rank_tolerance());
    if (m != Method::kawakami) {
      EXPECT_EQ(loaded.options().seed, 11u);
    }
    if (m == Method::odc || m == Method::gopp) {
      EXPECT_EQ(loaded.options().polar, PolarMethod::svd);
    }
    if (m == Method::imakura) {
      EXPECT_EQ(loaded.options().right, RightFactor::uniform);
    }
    ASSERT_EQ(loaded.target().size(), aligner.target().size());
    EXPECT_EQ(std::memcmp(loaded.target().data(), aligner.target().data(),
                          sizeof(T) * aligner.target().size()),
              0);
    const auto newcomers = users(all, 3, 2);
    const auto e1 = aligner.enroll(newcomers), e2 = loaded.enroll(newcomers);
    EXPECT_EQ(std::memcmp(e1.G.data(), e2.G.data(), sizeof(T) * e1.G.size()), 0);
    EXPECT_EQ(e1.report.residual, e2.report.residual);
    const auto info = read_model_info(dir);
    EXPECT_EQ(info.method, m);
    EXPECT_EQ(info.precision, (std::is_same_v<T, float> ? "float32" : "float64"));
    EXPECT_EQ(info.format_version, kModelFormatVersion);
    EXPECT_EQ(info.users, 3);
  }
  // Only the model directories remain: no temporary files.
  EXPECT_EQ(tmp.entries(), (std::vector<std::string>{"model_gopp", "model_imakura",
                                                     "model_kawakami", "model_odc"}));
}

// ---- bad input (double; the checks do not depend on T)

struct Fitted {
  Stack<double> all;
  Aligner<double> aligner;
};

Fitted fitted(Method m, index_t c = 3) {
  Fitted f;
  f.all = testing::released_anchors<double>(
      testing::make_synthetic(30, 10, 4, c + 2, SpanCondition::diff_span_orth, 2));
  AlignOptions opts;
  opts.method = m;
  f.aligner.fit(users(f.all, 0, c), opts);
  return f;
}

TEST(EnrolmentInput, WrongShapeSaysWhatWasExpected) {
  for (Method m : kAll) {
    auto f = fitted(m);
    expect_invalid([&] { f.aligner.enroll(Matrix<double>(30, 5)); },
                   {"A_new is 30 x 5", "expected a x l = 30 x 4", to_string(m)});
    expect_invalid([&] { f.aligner.enroll(Matrix<double>(29, 4)); }, {"29 x 4", "30 x 4"});
    expect_invalid([&] { f.aligner.enroll(Stack<double>(2, 30, 3)); }, {"30 x 3", "30 x 4"});
    expect_invalid([&] { f.aligner.enroll(Stack<double>(0, 30, 4)); }, {"no new users"});
  }
}

TEST(EnrolmentInput, NonFiniteValueNamesRowAndColumn) {
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    for (Method m : kAll) {
      auto f = fitted(m);
      auto A = f.all.matrix(3);
      A(7, 2) = bad;
      expect_invalid([&] { f.aligner.enroll(A); }, {"A_new", "row 7", "column 2", "finite"});
      auto batch = users(f.all, 3, 2);
      batch(1, 5, 3) = bad;
      expect_invalid([&] { f.aligner.enroll(batch); }, {"new user 1", "row 5", "column 3"});
    }
  }
}

TEST(EnrolmentInput, RankDeficientNewUser) {
  for (Method m : kAll) {
    auto f = fitted(m);
    auto A = f.all.matrix(3);
    for (index_t i = 0; i < A.rows(); ++i) A(i, 3) = 2 * A(i, 1);  // column 3 = 2 x column 1
    const std::string what = m == Method::odc || m == Method::gopp ? "A_new^T Z" : "A_new";
    expect_invalid([&] { f.aligner.enroll(A); },
                   {what, "rank deficient", "sigma_min/sigma_max", "full column rank l = 4"});
    expect_invalid([&] { f.aligner.enroll(Matrix<double>(30, 4)); }, {"rank deficient"});
    auto batch = users(f.all, 3, 2);
    for (index_t i = 0; i < 30; ++i) batch(1, i, 0) = 0;
    expect_invalid([&] { f.aligner.enroll(batch); }, {"new user 1", "rank deficient"});
  }
}

// Finite entries whose product with the target overflows: the user and the cure are named
// (it was the polar factor's "matrix 0 contains NaN or Inf").
TEST(EnrolmentInput, OverflowNamesTheUserAndTheCure) {
  for (Method m : {Method::odc, Method::gopp}) {
    auto f = fitted(m);
    auto batch = users(f.all, 3, 2);
    for (index_t i = 0; i < 30; ++i)
      for (index_t j = 0; j < 4; ++j) batch(1, i, j) *= 1e306;
    try {
      f.aligner.enroll(batch);
      ADD_FAILURE() << "an overflowing enrolment succeeded";
    } catch (const NumericalError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("new user 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("overflowed"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rescale"), std::string::npos) << msg;
    }
  }
}

TEST(EnrolmentInput, UnfittedAligner) {
  Aligner<double> a;
  EXPECT_FALSE(a.fitted());
  expect_invalid([&] { a.enroll(Matrix<double>(3, 2)); }, {"not fitted"});
  expect_invalid([&] { a.save("/tmp/never"); }, {"not fitted"});
}

TEST(EnrolmentInput, FailedFitLeavesTheAlignerUnchanged) {
  auto f = fitted(Method::odc);
  auto bad = users(f.all, 0, 2);
  bad(0, 1, 1) = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { f.aligner.fit(bad, AlignOptions{}); }, {"user 0", "row 1"});
  EXPECT_EQ(f.aligner.users(), 3);
  EXPECT_NO_THROW(f.aligner.enroll(f.all.matrix(3)));
}

// ---- bad models

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
void edit_json(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(slurp(dir + "/model.json"));
  edit(j);
  spit(dir + "/model.json", j.dump(2));
}

class BadModel : public ::testing::Test {
 protected:
  void SetUp() override {
    f_ = fitted(Method::odc);
    dir_ = tmp_.file("model");
    f_.aligner.save(dir_);
  }
  TempDir tmp_;
  Fitted f_;
  std::string dir_;
};

TEST_F(BadModel, MissingOrNotADirectory) {
  expect_io([&] { Aligner<double>::load(tmp_.file("nope")); }, {"nope", "no such directory"});
  spit(tmp_.file("file"), "x");
  expect_io([&] { Aligner<double>::load(tmp_.file("file")); }, {"file", "not a directory"});
  fs::remove(dir_ + "/model.json");
  expect_io([&] { Aligner<double>::load(dir_); }, {"model.json", "does not exist"});
}

TEST_F(BadModel, TruncatedJson) {
  const std::string text = slurp(dir_ + "/model.json");
  spit(dir_ + "/model.json", text.substr(0, text.size() / 2));
  expect_io([&] { Aligner<double>::load(dir_); }, {"model.json", "not valid JSON", "truncated"});
  spit(dir_ + "/model.json", "");
  expect_io([&] { Aligner<double>::load(dir_); }, {"model.json", "not valid JSON"});
}

// Found by fuzz_model: the JSON parser reports a number beyond double's range as out_of_range,
// not as parse_error; it must still reach the user as this file's error, not terminate.
TEST_F(BadModel, NumberBeyondDoubleRange) {
  std::string text = slurp(dir_ + "/model.json");
  const auto at = text.find("\"anchor_rows\"");
  ASSERT_NE(at, std::string::npos);
  const auto colon = text.find(':', at);
  const auto end = text.find_first_of(",}", colon);
  text.replace(colon + 1, end - colon - 1, " 1e999");
  spit(dir_ + "/model.json", text);
  expect_io([&] { Aligner<double>::load(dir_); }, {"model.json", "JSON cannot hold"});
}

TEST_F(BadModel, TruncatedOrCorruptTarget) {
  const std::string bytes = slurp(dir_ + "/target.npy");
  spit(dir_ + "/target.npy", bytes.substr(0, bytes.size() - 40));
  expect_io([&] { Aligner<double>::load(dir_); }, {"target.npy"});
  spit(dir_ + "/target.npy", "garbage");
  expect_io([&] { Aligner<double>::load(dir_); }, {"target.npy"});
  Matrix<double> Z = f_.aligner.target();
  Z(3, 1) = std::numeric_limits<double>::quiet_NaN();
  write_npy<double>(dir_ + "/target.npy", Z.view());
  expect_io([&] { Aligner<double>::load(dir_); }, {"target.npy", "row 3", "column 1"});
}

TEST_F(BadModel, TargetShapeOrDtypeDisagreesWithMetadata) {
  write_npy<double>(dir_ + "/target.npy", Matrix<double>(29, 4).view());
  expect_io([&] { Aligner<double>::load(dir_); }, {"target.npy", "(29, 4)", "(30, 4)"});
  write_npy<double>(dir_ + "/target.npy", Stack<double>(1, 30, 4).view());
  expect_io([&] { Aligner<double>::load(dir_); }, {"target.npy", "(1, 30, 4)"});
  write_npy<float>(dir_ + "/target.npy", Matrix<float>(30, 4).view());
  expect_io([&] { Aligner<double>::load(dir_); }, {"target.npy", "float32", "float64"});
  // The metadata's own shapes must agree with each other.
  f_.aligner.save(dir_);
  edit_json(dir_, [](nlohmann::json& j) { j["anchor_rows"] = 31; });
  expect_io([&] { Aligner<double>::load(dir_); }, {"model.json", "target.shape", "[31, 4]"});
  f_.aligner.save(dir_);
  edit_json(dir_, [](nlohmann::json& j) { j["dim"] = "four"; });
  expect_io([&] { Aligner<double>::load(dir_); }, {"model.json", "'dim'", "integer"});
}

TEST_F(BadModel, AnotherMethodOrFormatVersion) {
  edit_json(dir_, [](nlohmann::json& j) { j["method"] = "imakura"; });
  expect_io([&] { Aligner<double>::load(dir_); },
            {"model.json", "imakura", "procrustes", "another method"});
  edit_json(dir_, [](nlohmann::json& j) {
    j["method"] = "gopp";  // enrols by the same step, but its options differ
  });
  expect_io([&] { Aligner<double>::load(dir_); },
            {"model.json", "'options' of method 'gopp'", "another method"});
  edit_json(dir_, [](nlohmann::json& j) { j["method"] = "magic"; });
  expect_io([&] { Aligner<double>::load(dir_); }, {"model.json", "magic"});
  f_.aligner.save(dir_);
  edit_json(dir_, [](nlohmann::json& j) { j["format_version"] = 2; });
  expect_io([&] { Aligner<double>::load(dir_); },
            {"model.json", "format version 2", "reads format version 1"});
  // An alignment report is JSON with a "method" but not a model.
  spit(dir_ + "/model.json", f_.aligner.enroll(f_.all.matrix(3)).report.to_json());
  expect_io([&] { Aligner<double>::load(dir_); }, {"model.json", "not a dcalign model"});
  // save replaces only a dcalign model: that directory is none any more.
  expect_io([&] { f_.aligner.save(dir_); }, {"not a dcalign model directory"});
  fs::remove_all(dir_);
  f_.aligner.save(dir_);
  edit_json(dir_, [](nlohmann::json& j) { j["extra"] = 1; });
  expect_io([&] { Aligner<double>::load(dir_); }, {"unexpected key 'extra'"});
}

TEST_F(BadModel, OtherPrecision) {
  expect_invalid([&] { Aligner<float>::load(dir_); }, {"float64", "Aligner<double>"});
}

TEST_F(BadModel, SaveRefusesToReplaceWhatIsNotAModel) {
  spit(tmp_.file("precious.txt"), "keep me");
  expect_io([&] { f_.aligner.save(tmp_.file("precious.txt")); },
            {"precious.txt", "not a dcalign model directory"});
  EXPECT_EQ(slurp(tmp_.file("precious.txt")), "keep me");
  fs::create_directory(tmp_.file("somedir"));
  expect_io([&] { f_.aligner.save(tmp_.file("somedir")); },
            {"somedir", "not a dcalign model directory"});
  expect_io([&] { f_.aligner.save(tmp_.file("no/such/parent/model")); },
            {"does not exist", "no/such/parent"});
  EXPECT_EQ(tmp_.entries(), (std::vector<std::string>{"model", "precious.txt", "somedir"}));
}

// A save that fails half-way (here: the file size limit makes the target.npy write fail after
// model.json was written) leaves the previous model intact and no temporary files.
TEST_F(BadModel, FailedSaveLeavesThePreviousModelIntact) {
  const auto before = Aligner<double>::load(dir_).enroll(f_.all.matrix(4));
  // A different, larger model whose target.npy cannot be written under the limit.
  Fitted big;
  big.all = testing::released_anchors<double>(
      testing::make_synthetic(2000, 10, 4, 2, SpanCondition::diff_span_orth, 5));
  big.aligner.fit(big.all, AlignOptions{});
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
    rlimit lim{16384, 16384};       // model.json (~1 KB) fits; target.npy (64 KB) does not
    ::setrlimit(RLIMIT_FSIZE, &lim);
    int code = 3;
    try {
      big.aligner.save(dir_);
      code = 1;  // succeeded: the test premise failed
    } catch (const IoError& e) {
      code = std::string(e.what()).find("nothing was changed") != std::string::npos ? 0 : 2;
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "1: the save succeeded; 2/3: wrong error";
  const auto after = Aligner<double>::load(dir_);
  EXPECT_EQ(after.anchor_rows(), 30);
  const auto e = after.enroll(f_.all.matrix(4));
  EXPECT_EQ(std::memcmp(e.G.data(), before.G.data(), sizeof(double) * e.G.size()), 0);
  EXPECT_EQ(tmp_.entries(), (std::vector<std::string>{"model"}));
  // Without the limit the same save replaces the model.
  big.aligner.save(dir_);
  EXPECT_EQ(Aligner<double>::load(dir_).anchor_rows(), 2000);
  EXPECT_EQ(tmp_.entries(), (std::vector<std::string>{"model"}));
}

}  // namespace
}  // namespace dcalign
