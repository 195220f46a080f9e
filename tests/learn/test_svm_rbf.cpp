// The SVM's blocked RBF predictions (src/learn/svm_rbf.cpp) against LIBSVM's own svm_predict:
// equal bit for bit, on image-like sparse data, dense data with negative values, regression
// (whose outputs are the decision values themselves, so a last-bit difference in any kernel
// value or sum would show), row counts that are not multiples of the blocks, and a model saved
// and loaded again.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "dcalign/learn.hpp"
#include "dcalign/random.hpp"
#include "learn/internal.hpp"
#include "learn/toy_data.hpp"

namespace dcalign::learn {
namespace {

using testing::Data;

// Image-like rows: `d` features of which about a fifth are nonzero, in (0, 1], around a
// class-specific stroke, so that the SVM has many support vectors and many zero features;
// the last `blank` features are zero in every training row.
Data sparse_images(index_t n, index_t d, int classes, index_t blank, std::uint64_t seed) {
  Rng rng(seed);
  Data data{Matrix<double>(n, d), std::vector<double>(static_cast<size_t>(n))};
  for (index_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng.next() % static_cast<std::uint64_t>(classes));
    for (index_t j = 0; j + blank < d; ++j) {
      const bool stroke = (j * 7 + c * 13) % 29 < 6;
      if (rng.uniform() < (stroke ? 0.7 : 0.08))
        data.X(i, j) = static_cast<double>(1 + rng.next() % 255) / 255.0;
    }
    data.y[static_cast<size_t>(i)] = c;
  }
  return data;
}

void expect_same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  size_t differing = 0, first = a.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0) {
      if (first == a.size()) first = i;
      ++differing;
    }
  EXPECT_EQ(differing, 0u) << "first at row " << first << ": " << a[first] << " against "
                           << b[first];
}

std::unique_ptr<Model> bare_svm(int threads) {
  ModelOptions o;
  o.threads = threads;
  return detail::make_svm(o);
}

TEST(LearnSvmRbf, ImageLikeTenClassesEqualLibsvm) {
  const Data train = sparse_images(400, 200, 10, 20, 1);
  Data test = sparse_images(333, 200, 10, 0, 2);  // nonzeros where no support vector has any
  for (index_t j = 0; j < test.X.cols(); ++j) test.X(5, j) = 0.0;  // an all-zero row
  auto svm = bare_svm(1);
  svm->fit(train.X, train.y, 10);
  ASSERT_TRUE(detail::svm_predicts_in_blocks(*svm));
  const std::vector<double> blocked = svm->predict(test.X);
  expect_same_bits(blocked, detail::svm_predict_with_libsvm(*svm, test.X));
  // The labels are not all one class (the comparison would then be weak).
  int changes = 0;
  for (size_t i = 1; i < blocked.size(); ++i) changes += blocked[i] != blocked[0];
  EXPECT_GT(changes, 100);
}

TEST(LearnSvmRbf, DenseThreeClassesWithNegativeValuesEqualLibsvm) {
  const Data train = testing::blobs(301, 3, 2.0, 3, 7), test = testing::blobs(77, 3, 2.0, 4, 7);
  for (int threads : {1, 3}) {
    auto svm = bare_svm(threads);
    svm->fit(train.X, train.y, 3);
    ASSERT_TRUE(detail::svm_predicts_in_blocks(*svm));
    expect_same_bits(svm->predict(test.X), detail::svm_predict_with_libsvm(*svm, test.X));
  }
}

// Regression returns the decision value: every kernel value, product and sum must match.
TEST(LearnSvmRbf, RegressionValuesEqualLibsvmBitForBit) {
  const Data images = sparse_images(250, 120, 4, 10, 5);
  Data train{images.X, {}};
  for (index_t i = 0; i < train.X.rows(); ++i) {
    double s = 0;
    for (index_t j = 0; j < train.X.cols(); ++j) s += train.X(i, j) * ((j % 5) - 2.0);
    train.y.push_back(s);
  }
  const Data test = sparse_images(131, 120, 4, 0, 6);
  auto svm = bare_svm(2);
  svm->fit(train.X, train.y, 0);
  ASSERT_TRUE(detail::svm_predicts_in_blocks(*svm));
  const std::vector<double> blocked = svm->predict(test.X);
  expect_same_bits(blocked, detail::svm_predict_with_libsvm(*svm, test.X));
  EXPECT_NE(blocked[0], blocked[1]);
}

TEST(LearnSvmRbf, ALoadedModelPredictsInBlocksAndEqualsLibsvm) {
  const Data train = sparse_images(300, 90, 5, 5, 8), test = sparse_images(65, 90, 5, 0, 9);
  auto svm = bare_svm(1);
  svm->fit(train.X, train.y, 5);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("dcalign_svm_rbf_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  svm->save(dir);
  auto loaded = load_model(dir);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(detail::svm_predicts_in_blocks(*loaded));
  expect_same_bits(loaded->predict(test.X), detail::svm_predict_with_libsvm(*loaded, test.X));
  expect_same_bits(loaded->predict(test.X), svm->predict(test.X));
}

}  // namespace
}  // namespace dcalign::learn
