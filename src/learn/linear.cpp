// Ordinary least squares with an intercept (scikit-learn's LinearRegression): the linear model
// of the regression experiments, where the classifiers' linear model (logreg) does not apply.
// Solved by LAPACK's dgelsd (SVD, minimum-norm solution) on the centred data, so collinear or
// constant features give the minimum-norm weights instead of a failure, as numpy's lstsq.
#include "base/host_blas.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "learn/internal.hpp"
#include "learn/model_io.hpp"

namespace dcalign::learn {
namespace {

class LinearRegression final : public Model {
 public:
  std::string name() const override { return "linear"; }
  std::vector<double> parameters() const override {
    std::vector<double> p(w_);
    p.push_back(b_);
    return p;
  }
  void restore(detail::ModelReader& in) {
    const Matrix<double>& w = in.f64("weights");
    const Matrix<double>& b = in.f64("intercept");
    if (w.rows() != in.num_features() || w.cols() != 1)
      in.fail_parameter("weights", "is " + std::to_string(w.rows()) + " x " +
                                       std::to_string(w.cols()) + "; expected num_features x 1 = " +
                                       std::to_string(in.num_features()) + " x 1");
    if (b.rows() != 1 || b.cols() != 1)
      in.fail_parameter("intercept", "is " + std::to_string(b.rows()) + " x " +
                                         std::to_string(b.cols()) + "; expected 1 x 1");
    w_.assign(w.data(), w.data() + w.rows());
    b_ = b(0, 0);
    set_trained(0, in.num_features());
    info_ = in.fit_info();
  }

 protected:
  bool supports_classification() const override { return false; }
  void fit_impl(const Matrix<double>& X, const std::vector<double>& y) override {
    const index_t n = X.rows(), d = X.cols();
    // Centring takes the intercept out of the least-squares problem: b = ybar - xbar^T w.
    std::vector<double> xbar(static_cast<size_t>(d), 0.0);
    double ybar = 0;
    for (index_t i = 0; i < n; ++i) ybar += y[static_cast<size_t>(i)];
    ybar /= static_cast<double>(n);
    for (index_t j = 0; j < d; ++j) {
      for (index_t i = 0; i < n; ++i) xbar[static_cast<size_t>(j)] += X(i, j);
      xbar[static_cast<size_t>(j)] /= static_cast<double>(n);
    }
    const index_t ldb = std::max(n, d);
    std::vector<double> A(static_cast<size_t>(n * d)), B(static_cast<size_t>(ldb), 0.0);
    for (index_t j = 0; j < d; ++j)
      for (index_t i = 0; i < n; ++i)
        A[static_cast<size_t>(i + j * n)] = X(i, j) - xbar[static_cast<size_t>(j)];
    for (index_t i = 0; i < n; ++i) B[static_cast<size_t>(i)] = y[static_cast<size_t>(i)] - ybar;
    std::vector<double> s(static_cast<size_t>(std::min(n, d)));
    lapack_int rank = 0;
    // Singular values below eps max(n, d) sigma_1 count as zero (numpy's lstsq default): an
    // exactly repeated feature leaves one of order eps sigma_1 after rounding.
    const double rcond =
        std::numeric_limits<double>::epsilon() * static_cast<double>(std::max(n, d));
    const lapack_int info =
        base::gelsd(static_cast<lapack_int>(n), static_cast<lapack_int>(d), 1, A.data(),
                    static_cast<lapack_int>(std::max<index_t>(n, 1)), B.data(),
                    static_cast<lapack_int>(ldb), s.data(), rcond, &rank);
    if (info != 0)
      throw NumericalError("linear.fit: LAPACK dgelsd failed (info = " + std::to_string(info) +
                           ")");
    w_.assign(B.begin(), B.begin() + d);
    b_ = ybar;
    for (index_t j = 0; j < d; ++j) b_ -= xbar[static_cast<size_t>(j)] * w_[static_cast<size_t>(j)];
    for (double v : w_)
      if (!std::isfinite(v))
        throw NumericalError("linear.fit: the least-squares weights are not finite");
  }

  std::vector<double> predict_impl(const Matrix<double>& X) const override {
    std::vector<double> out(static_cast<size_t>(X.rows()), b_);
    for (index_t j = 0; j < X.cols(); ++j)
      for (index_t i = 0; i < X.rows(); ++i)
        out[static_cast<size_t>(i)] += X(i, j) * w_[static_cast<size_t>(j)];
    return out;
  }

  Matrix<double> predict_proba_impl(const Matrix<double>&) const override {
    throw InvalidInput("linear.predict_proba: a regression model has no class probabilities");
  }
  void save_state(detail::ModelState& s) const override {
    s.add("weights", Matrix<double>(static_cast<index_t>(w_.size()), 1, w_));
    s.add("intercept", Matrix<double>(1, 1, {b_}));
  }

 private:
  std::vector<double> w_;
  double b_ = 0;
};

}  // namespace

namespace detail {

std::unique_ptr<Model> make_linear(const ModelOptions&) {
  return std::make_unique<LinearRegression>();
}

std::unique_ptr<Model> restore_linear(ModelReader& in) {
  in.options({});
  auto model = std::make_unique<LinearRegression>();
  model->restore(in);
  return model;
}

}  // namespace detail
}  // namespace dcalign::learn
