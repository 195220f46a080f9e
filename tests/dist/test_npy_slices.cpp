// The NPY slice reader and writer the distributed alignment uses (dcalign/npy.hpp): a slice of
// users read by offset equals the same users of the whole array, and slices written at their
// offsets into one created file make the whole array.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "dcalign/npy.hpp"
#include "dcalign/random.hpp"

namespace fs = std::filesystem;

namespace dcalign {
namespace {

class NpySlices : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dcalign_npy_slices_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

Stack<double> make_stack(index_t c, index_t r, index_t k) {
  Rng rng = Rng::stream(4, 0);
  Stack<double> s(c, r, k);
  const Matrix<double> v = random_normal<double>(c * r, k, rng);
  for (index_t i = 0; i < s.size(); ++i) s.data()[i] = v.data()[i];
  return s;
}

TEST_F(NpySlices, ReadSliceEqualsTheSameUsersOfTheWhole) {
  const Stack<double> s = make_stack(7, 5, 3);
  write_npy(path("s.npy"), s.view());
  for (index_t first : {0, 2, 6})
    for (index_t count : {0, 1}) {
      const auto part = read_npy_stack_slice<double>(path("s.npy"), first, count);
      ASSERT_EQ(part.count(), count);
      for (index_t m = 0; m < count; ++m)
        for (index_t j = 0; j < 3; ++j)
          for (index_t i = 0; i < 5; ++i) EXPECT_EQ(part(m, i, j), s(first + m, i, j));
    }
  const auto f = read_npy_stack_slice<float>(path("s.npy"), 3, 4);  // converted like the whole
  EXPECT_EQ(f(1, 2, 1), static_cast<float>(s(4, 2, 1)));
  EXPECT_THROW(read_npy_stack_slice<double>(path("s.npy"), 5, 3), IoError);
  EXPECT_THROW(read_npy_stack_slice<double>(path("s.npy"), -1, 1), IoError);
  EXPECT_THROW(read_npy_stack_slice<double>(path("missing.npy"), 0, 1), IoError);
}

TEST_F(NpySlices, SlicesWrittenAtTheirOffsetsMakeTheWhole) {
  const Stack<double> s = make_stack(7, 4, 4);
  create_npy_stack<double>(path("g.npy"), 7, 4, 4);
  // Out of order, as ranks may finish.
  for (const auto& [first, count] : {std::pair<index_t, index_t>{3, 4}, {0, 3}}) {
    Stack<double> part(count, 4, 4);
    for (index_t m = 0; m < count; ++m)
      for (index_t j = 0; j < 4; ++j)
        for (index_t i = 0; i < 4; ++i) part(m, i, j) = s(first + m, i, j);
    write_npy_stack_slice<double>(path("g.npy"), first, part.view());
  }
  const auto back = read_npy_stack<double>(path("g.npy"));
  ASSERT_EQ(back.count(), 7);
  for (index_t k = 0; k < s.size(); ++k) EXPECT_EQ(back.data()[k], s.data()[k]);
  // A slice that does not fit the file: outside, another shape, another dtype.
  const Stack<double> two = make_stack(2, 4, 4);
  EXPECT_THROW(write_npy_stack_slice<double>(path("g.npy"), 6, two.view()), IoError);
  const Stack<double> other = make_stack(1, 3, 4);
  EXPECT_THROW(write_npy_stack_slice<double>(path("g.npy"), 0, other.view()), IoError);
  Stack<float> f(1, 4, 4);
  EXPECT_THROW(write_npy_stack_slice<float>(path("g.npy"), 0, f.view()), IoError);
}

}  // namespace
}  // namespace dcalign
