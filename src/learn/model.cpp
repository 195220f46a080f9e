// Model base class (argument validation shared by all models) and the model table: each
// model's name, factory and checks of its options.
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

#include "learn/internal.hpp"
#include "learn/model_io.hpp"

namespace dcalign::learn {

namespace {

std::string fmt(double v) {
  // std::to_string prints 6 decimals, which hides the fractional part of labels like 1.0000001.
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// First non-finite entry of X, reported with its position so the caller can find it.
void check_finite(const Matrix<double>& X, const std::string& where) {
  for (index_t j = 0; j < X.cols(); ++j)
    for (index_t i = 0; i < X.rows(); ++i)
      if (!std::isfinite(X(i, j)))
        throw InvalidInput(where + ": X(" + std::to_string(i) + ", " + std::to_string(j) + ") is " +
                           fmt(X(i, j)) + "; expected finite features");
}

}  // namespace

void Model::fit(const Matrix<double>& X, const std::vector<double>& y, int num_classes) {
  const std::string where = name() + ".fit";
  if (num_classes == 0 && !supports_regression())
    throw InvalidInput(where + ": num_classes = 0 asks for regression, which " + name() +
                       " does not do; expected num_classes >= 2");
  if (num_classes != 0 && !supports_classification())
    throw InvalidInput(where + ": num_classes = " + std::to_string(num_classes) + " asks for " +
                       "classification, which " + name() +
                       " does not do (a regression model); expected num_classes = 0");
  detail::check_training_data(X, y, num_classes, where);
  // A failed refit must not leave a half-trained model that claims to be fitted.
  fitted_ = false;
  num_classes_ = num_classes;
  num_features_ = X.cols();
  info_ = FitInfo();
  fit_impl(X, y);
  fitted_ = true;
}

void Model::set_trained(int num_classes, index_t num_features) {
  num_classes_ = num_classes;
  num_features_ = num_features;
  fitted_ = true;
}

namespace detail {

void check_training_data(const Matrix<double>& X, const std::vector<double>& y, int num_classes,
                         const std::string& where) {
  if (X.rows() < 1 || X.cols() < 1)
    throw InvalidInput(where + ": X is " + std::to_string(X.rows()) + " x " +
                       std::to_string(X.cols()) + "; expected at least one sample and feature");
  if (static_cast<index_t>(y.size()) != X.rows())
    throw InvalidInput(where + ": y has " + std::to_string(y.size()) + " entries but X has " +
                       std::to_string(X.rows()) + " rows; expected one target per sample");
  if (num_classes < 0 || num_classes == 1)
    throw InvalidInput(where + ": num_classes = " + std::to_string(num_classes) +
                       "; expected 0 (regression) or at least 2 classes");
  check_finite(X, where);
  for (size_t i = 0; i < y.size(); ++i) {
    const double v = y[i];
    if (num_classes == 0) {
      if (!std::isfinite(v))
        throw InvalidInput(where + ": y[" + std::to_string(i) + "] is " + fmt(v) +
                           "; expected finite regression targets");
    } else if (!(v >= 0.0 && v < num_classes && v == std::floor(v))) {
      throw InvalidInput(where + ": y[" + std::to_string(i) + "] = " + fmt(v) +
                         "; expected a class index in 0.." + std::to_string(num_classes - 1));
    }
  }
}

}  // namespace detail

void Model::check_predict_input(const Matrix<double>& X, const char* call) const {
  const std::string where = name() + "." + call;
  if (!fitted_) throw InvalidInput(where + ": called before fit; expected a fitted model");
  if (X.cols() != num_features_)
    throw InvalidInput(where + ": X has " + std::to_string(X.cols()) + " features; expected " +
                       std::to_string(num_features_) + " as in the training data");
  check_finite(X, where);
}

std::vector<double> Model::predict(const Matrix<double>& X) const {
  check_predict_input(X, "predict");
  if (X.rows() == 0) return {};
  return predict_impl(X);
}

Matrix<double> Model::predict_proba(const Matrix<double>& X) const {
  check_predict_input(X, "predict_proba");
  if (num_classes_ == 0)
    throw InvalidInput(name() +
                       ".predict_proba: the model was fitted for regression; expected "
                       "a classifier (num_classes >= 2)");
  if (X.rows() == 0) return Matrix<double>(0, num_classes_);
  return predict_proba_impl(X);
}

namespace detail {

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace detail

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw InvalidInput("make_model: " + what);
}

// Each model's checks of the options it reads.
void check_mlp(const ModelOptions& o) {
  const MlpOptions& m = o.mlp;
  for (size_t i = 0; i < m.hidden_layers.size(); ++i)
    require(m.hidden_layers[i] > 0, "mlp.hidden_layers[" + std::to_string(i) +
                                        "] = " + std::to_string(m.hidden_layers[i]) +
                                        "; expected a positive layer width");
  require(m.learning_rate > 0, "mlp.learning_rate must be positive");
  require(m.beta1 >= 0 && m.beta1 < 1 && m.beta2 >= 0 && m.beta2 < 1,
          "mlp.beta1 and mlp.beta2 must lie in [0, 1)");
  require(m.epsilon > 0, "mlp.epsilon must be positive");
  require(m.alpha >= 0, "mlp.alpha must be non-negative");
  require(m.batch_size > 0,
          "mlp.batch_size = " + std::to_string(m.batch_size) + "; expected a positive batch size");
  require(m.max_epochs > 0, "mlp.max_epochs must be positive");
  require(!m.early_stopping || (m.validation_fraction > 0 && m.validation_fraction < 1),
          "mlp.validation_fraction = " + fmt(m.validation_fraction) +
              "; expected a fraction in (0, 1) with early stopping");
  require(m.n_iter_no_change > 0, "mlp.n_iter_no_change must be positive");
  require(m.tol >= 0, "mlp.tol must be non-negative");
}

void check_logreg(const ModelOptions& o) {
  require(o.logreg.C > 0, "logreg.C = " + fmt(o.logreg.C) + "; expected C > 0");
  require(o.logreg.max_iter > 0, "logreg.max_iter must be positive");
  require(o.logreg.tol >= 0, "logreg.tol must be non-negative");
}

void check_svm(const ModelOptions& o) {
  // C, epsilon, tol and cache size are checked by LIBSVM's svm_check_parameter at fit time.
  require(std::isfinite(o.svm.gamma), "svm.gamma must be finite (<= 0 selects \"scale\")");
}

void check_knn(const ModelOptions& o) {
  require(o.knn.k > 0, "knn.k = " + std::to_string(o.knn.k) + "; expected k >= 1");
}

void check_forest(const ModelOptions& o) {
  const ForestOptions& f = o.forest;
  require(f.n_estimators > 0, "forest.n_estimators = " + std::to_string(f.n_estimators) +
                                  "; expected at least one tree");
  require(f.max_depth >= 0, "forest.max_depth = " + std::to_string(f.max_depth) +
                                "; expected 0 (unlimited) or a positive depth");
  require(f.subsample > 0 && f.subsample <= 1,
          "forest.subsample = " + fmt(f.subsample) + "; expected a fraction in (0, 1]");
  require(std::isfinite(f.max_features) && f.max_features <= 1,
          "forest.max_features = " + fmt(f.max_features) +
              "; expected a fraction in (0, 1], or <= 0 for sklearn's default");
  require(f.tree_method == "exact" || f.tree_method == "hist",
          "forest.tree_method = \"" + f.tree_method + "\"; expected \"exact\" or \"hist\"");
}

void check_none(const ModelOptions&) {}

// The model table: every kind make_model knows, its factory, its checks, how load_model
// restores it and what of the training data its saved state holds (model_training_data), in
// the order the messages list them.
struct ModelKind {
  const char* name;
  std::unique_ptr<Model> (*make)(const ModelOptions&);
  void (*check)(const ModelOptions&);
  std::unique_ptr<Model> (*restore)(detail::ModelReader&);
  const char* training_data;  ///< nullptr: only fitted parameters; else what it keeps
};
constexpr ModelKind kModels[] = {
    {"mlp", detail::make_mlp, check_mlp, detail::restore_mlp, nullptr},
    {"logreg", detail::make_logreg, check_logreg, detail::restore_logreg, nullptr},
    {"svm", detail::make_svm, check_svm, detail::restore_svm,
     "its support vectors, which are training rows"},
    {"knn", detail::make_knn, check_knn, detail::restore_knn, "every training row"},
    {"forest", detail::make_forest, check_forest, detail::restore_forest,
     "split thresholds half way between single training values, and trees grown until their "
     "leaves are pure isolate single rows"},
    {"linear", detail::make_linear, check_none, detail::restore_linear, nullptr},
};

std::string kind_list() {
  std::string list;
  for (const auto& m : kModels) list += (list.empty() ? "" : ", ") + std::string(m.name);
  return list;
}

const ModelKind* find_model(const std::string& kind) {
  for (const auto& m : kModels)
    if (kind == m.name) return &m;
  return nullptr;
}

}  // namespace

namespace {

// ModelOptions::standardize_target: the wrapped model sees (y - mean) / sd in regression. It
// owns the model it wraps, or (scaled_view) only reads one that someone else trains.
class TargetScaled final : public Model {
 public:
  explicit TargetScaled(std::unique_ptr<Model> inner)
      : owned_(std::move(inner)), inner_(owned_.get()) {}
  TargetScaled(std::unique_ptr<Model> owned, const Model* inner, int num_features, double mean,
               double sd)
      : owned_(std::move(owned)), inner_(inner), mean_(mean), sd_(sd) {
    set_trained(0, num_features);
    info_ = inner_->info();
  }
  std::string name() const override { return inner_->name(); }
  std::vector<double> parameters() const override { return inner_->parameters(); }

 protected:
  void save_state(detail::ModelState& state) const override {
    detail::ModelIo::save_state(*inner_, state);
    // In classification the wrapper passes everything through: nothing to record.
    state.target_scaled = num_classes_ == 0;
    state.target_mean = mean_;
    state.target_sd = sd_;
  }
  bool supports_regression() const override { return inner_->can_fit(0); }
  bool supports_classification() const override { return inner_->can_fit(2); }
  void fit_impl(const Matrix<double>& X, const std::vector<double>& y) override {
    if (!owned_) throw InvalidInput(name() + ".fit: a view of another model cannot be refitted");
    mean_ = 0;
    sd_ = 1;
    if (num_classes_ == 0) {
      detail::target_moments({y}, mean_, sd_);
      std::vector<double> scaled(y.size());
      for (size_t i = 0; i < y.size(); ++i) scaled[i] = (y[i] - mean_) / sd_;
      owned_->fit(X, scaled, 0);
    } else {
      owned_->fit(X, y, num_classes_);
    }
    info_ = inner_->info();
  }
  std::vector<double> predict_impl(const Matrix<double>& X) const override {
    std::vector<double> p = inner_->predict(X);
    if (num_classes_ == 0)
      for (double& v : p) v = v * sd_ + mean_;
    return p;
  }
  Matrix<double> predict_proba_impl(const Matrix<double>& X) const override {
    return inner_->predict_proba(X);
  }

 private:
  std::unique_ptr<Model> owned_;  ///< empty for a view
  const Model* inner_;
  double mean_ = 0, sd_ = 1;
};

}  // namespace

namespace detail {

std::unique_ptr<Model> scale_targets(std::unique_ptr<Model> inner) {
  return std::make_unique<TargetScaled>(std::move(inner));
}
std::unique_ptr<Model> scale_targets(std::unique_ptr<Model> inner, int num_features, double mean,
                                     double sd) {
  const Model* read = inner.get();
  return std::make_unique<TargetScaled>(std::move(inner), read, num_features, mean, sd);
}
std::unique_ptr<Model> scaled_view(const Model& inner, int num_features, double mean, double sd) {
  return std::make_unique<TargetScaled>(nullptr, &inner, num_features, mean, sd);
}

void target_moments(const std::vector<std::vector<double>>& y, double& mean, double& sd) {
  double n = 0, sum = 0;
  for (const auto& v : y)
    for (double t : v) {
      sum += t;
      n += 1;
    }
  mean = n > 0 ? sum / n : 0.0;
  double ss = 0;
  for (const auto& v : y)
    for (double t : v) ss += (t - mean) * (t - mean);
  sd = n > 0 ? std::sqrt(ss / n) : 0.0;
  if (!(sd > 0) || !std::isfinite(sd)) sd = 1.0;
}

void validate_options(const std::string& kind, const ModelOptions& o) {
  require(o.threads >= 0, "threads = " + std::to_string(o.threads) +
                              "; expected 0 (all cores) or a positive count");
  if (const ModelKind* m = find_model(kind)) m->check(o);
}

}  // namespace detail

void validate(const FedAvgOptions& o) {
  const auto check = [](bool ok, const std::string& what) {
    if (!ok) throw InvalidInput("fedavg: " + what);
  };
  check(o.rounds >= 1, "rounds R = " + std::to_string(o.rounds) + "; expected at least one round");
  check(o.local_epochs >= 1,
        "local_epochs E = " + std::to_string(o.local_epochs) + "; expected at least one epoch");
  check(o.batch_size >= 1,
        "batch_size B = " + std::to_string(o.batch_size) + "; expected a positive batch size");
  check(std::isfinite(o.participation) && o.participation > 0 && o.participation <= 1,
        "participation p = " + fmt(o.participation) + "; expected a fraction in (0, 1]");
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& m : kModels) names.push_back(m.name);
  return names;
}

std::string model_training_data(const std::string& kind) {
  const ModelKind* m = find_model(kind);
  if (!m)
    throw InvalidInput("model_training_data: unknown model \"" + kind + "\"; expected one of " +
                       kind_list());
  return m->training_data ? m->training_data : "";
}

std::unique_ptr<Model> make_model(const std::string& kind, const ModelOptions& options) {
  detail::validate_options(kind, options);
  if (const ModelKind* m = find_model(kind)) {
    std::unique_ptr<Model> model = m->make(options);
    return options.standardize_target ? detail::scale_targets(std::move(model)) : std::move(model);
  }
  throw InvalidInput("make_model: unknown model \"" + kind + "\"; expected one of " + kind_list());
}

namespace detail {

std::unique_ptr<Model> restore_model(const std::string& kind, ModelReader& in) {
  const ModelKind* m = find_model(kind);
  if (!m) in.fail("key 'kind' is \"" + kind + "\"; expected one of " + kind_list());
  const int classes = in.num_classes();
  if (!m->make(ModelOptions())->can_fit(classes))
    in.fail("key 'num_classes' is " + std::to_string(classes) + ", but a " + kind + " model does " +
            (classes == 0 ? "only classification" : "only regression"));
  return m->restore(in);
}

}  // namespace detail

}  // namespace dcalign::learn
