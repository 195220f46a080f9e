#pragma once
// LIBSVM's RBF predictions, the same bits, computed in blocks.
//
// svm_predict evaluates K(x, sv) = exp(-gamma * |x - sv|^2) one support vector at a time,
// merging two sparse index lists per evaluation; for raw image data (MNIST: 784 features,
// ~1000 support vectors, thousands of test rows) that is most of an SVM's time. LIBSVM has no
// batched predictor and no library offers one that reproduces its results, so this one is
// ours: the support vectors are stored densely, feature-major, and each squared distance is
// accumulated in LIBSVM's own order (ascending feature index, one rounded subtraction,
// multiplication and addition per feature, no fused multiply-add), several support vectors and
// test rows at once in SIMD lanes. Features where a row and a support vector are both zero add
// an exact +0, so the dense sum equals LIBSVM's sparse merge bit for bit; the decision values
// and votes then follow svm_predict_values line by line. tests/learn/test_svm_rbf.cpp checks
// the predictions against svm_predict itself.
#include <cstddef>
#include <vector>

#include "dcalign/matrix.hpp"

struct svm_model;

namespace dcalign::learn::detail {

class RbfPredictor {
 public:
  /// The most bytes the dense support vectors may take; a larger model keeps LIBSVM's
  /// svm_predict (usable() is false).
  static constexpr size_t kMaxBytes = size_t{512} << 20;

  RbfPredictor() = default;
  /// Copies the support vectors of `model` (C-SVC or epsilon-SVR with the RBF kernel, trained
  /// on `features` columns). Unusable for any other model or above kMaxBytes.
  RbfPredictor(const svm_model& model, index_t features);

  bool usable() const { return usable_; }

  /// What svm_predict(model, row i of X) returns, for rows [begin, end) of X into out[0..).
  /// `model` must be the one given to the constructor.
  void predict(const svm_model& model, const Matrix<double>& X, index_t begin, index_t end,
               double* out) const;

  /// Rows of X a call to predict() should take at a time (one tile of the blocked loop).
  static constexpr index_t kTileRows = 64;

 private:
  bool usable_ = false;
  index_t features_ = 0;
  index_t svs_ = 0;          // l
  index_t padded_ = 0;       // l rounded up to a whole block of SIMD lanes
  std::vector<int> row_of_;  // feature -> row of sv_ (the all-zero last row if no SV uses it)
  std::vector<double> sv_;   // (used features + 1) x padded_, feature-major
  std::vector<int> start_;   // C-SVC: the index of each class's first support vector
};

}  // namespace dcalign::learn::detail
