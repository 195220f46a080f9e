// The reduced-precision uplink (dcalign/user.hpp, through_uplink): each format's rounding error
// within its stated bound, exact values kept exactly, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "dcalign/error.hpp"
#include "dcalign/random.hpp"
#include "dcalign/user.hpp"

namespace dcalign {
namespace {

Matrix<double> spread(index_t rows, index_t cols, std::uint64_t seed) {
  Rng rng(seed);
  Matrix<double> m(rows, cols);
  for (index_t j = 0; j < cols; ++j)
    for (index_t i = 0; i < rows; ++i)  // magnitudes from 1e-6 to 1e4, both signs
      m(i, j) = std::pow(10.0, -6 + 10 * rng.uniform()) * (rng.uniform() < 0.5 ? -1 : 1);
  return m;
}

TEST(Uplink, NamesBitsAndBytes) {
  for (Uplink u : {Uplink::fp64, Uplink::fp32, Uplink::fp16, Uplink::int8})
    EXPECT_EQ(parse_uplink(to_string(u)), u);
  EXPECT_THROW(parse_uplink("bf16"), InvalidInput);
  EXPECT_EQ(uplink_bits(Uplink::fp16), 16);
  EXPECT_EQ(uplink_bytes(100, 50, Uplink::fp32), 100 * 50 * 4.0);
  EXPECT_EQ(uplink_bytes(100, 50, Uplink::int8), 100 * 50 + 50 * 4.0);  // + a scale per column
}

TEST(Uplink, Fp32AndFp16RoundWithinTheirUnitRoundoff) {
  const Matrix<double> m = spread(200, 7, 1);
  const Matrix<double> f = through_uplink(m, Uplink::fp32, "X");
  const Matrix<double> h = through_uplink(m, Uplink::fp16, "X");
  for (index_t j = 0; j < m.cols(); ++j)
    for (index_t i = 0; i < m.rows(); ++i) {
      const double v = m(i, j);
      EXPECT_LE(std::abs(f(i, j) - v), std::ldexp(std::abs(v), -24));
      // float16: relative 2^-11 for normal values, absolute 2^-25 among the subnormals.
      EXPECT_LE(std::abs(h(i, j) - v), std::max(std::ldexp(std::abs(v), -11), std::ldexp(1.0, -25)))
          << v;
      EXPECT_EQ(static_cast<double>(static_cast<float>(f(i, j))), f(i, j));  // on the float grid
    }
  // Values on the float16 grid come through exactly; a tie rounds to even.
  Matrix<double> exact(1, 6);
  const double values[] = {1.5, -1024.0, 65504.0, std::ldexp(1.0, -24), 0.0, 2049.0};
  for (int k = 0; k < 6; ++k) exact(0, k) = values[k];
  const Matrix<double> e = through_uplink(exact, Uplink::fp16, "A");
  for (int k = 0; k < 5; ++k) EXPECT_EQ(e(0, k), values[k]);
  EXPECT_EQ(e(0, 5), 2048.0);  // 2049 lies half way between 2048 and 2050: the even one
}

TEST(Uplink, Int8ErrorIsHalfAStepOfItsColumnAndZeroColumnsAreSafe) {
  Matrix<double> m = spread(300, 5, 2);
  for (index_t i = 0; i < m.rows(); ++i) m(i, 3) = 0.0;  // an all-zero column
  const Matrix<double> q = through_uplink(m, Uplink::int8, "X");
  for (index_t j = 0; j < m.cols(); ++j) {
    double largest = 0;
    for (index_t i = 0; i < m.rows(); ++i) largest = std::max(largest, std::abs(m(i, j)));
    for (index_t i = 0; i < m.rows(); ++i) {
      EXPECT_TRUE(std::isfinite(q(i, j)));
      EXPECT_LE(std::abs(q(i, j) - m(i, j)), largest / 254 * (1 + 1e-6)) << i << " " << j;
    }
    if (j == 3) {
      for (index_t i = 0; i < m.rows(); ++i) EXPECT_EQ(q(i, j), 0.0);
    }
  }
}

TEST(Uplink, RefusesWhatTheFormatCannotHoldNamingTheEntry) {
  Matrix<double> m(3, 2);
  m(2, 1) = 70000.0;
  try {
    through_uplink(m, Uplink::fp16, "user 4: X~_4");
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("user 4: X~_4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(2, 1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("float16"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(through_uplink(m, Uplink::fp32, "X"));
  m(0, 0) = std::nan("");
  for (Uplink u : {Uplink::fp64, Uplink::fp32, Uplink::fp16, Uplink::int8})
    EXPECT_THROW(through_uplink(m, u, "X"), InvalidInput);
}

}  // namespace
}  // namespace dcalign
