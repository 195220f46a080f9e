// LIBSVM RBF support vector machine: C-SVC (one-vs-one multiclass, LIBSVM's own scheme) and
// epsilon-SVR, with scikit-learn's SVC/SVR defaults (C = 1, gamma = "scale", tol = 1e-3,
// 200 MB cache, shrinking). Only this translation unit and svm_rbf.cpp (its predictions in
// blocks) include LIBSVM.
#include <libsvm/svm.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "learn/internal.hpp"
#include "learn/model_io.hpp"
#include "learn/svm_rbf.hpp"

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
  void restore(detail::ModelReader& in);
  /// LIBSVM's own svm_predict, row by row (what predict() must equal; for the tests).
  std::vector<double> predict_with_libsvm(const Matrix<double>& X) const;
  bool predicts_in_blocks() const { return blocked_.usable(); }

 protected:
  void fit_impl(const Matrix<double>& X, const std::vector<double>& y) override;
  std::vector<double> predict_impl(const Matrix<double>& X) const override;
  Matrix<double> predict_proba_impl(const Matrix<double>& X) const override;
  void save_state(detail::ModelState& s) const override;

 private:
  ModelOptions opt_;
  // The model's support vectors point into nodes_ (svm_train does not copy them), so nodes_
  // is declared first and therefore destroyed after model_.
  std::vector<svm_node> nodes_;
  std::unique_ptr<svm_model, ModelDeleter> model_;
  std::vector<int> column_of_;    // LIBSVM's internal class order -> probability column
  detail::RbfPredictor blocked_;  // predict()'s route while usable(); built after each fit
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
  blocked_ = detail::RbfPredictor();
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
  blocked_ = detail::RbfPredictor(*model_, X.cols());
  column_of_.clear();
  if (num_classes_ > 0) {
    std::vector<int> labels(static_cast<size_t>(svm_get_nr_class(model_.get())));
    svm_get_labels(model_.get(), labels.data());
    column_of_ = labels;  // labels are the class indices we trained with
  }
}

std::vector<double> LibSvm::predict_impl(const Matrix<double>& X) const {
  if (!blocked_.usable()) return predict_with_libsvm(X);
  const index_t m = X.rows();
  std::vector<double> out(static_cast<size_t>(m));
  const index_t tile = detail::RbfPredictor::kTileRows, tiles = (m + tile - 1) / tile;
  const int threads = detail::resolve_threads(opt_.threads);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (index_t t = 0; t < tiles; ++t)
    blocked_.predict(*model_, X, t * tile, std::min(m, (t + 1) * tile), out.data() + t * tile);
  return out;
}

std::vector<double> LibSvm::predict_with_libsvm(const Matrix<double>& X) const {
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

// ---- saving: LIBSVM's model arrays as parameters. Its own text format (svm_save_model) prints
// support vectors with 8 significant digits, which would change predictions.

void LibSvm::save_state(detail::ModelState& s) const {
  const svm_model& m = *model_;
  const int k = m.nr_class, l = m.l, pairs = k * (k - 1) / 2;
  s.options["threads"] = opt_.threads;
  s.options["gamma"] = m.param.gamma;
  s.options["probability"] = svm_check_probability_model(&m) != 0;
  Matrix<double> sv(l, num_features_), coef(k - 1, l);
  for (int i = 0; i < l; ++i)
    for (const svm_node* p = m.SV[i]; p->index != -1; ++p) sv(i, p->index - 1) = p->value;
  for (int r = 0; r + 1 < k; ++r)
    for (int i = 0; i < l; ++i) coef(r, i) = m.sv_coef[r][i];
  s.add("support_vectors", std::move(sv));
  s.add("sv_coef", std::move(coef));
  s.add("rho", detail::as_row(std::vector<double>(m.rho, m.rho + pairs)));
  if (num_classes_ > 0) {
    s.add("labels", detail::as_row(std::vector<double>(m.label, m.label + k)));
    s.add("n_sv", detail::as_row(std::vector<double>(m.nSV, m.nSV + k)));
  }
  if (svm_check_probability_model(&m)) {
    s.add("prob_a", detail::as_row(std::vector<double>(m.probA, m.probA + pairs)));
    s.add("prob_b", detail::as_row(std::vector<double>(m.probB, m.probB + pairs)));
  }
}

// An array for LIBSVM's model, which svm_free_and_destroy_model releases with free().
template <typename T>
T* c_array(size_t count) {
  void* p = std::calloc(std::max<size_t>(count, 1), sizeof(T));
  if (!p) throw std::bad_alloc();
  return static_cast<T*>(p);
}

void LibSvm::restore(detail::ModelReader& in) {
  const int classes = in.num_classes();
  const index_t d = in.num_features();
  const Matrix<double>& sv = in.f64("support_vectors");
  const index_t l = sv.rows();
  if (sv.cols() != d || l < 1 || l > INT_MAX)
    in.fail_parameter("support_vectors",
                      "is " + std::to_string(l) + " x " + std::to_string(sv.cols()) +
                          "; expected at least one row of num_features = " + std::to_string(d) +
                          " columns");
  const auto row_of = [&](const std::string& name, index_t count) -> const Matrix<double>& {
    const Matrix<double>& a = in.f64(name);
    if (a.rows() != 1 || a.cols() != count)
      in.fail_parameter(name, "is " + std::to_string(a.rows()) + " x " + std::to_string(a.cols()) +
                                  "; expected 1 x " + std::to_string(count));
    return a;
  };
  const auto whole = [](double v, double lo, double hi) {
    return v >= lo && v <= hi && v == std::floor(v);
  };
  // LIBSVM's classes: those present in training (2..K) for C-SVC, two for epsilon-SVR.
  index_t k = 2;
  std::vector<int> labels, counts;
  if (classes > 0) {
    const Matrix<double>& lab = in.f64("labels");
    k = lab.cols();
    if (lab.rows() != 1 || k < 2 || k > classes)
      in.fail_parameter("labels", "is " + std::to_string(lab.rows()) + " x " + std::to_string(k) +
                                      "; expected 1 x (2 to " + std::to_string(classes) +
                                      " classes)");
    const Matrix<double>& nsv = row_of("n_sv", k);
    index_t total = 0;
    std::vector<bool> seen(static_cast<size_t>(classes), false);
    for (index_t c = 0; c < k; ++c) {
      if (!whole(lab(0, c), 0, classes - 1) || seen[static_cast<size_t>(lab(0, c))])
        in.fail_parameter("labels", "holds " + detail::number_text(lab(0, c)) +
                                        "; expected distinct class indices in 0.." +
                                        std::to_string(classes - 1));
      seen[static_cast<size_t>(lab(0, c))] = true;
      if (!whole(nsv(0, c), 0, static_cast<double>(l)))
        in.fail_parameter(
            "n_sv", "holds " + detail::number_text(nsv(0, c)) + "; expected support-vector counts");
      labels.push_back(static_cast<int>(lab(0, c)));
      counts.push_back(static_cast<int>(nsv(0, c)));
      total += counts.back();
    }
    if (total != l)
      in.fail_parameter("n_sv", "sums to " + std::to_string(total) + "; expected " +
                                    std::to_string(l) + ", the rows of support_vectors");
  }
  const index_t pairs = k * (k - 1) / 2;
  const Matrix<double>& coef = in.f64("sv_coef");
  if (coef.rows() != k - 1 || coef.cols() != l)
    in.fail_parameter("sv_coef", "is " + std::to_string(coef.rows()) + " x " +
                                     std::to_string(coef.cols()) + "; expected " +
                                     std::to_string(k - 1) + " x " + std::to_string(l));
  const Matrix<double>& rho = row_of("rho", pairs);
  const bool probability = opt_.svm.probability;
  if (probability && classes == 0)
    in.fail("key 'options.probability' is true for regression; expected false");
  const Matrix<double>* prob[2] = {nullptr, nullptr};
  if (probability) {
    prob[0] = &row_of("prob_a", pairs);
    prob[1] = &row_of("prob_b", pairs);
  }

  // The same nodes as a fit makes (zeros left out), which the model points into.
  nodes_.clear();
  std::vector<size_t> start(static_cast<size_t>(l));
  for (index_t i = 0; i < l; ++i) {
    start[static_cast<size_t>(i)] = nodes_.size();
    append_row(sv, i, nodes_);
  }
  std::unique_ptr<svm_model, ModelDeleter> m(c_array<svm_model>(1));
  m->param.svm_type = classes > 0 ? C_SVC : EPSILON_SVR;
  m->param.kernel_type = RBF;
  m->param.degree = 3;
  m->param.gamma = opt_.svm.gamma;
  m->param.probability = probability ? 1 : 0;
  m->l = static_cast<int>(l);
  m->SV = c_array<svm_node*>(static_cast<size_t>(l));
  for (index_t i = 0; i < l; ++i) m->SV[i] = &nodes_[start[static_cast<size_t>(i)]];
  m->sv_coef = c_array<double*>(static_cast<size_t>(k - 1));
  m->nr_class = static_cast<int>(k);  // after sv_coef: the deleter frees nr_class - 1 rows
  for (index_t r = 0; r + 1 < k; ++r) {
    m->sv_coef[r] = c_array<double>(static_cast<size_t>(l));
    for (index_t i = 0; i < l; ++i) m->sv_coef[r][i] = coef(r, i);
  }
  m->rho = c_array<double>(static_cast<size_t>(pairs));
  std::copy(rho.data(), rho.data() + pairs, m->rho);
  if (probability) {
    m->probA = c_array<double>(static_cast<size_t>(pairs));
    m->probB = c_array<double>(static_cast<size_t>(pairs));
    std::copy(prob[0]->data(), prob[0]->data() + pairs, m->probA);
    std::copy(prob[1]->data(), prob[1]->data() + pairs, m->probB);
  }
  if (classes > 0) {
    m->label = c_array<int>(static_cast<size_t>(k));
    m->nSV = c_array<int>(static_cast<size_t>(k));
    std::copy(labels.begin(), labels.end(), m->label);
    std::copy(counts.begin(), counts.end(), m->nSV);
  }
  m->free_sv = 0;  // the nodes are nodes_, as after svm_train
  model_ = std::move(m);
  blocked_ = detail::RbfPredictor(*model_, d);
  column_of_ = labels;
  set_trained(classes, d);
  info_ = in.fit_info();
}

}  // namespace

namespace detail {
std::unique_ptr<Model> make_svm(const ModelOptions& options) {
  return std::make_unique<LibSvm>(options);
}

namespace {
const LibSvm& bare_libsvm(const Model& svm) {
  const auto* s = dynamic_cast<const LibSvm*>(&svm);
  if (!s) throw InvalidInput("the model is '" + svm.name() + "', not a bare LIBSVM SVM (make_svm)");
  return *s;
}
}  // namespace

std::vector<double> svm_predict_with_libsvm(const Model& svm, const Matrix<double>& X) {
  return bare_libsvm(svm).predict_with_libsvm(X);
}

bool svm_predicts_in_blocks(const Model& svm) { return bare_libsvm(svm).predicts_in_blocks(); }

std::unique_ptr<Model> restore_svm(ModelReader& in) {
  const Json& o = in.options({"threads", "gamma", "probability"});
  ModelOptions options;
  options.threads = in.threads(o);
  options.svm.gamma = in.json().number(o, "gamma", "options.");
  if (!(options.svm.gamma > 0) || !std::isfinite(options.svm.gamma))
    in.fail("key 'options.gamma' must be the kernel's gamma, a positive finite number");
  options.svm.probability = in.json().boolean(o, "probability", "options.");
  in.check_options("svm", options);
  auto model = std::make_unique<LibSvm>(options);
  model->restore(in);
  return model;
}
}  // namespace detail

}  // namespace dcalign::learn
