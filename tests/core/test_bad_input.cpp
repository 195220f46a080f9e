// Every bad input gets an exception that says what, where and what was expected.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "dcalign/align.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

template <typename F>
void expect_invalid(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "'" << frag << "' missing in: " << msg;
  }
}

const Method kAll[] = {Method::odc, Method::imakura, Method::kawakami, Method::gopp};

Stack<double> good_anchors(index_t c = 4) {
  return testing::released_anchors<double>(
      testing::make_synthetic(40, 10, 4, c, SpanCondition::diff_span_orth, 3));
}

TEST(BadInput, NonFiniteAnchorNamesUserRowColumn) {
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    for (Method m : kAll) {
      auto A = good_anchors();
      A(2, 7, 3) = bad;
      AlignOptions opts;
      opts.method = m;
      expect_invalid([&] { align(A, opts); }, {"user 2", "row 7", "column 3", "finite"});
    }
  }
}

// Without the evaluation ODC reads no anchor twice: its products prove the anchors finite. A NaN
// or Inf in any user's anchor, the reference user's included (it reaches every product through
// Z), is still named with its position, not reported as an overflow.
TEST(BadInput, NonFiniteAnchorIsNamedByOdcWithoutEvaluation) {
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()})
    for (index_t user : {index_t(0), index_t(2)}) {
      auto A = good_anchors();
      A(user, 7, 3) = bad;
      AlignOptions opts;
      opts.method = Method::odc;
      opts.evaluate = false;
      expect_invalid([&] { align(A, opts); },
                     {"user " + std::to_string(user), "row 7", "column 3", "finite"});
    }
}

TEST(BadInput, DimensionLargerThanAnchorRows) {
  Stack<double> A(3, 4, 6);
  for (index_t i = 0; i < A.size(); ++i) A.data()[i] = std::sin(double(i));
  for (Method m : kAll) {
    AlignOptions opts;
    opts.method = m;
    expect_invalid([&] { align(A, opts); }, {"l = 6", "a = 4", "l <= a"});
  }
}

TEST(BadInput, NoUsers) {
  Stack<double> A(0, 10, 3);
  expect_invalid([&] { align(A, AlignOptions{}); }, {"no users"});
}

TEST(BadInput, RankDeficientUserIsNamed) {
  for (Method m : kAll) {
    auto A = good_anchors();
    // User 1's last column repeats its first: rank l - 1.
    for (index_t r = 0; r < A.rows(); ++r) A(1, r, 3) = A(1, r, 0);
    AlignOptions opts;
    opts.method = m;
    SCOPED_TRACE(to_string(m));
    if (m == Method::kawakami) {
      // Both forms must refuse it.
      for (auto form : {KawakamiForm::qr_svd, KawakamiForm::eigen}) {
        opts.kawakami_form = form;
        SCOPED_TRACE(form == KawakamiForm::eigen ? "eigen form" : "qr_svd form");
        expect_invalid([&] { align(A, opts); }, {"rank"});
      }
      continue;
    }
    expect_invalid([&] { align(A, opts); }, {"user 1", "rank deficient"});
  }
}

// Kawakami-DC's eigen form decides rank on the Gram matrix, which cannot resolve sigma_min /
// sigma_max below about sqrt(eps): a user whose ratio is 3e-8 (twice sqrt(eps) and far above
// the default tolerance l eps) passes the QR-SVD form, which measures the ratio on R_i, and is
// refused by the eigen form, whose tolerance has a floor of 4 sqrt(eps) = 6e-8. Without that
// floor the eigen form's Cholesky factorisation succeeds here and nothing is raised.
TEST(BadInput, KawakamiEigenFormFloorsItsRankTolerance) {
  auto A = good_anchors();
  // User 1's last column: its first plus 3e-8 of its norm along a fixed direction.
  double norm = 0, wnorm = 0;
  for (index_t r = 0; r < A.rows(); ++r) {
    norm += A(1, r, 0) * A(1, r, 0);
    wnorm += std::cos(3.0 * r) * std::cos(3.0 * r);
  }
  for (index_t r = 0; r < A.rows(); ++r)
    A(1, r, 3) = A(1, r, 0) + 3e-8 * std::sqrt(norm / wnorm) * std::cos(3.0 * r);
  AlignOptions opts;
  opts.method = Method::kawakami;
  opts.kawakami_form = KawakamiForm::qr_svd;
  const auto qr = align(A, opts);
  const double root_eps = std::sqrt(std::numeric_limits<double>::epsilon());
  ASSERT_GT(qr.report.min_rank_ratio, 1.2 * root_eps);  // resolved by R_i, above the Gram's noise
  ASSERT_LT(qr.report.min_rank_ratio, 3 * root_eps);    // and below the eigen form's floor
  opts.kawakami_form = KawakamiForm::eigen;
  expect_invalid([&] { align(A, opts); }, {"user 1", "rank deficient", "Cholesky"});
}

TEST(BadInput, UsersWithDifferentShapes) {
  std::vector<Matrix<double>> users = {Matrix<double>(10, 3), Matrix<double>(10, 3),
                                       Matrix<double>(9, 3)};
  expect_invalid([&] { Stack<double>::from_matrices(users); }, {"matrix 2", "9 x 3", "10 x 3"});
}

TEST(BadInput, ReferenceUserOutOfRange) {
  AlignOptions opts;
  opts.reference_user = 4;
  expect_invalid([&] { align(good_anchors(), opts); }, {"reference user 4", "4 users"});
}

// No wrong success, in the library: GOPP with no iteration would return an all-zero G.
TEST(BadInput, GoppNeedsAtLeastOneIterationAndAFiniteTolerance) {
  AlignOptions opts;
  opts.method = Method::gopp;
  opts.gopp.max_iterations = 0;
  expect_invalid([&] { align(good_anchors(), opts); },
                 {"gopp_max_iterations 0 is out of range", "expected 1 to 1000000"});
  opts.gopp.max_iterations = 1;
  opts.gopp.tolerance = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { align(good_anchors(), opts); }, {"gopp_tolerance", "finite"});
  opts.gopp.tolerance = 0;
  const auto res = align(good_anchors(), opts);
  EXPECT_LT(res.report.orthogonality_error, 1e-12);
}

TEST(BadInput, SuppliedRotationNotOrthogonal) {
  AlignOptions opts;
  opts.rotation = TargetRotation::supplied;
  opts.rotation_matrix = Matrix<double>::identity(4);
  opts.rotation_matrix(0, 1) = 0.5;
  expect_invalid([&] { align(good_anchors(), opts); }, {"not orthogonal"});
  opts.rotation_matrix = Matrix<double>::identity(3);
  expect_invalid([&] { align(good_anchors(), opts); }, {"3 x 3", "expected 4 x 4"});
}

// A NaN or Inf in a supplied O or R is named as such, not blamed on the anchors.
TEST(BadInput, NonFiniteSuppliedRotationIsNamed) {
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    AlignOptions opts;
    opts.method = Method::odc;
    opts.rotation = TargetRotation::supplied;
    opts.rotation_matrix = Matrix<double>::identity(4);
    opts.rotation_matrix(2, 1) = bad;
    const auto A64 = good_anchors();
    const auto A32 = testing::released_anchors<float>(
        testing::make_synthetic(40, 10, 4, 4, SpanCondition::diff_span_orth, 3));
    for (int single = 0; single < 2; ++single) {
      try {
        if (single)
          align(A32, opts);
        else
          align(A64, opts);
        ADD_FAILURE() << "no exception";
      } catch (const InvalidInput& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("supplied target rotation O has a non-finite entry"), std::string::npos)
            << msg;
        EXPECT_NE(msg.find("row 2, column 1"), std::string::npos) << msg;
        EXPECT_EQ(msg.find("anchor"), std::string::npos) << msg;
      }
    }
  }
}

TEST(BadInput, NonFiniteSuppliedRightFactorIsNamed) {
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
    AlignOptions opts;
    opts.method = Method::imakura;
    opts.right = RightFactor::supplied;
    opts.right_matrix = Matrix<double>::identity(4);
    opts.right_matrix(0, 3) = bad;
    try {
      align(good_anchors(), opts);
      ADD_FAILURE() << "no exception";
    } catch (const InvalidInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("supplied right factor R has a non-finite entry"), std::string::npos)
          << msg;
      EXPECT_NE(msg.find("row 0, column 3"), std::string::npos) << msg;
      EXPECT_EQ(msg.find("anchor"), std::string::npos) << msg;
    }
  }
}

TEST(BadInput, NonFiniteExplicitTargetIsNamed) {
  auto A = good_anchors();
  AlignOptions opts;
  opts.method = Method::odc;
  opts.target = Matrix<double>(A.rows(), A.cols());
  for (index_t i = 0; i < A.rows(); ++i) opts.target(i, i % A.cols()) = 1.0;
  opts.target(5, 2) = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { align(A, opts); }, {"explicit ODC target Z", "row 5, column 2"});
}

TEST(BadInput, ExplicitTargetWrongShape) {
  AlignOptions opts;
  opts.target = Matrix<double>(39, 4);
  expect_invalid([&] { align(good_anchors(), opts); }, {"39 x 4", "40 x 4"});
}

TEST(BadInput, UnknownNames) {
  expect_invalid([] { parse_method("procrustes"); }, {"procrustes", "odc, imakura"});
  expect_invalid([] { parse_device("tpu"); }, {"tpu", "cpu, cuda"});
}

TEST(BadInput, CudaRequestWithoutGpuIsClear) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present";
  try {
    make_backend(Device::cuda);
    ADD_FAILURE() << "no exception";
  } catch (const BackendError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA backend requested but unavailable"), std::string::npos) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
#ifdef DCALIGN_HAVE_CUDA
    // The backend is compiled: the reason is the runtime's (driver, device), never nvcc.
    EXPECT_EQ(msg.find("nvcc"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("no CUDA backend"), std::string::npos) << msg;
    EXPECT_TRUE(msg.find("driver") != std::string::npos ||
                msg.find("device") != std::string::npos || msg.find("GPU") != std::string::npos)
        << msg;
#else
    // No backend: the one reason that applies to this build, not a list of guesses.
    EXPECT_NE(msg.find("no CUDA backend"), std::string::npos) << msg;
    const bool off = msg.find("DCALIGN_CUDA=OFF") != std::string::npos;
    const bool no_nvcc = msg.find("nvcc") != std::string::npos;
    EXPECT_TRUE(off != no_nvcc) << msg;
#endif
  }
}

}  // namespace
}  // namespace dcalign
