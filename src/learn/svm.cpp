// LIBSVM RBF support vector machine: C-SVC (one-vs-one multiclass, LIBSVM's own scheme) and
// epsilon-SVR, with scikit-learn's SVC/SVR defaults (C = 1, gamma = "scale", tol = 1e-3,
// 200 MB cache, shrinking). Only this translation unit includes LIBSVM.
#include <libsvm/svm.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "learn/internal.hpp"

namespace dcalign::learn {

double gamma_scale(const Matrix<double>& X) {
  if (X.size() == 0)
    throw InvalidInput("gamma_scale: X is " + std::to_string(X.rows()) + " x " +
                       std::to_string(X.cols()) + "; expected a non-empty matrix");
  // Two passes (mean, then squared deviations) to avoid the cancellation of E[x^2] - E[x]^2.
  const double count = static_cast<double>(X.size());
  double mean = 0.0;
  for (double v : X.values()) mean += v;
  mean /= count;
  double var = 0.0;
  for (double v : X.values()) var += (v - mean) * (v - mean);
  var /= count;
  return var > 0.0 ? 1.0 / (static_cast<double>(X.cols()) * var) : 1.0;
}

namespace {

void quiet(const char*) {}

struct ModelDeleter {
  void operator()(svm_model* m) const { svm_free_and_destroy_model(&m); }
};

// Row i of X in LIBSVM's sparse form (1-based feature indices, terminated by index -1).
// Zeros are left out: the RBF kernel treats missing entries as zero, and raw image data
// (MNIST) is mostly zeros, so this saves memory and kernel time without changing results.
void append_row(const Matrix<double>& X, index_t i, std::vector<svm_node>& out) {
  for (index_t j = 0; j < X.cols(); ++j) {
    const double v = X(i, j);
    if (v != 0.0) out.push_back(svm_node{static_cast<int>(j + 1), v});
  }
  out.push_back(svm_node{-1, 0.0});
}

class LibSvm final : public Model {
 public:
  explicit LibSvm(const ModelOptions& o) : opt_(o) {}
  std::string name() const override { return "svm"; }

 protected:
  void fit_impl(const Matrix<double>& X, const std::vector<double>& y) override;
  std::vector<double> predict_impl(const Matrix<double>& X) const override;
  Matrix<double> predict_proba_impl(const Matrix<double>& X) const override;

 private:
  ModelOptions opt_;
  // The model's support vectors point into nodes_ (svm_train does not copy them), so nodes_
  // is declared first and therefore destroyed after model_.
  std::vector<svm_node> nodes_;
  std::unique_ptr<svm_model, ModelDeleter> model_;
  std::vector<int> column_of_;  // LIBSVM's internal class order -> probability column
};

void LibSvm::fit_impl(const Matrix<double>& X, const std::vector<double>& y) {
  const SvmOptions& o = opt_.svm;
  const index_t n = X.rows();
  if (num_classes_ > 0) {
    bool two = false;
    for (double v : y) two = two || v != y[0];
    if (!two)
      throw InvalidInput("svm.fit: every training label is class " +
                         std::to_string(static_cast<int>(y[0])) +
                         "; expected at least two classes present");
  }
  model_.reset();
  nodes_.clear();
  std::vector<size_t> start(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    start[static_cast<size_t>(i)] = nodes_.size();
    append_row(X, i, nodes_);
  }
  std::vector<svm_node*> rows(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i)
    rows[static_cast<size_t>(i)] = &nodes_[start[static_cast<size_t>(i)]];
  std::vector<double> targets(y);
  svm_problem prob{static_cast<int>(n), targets.data(), rows.data()};

  const double gamma = o.gamma > 0 ? o.gamma : gamma_scale(X);
  svm_parameter param{};
  param.svm_type = num_classes_ > 0 ? C_SVC : EPSILON_SVR;
  param.kernel_type = RBF;
  param.degree = 3;
  param.gamma = gamma;
  param.coef0 = 0.0;
  param.cache_size = o.cache_mb;
  param.eps = o.tol;
  param.C = o.C;
  param.nr_weight = 0;
  param.weight_label = nullptr;
  param.weight = nullptr;
  param.nu = 0.5;
  param.p = o.epsilon;
  param.shrinking = o.shrinking ? 1 : 0;
  param.probability = (num_classes_ > 0 && o.probability) ? 1 : 0;
  if (const char* err = svm_check_parameter(&prob, &param))
    throw InvalidInput(std::string("svm.fit: LIBSVM rejected the parameters: ") + err);

  // LIBSVM prints progress to stdout through a process-global hook: silence it once.
  static std::once_flag silenced;
  std::call_once(silenced, [] { svm_set_print_string_function(&quiet); });
  if (param.probability) {
    // The probability model's internal cross-validation draws its folds from rand(), which is
    // process-global: seed it and train under a lock so concurrent fits stay reproducible.
    // (Unrelated rand() users elsewhere in the process could still interfere.)
    static std::mutex rand_state;
    std::lock_guard<std::mutex> lock(rand_state);
    std::srand(static_cast<unsigned>(opt_.seed ^ (opt_.seed >> 32)));
    model_.reset(svm_train(&prob, &param));
  } else {
    model_.reset(svm_train(&prob, &param));
  }
  if (!model_) throw NumericalError("svm.fit: svm_train returned no model");

  info_.gamma = gamma;
  info_.support_vectors = model_->l;
  column_of_.clear();
  if (num_classes_ > 0) {
    std::vector<int> labels(static_cast<size_t>(svm_get_nr_class(model_.get())));
    svm_get_labels(model_.get(), labels.data());
    column_of_ = labels;  // labels are the class indices we trained with
  }
}

std::vector<double> LibSvm::predict_impl(const Matrix<double>& X) const {
  const index_t m = X.rows();
  std::vector<double> out(static_cast<size_t>(m));
  const int threads = detail::resolve_threads(opt_.threads);
#pragma omp parallel num_threads(threads)
  {
    std::vector<svm_node> row;
#pragma omp for schedule(dynamic, 64)
    for (index_t i = 0; i < m; ++i) {
      row.clear();
      append_row(X, i, row);
      // svm_predict votes over the one-vs-one decision values, as sklearn's SVC.predict,
      // even when the model also carries probability estimates.
      out[static_cast<size_t>(i)] = svm_predict(model_.get(), row.data());
    }
  }
  return out;
}

Matrix<double> LibSvm::predict_proba_impl(const Matrix<double>& X) const {
  if (!svm_check_probability_model(model_.get()))
    throw InvalidInput(
        "svm.predict_proba: the model was fitted without probability "
        "estimates; expected ModelOptions::svm.probability = true at fit");
  const index_t m = X.rows();
  const int k = static_cast<int>(column_of_.size());
  // Classes absent from the training data keep probability 0.
  Matrix<double> proba(m, num_classes_);
  const int threads = detail::resolve_threads(opt_.threads);
#pragma omp parallel num_threads(threads)
  {
    std::vector<svm_node> row;
    std::vector<double> p(static_cast<size_t>(k));
#pragma omp for schedule(dynamic, 64)
    for (index_t i = 0; i < m; ++i) {
      row.clear();
      append_row(X, i, row);
      svm_predict_probability(model_.get(), row.data(), p.data());
      for (int c = 0; c < k; ++c)
        proba(i, column_of_[static_cast<size_t>(c)]) = p[static_cast<size_t>(c)];
    }
  }
  return proba;
}

}  // namespace

namespace detail {
std::unique_ptr<Model> make_svm(const ModelOptions& options) {
  return std::make_unique<LibSvm>(options);
}
}  // namespace detail

}  // namespace dcalign::learn
