// The generator's bulk normal draw (src/base/random.cpp) against its one-at-a-time definition.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "dcalign/random.hpp"

namespace dcalign {
namespace {

bool same_bits(const std::vector<double>& x, const std::vector<double>& y) {
  return x.size() == y.size() &&
         (x.empty() || std::memcmp(x.data(), y.data(), sizeof(double) * x.size()) == 0);
}

// fill_normal promises the values and the state of `count` normal() calls, bit for bit: counts
// even and odd (an odd one leaves a spare), from a generator that holds a spare or not, and
// runs long enough for the threaded transform (2^15 values and more).
TEST(Rng, FillNormalGivesTheValuesAndStateOfNormalCalls) {
  for (bool spare_first : {false, true})
    for (std::size_t count : {0, 1, 2, 3, 8, 9, 32768, 100001}) {
      SCOPED_TRACE(testing::Message() << "count " << count << ", spare first " << spare_first);
      Rng one(77), bulk(77);
      if (spare_first) {
        (void)one.normal();
        (void)bulk.normal();
      }
      std::vector<double> a(count), b(count);
      for (auto& x : a) x = one.normal();
      bulk.fill_normal(b.data(), count);
      EXPECT_TRUE(same_bits(a, b));
      // Afterwards both continue alike: the spare (if any), then fresh pairs and raw draws.
      for (int k = 0; k < 5; ++k) EXPECT_EQ(one.normal(), bulk.normal());
      EXPECT_EQ(one.next(), bulk.next());
    }
}

TEST(Rng, RandomNormalMatricesAreTheSequentialDraws) {
  Rng r1(5), r2(5), r3(5);
  const Matrix<double> d = random_normal<double>(300, 200, r1);
  const Matrix<float> f = random_normal<float>(300, 200, r2);
  for (index_t i = 0; i < d.size(); ++i) {
    const double x = r3.normal();
    ASSERT_EQ(d.data()[i], x) << "entry " << i;
    ASSERT_EQ(f.data()[i], static_cast<float>(x)) << "entry " << i;
  }
  EXPECT_EQ(r1.next(), r3.next());
}

}  // namespace
}  // namespace dcalign
