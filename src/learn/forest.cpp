// Random forest: XGBoost's random-forest mode through its C API (Debian's libxgboost-dev),
// configured to match scikit-learn's RandomForestClassifier / RandomForestRegressor defaults as
// closely as XGBoost allows. Only this translation unit includes XGBoost.
//
// Configuration: booster gbtree, one boosting round of num_parallel_tree = n_estimators trees
// (default 100, sklearn's), eta = 1 (XGBoost divides it by the number of parallel trees, so the
// forest's margin is the mean of the trees' leaf values), lambda = 0 (no L2 shrinkage of leaf
// values), min_child_weight = 0 (sklearn's min_samples_leaf = 1: nodes split until pure),
// gamma = 0, max_delta_step = 0, base_score fixed (0.5 for classification, mean(y) for
// regression), objective binary:logistic, multi:softprob or reg:squarederror, seed and nthread
// from ModelOptions.
//
// Why these settings reproduce a random forest. In the single round every tree sees the same
// gradients g_i = p0 - y_i and a hessian h that is the same constant for every sample (p0 the
// base probability: h = 1/4 for binary:logistic at p0 = 1/2, h = 2 (1/K)(1 - 1/K) for
// multi:softprob at equal margins, h = 1 for squared error). With lambda = 0, XGBoost's split
// gain  G_L^2/H_L + G_R^2/H_R - G^2/H  is then, up to the factor 1/h, the decrease of the sum of
// squared deviations of y (of the one-hot class indicator): for two classes exactly twice the
// decrease of the weighted Gini impurity n * 2p(1-p), sklearn's criterion; for regression
// sklearn's squared_error. A leaf's value -G/H is (ybar_leaf - p0) / h, so
//   binary:      mean over trees of the class-1 fraction of the leaf  =  1/2 + margin / 4,
//   multi-class: mean over class-k trees of the class-k fraction      =  1/K + h (margin_k - 1/2),
//   regression:  mean over trees of the mean target of the leaf       =  margin,
// which predict_proba() recovers from XGBoost's raw margins: for two classes it is exactly
// sklearn's predict_proba (the mean of the trees' leaf class fractions), not XGBoost's
// sigmoid(margin), which squashes it (both rank the samples identically).
//
// Differences from scikit-learn that remain:
//  * Multi-class: XGBoost grows one tree per class and "tree" (K x n_estimators trees), each
//    splitting on its own one-vs-rest indicator (the decrease of p_k (1 - p_k)), where sklearn
//    grows one tree per estimator on the multi-class Gini sum_k p_k (1 - p_k). The class-k
//    fractions come from different trees, so their sum is near but not exactly 1: they are
//    normalised to sum to 1.
//  * Sampling: sklearn draws a bootstrap sample (n rows with replacement, the counts acting as
//    sample weights); XGBoost samples rows without replacement. subsample = 0.632 (1 - 1/e) gives
//    each tree the same expected number of distinct rows as a bootstrap sample, with weight 1.
//    subsample = 1 trains every tree on all rows (sklearn's bootstrap = False).
//  * Features per split: sklearn's max_features = "sqrt" (classification; 1.0 for regression)
//    is reproduced with colsample_bynode = (floor(sqrt(d)) + 1/2) / d, which XGBoost truncates to
//    floor(sqrt(d)) features. When none of the drawn features separates the node, sklearn keeps
//    drawing further features; XGBoost makes the node a leaf.
//  * Depth: sklearn's max_depth = None. XGBoost's exact method needs a finite depth, so
//    max_depth = 0 becomes n (the number of training rows), which no tree can reach; nodes stop
//    splitting when pure (zero gain), as in sklearn. XGBoost does not split on gains below 1e-6.
//  * Thresholds: tree_method = "exact" (default) splits half way between consecutive distinct
//    values, as sklearn does; "hist" (faster on large data) restricts them to 256 quantile bins
//    and grows with grow_policy = lossguide, which allows max_depth = 0. Features, labels and
//    thresholds are single precision in XGBoost (sklearn: features float32, the rest double).
//  * Random numbers: XGBoost's generator, so the same seed gives other trees than sklearn's.
//  * No out-of-bag score, class_weight, min_impurity_decrease or max_leaf_nodes.
#include <xgboost/c_api.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "learn/internal.hpp"
#include "learn/model_io.hpp"

namespace dcalign::learn {

namespace {

void check(int rc, const char* call) {
  if (rc != 0)
    throw BackendError(std::string("forest: XGBoost's ") + call + " failed: " + XGBGetLastError());
}

struct DMatrixDeleter {
  void operator()(void* h) const { XGDMatrixFree(h); }
};
struct BoosterDeleter {
  void operator()(void* h) const { XGBoosterFree(h); }
};
using DMatrixPtr = std::unique_ptr<void, DMatrixDeleter>;
using BoosterPtr = std::unique_ptr<void, BoosterDeleter>;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// X as XGBoost's dense row-major single-precision matrix. Values beyond float's range would
// become infinities, which XGBoost rejects: they are reported here by position.
DMatrixPtr to_dmatrix(const Matrix<double>& X, int threads, const char* call) {
  const index_t n = X.rows(), d = X.cols();
  std::vector<float> buf(static_cast<size_t>(n) * static_cast<size_t>(d));
  for (index_t j = 0; j < d; ++j)
    for (index_t i = 0; i < n; ++i) {
      const double v = X(i, j);
      if (std::fabs(v) > static_cast<double>(FLT_MAX))
        throw InvalidInput(std::string("forest.") + call + ": X(" + std::to_string(i) + ", " +
                           std::to_string(j) + ") = " + num(v) +
                           " exceeds single precision; expected |x| <= 3.4e38 (XGBoost stores "
                           "features as float)");
      buf[static_cast<size_t>(i) * static_cast<size_t>(d) + static_cast<size_t>(j)] =
          static_cast<float>(v);
    }
  DMatrixHandle h = nullptr;
  check(XGDMatrixCreateFromMat_omp(buf.data(), static_cast<bst_ulong>(n), static_cast<bst_ulong>(d),
                                   std::nanf(""), &h, threads),
        "XGDMatrixCreateFromMat_omp");
  return DMatrixPtr(h);
}

// XGBoost's process-wide state: its log verbosity is set once, and its random engine
// (common::GlobalRandom, reseeded from `seed` when a booster is configured) is only used under
// this lock, so that concurrent fits stay reproducible.
std::mutex& xgboost_lock() {
  static std::mutex m;
  return m;
}

// Called under xgboost_lock().
void quiet_xgboost() {
  static std::once_flag quiet;
  std::call_once(quiet,
                 [] { check(XGBSetGlobalConfig("{\"verbosity\": 0}"), "XGBSetGlobalConfig"); });
}

const char* objective(int num_classes) {
  return num_classes == 0   ? "reg:squarederror"
         : num_classes == 2 ? "binary:logistic"
                            : "multi:softprob";
}

class Forest final : public Model {
 public:
  explicit Forest(const ModelOptions& o) : opt_(o) {}
  std::string name() const override { return "forest"; }
  void restore(detail::ModelReader& in);

 protected:
  void fit_impl(const Matrix<double>& X, const std::vector<double>& y) override;
  std::vector<double> predict_impl(const Matrix<double>& X) const override;
  Matrix<double> predict_proba_impl(const Matrix<double>& X) const override;
  void save_state(detail::ModelState& s) const override;

 private:
  // The forest's raw margins: n values (binary, regression) or n x K row-major (multi-class).
  std::vector<float> margins(const Matrix<double>& X, const char* call) const;
  // Class probabilities from the margins; `call` names the public call in error messages.
  Matrix<double> probabilities(const Matrix<double>& X, const char* call) const;

  ModelOptions opt_;
  BoosterPtr booster_;
  std::vector<bool> present_;         // which classes occur in the training labels
  mutable std::mutex predict_mutex_;  // XGBoosterPredict writes to the booster's buffers
};

void Forest::fit_impl(const Matrix<double>& X, const std::vector<double>& y) {
  const ForestOptions& o = opt_.forest;
  const index_t n = X.rows(), d = X.cols();
  const int threads = detail::resolve_threads(opt_.threads);
  booster_.reset();
  present_.assign(static_cast<size_t>(num_classes_), false);
  for (double v : y)
    if (num_classes_ > 0) present_[static_cast<size_t>(v)] = true;

  for (size_t i = 0; i < y.size(); ++i)
    if (std::fabs(y[i]) > static_cast<double>(FLT_MAX))
      throw InvalidInput("forest.fit: y[" + std::to_string(i) + "] = " + num(y[i]) +
                         " exceeds single precision; expected |y| <= 3.4e38 (XGBoost stores "
                         "targets as float)");
  DMatrixPtr train = to_dmatrix(X, threads, "fit");
  std::vector<float> labels(y.begin(), y.end());
  check(XGDMatrixSetFloatInfo(train.get(), "label", labels.data(), static_cast<bst_ulong>(n)),
        "XGDMatrixSetFloatInfo");

  // Features per split: sklearn's "sqrt" (classification) or all (regression) by default.
  double colsample = o.max_features;
  if (!(colsample > 0)) {
    if (num_classes_ == 0) {
      colsample = 1.0;
    } else {
      const double k = std::max(1.0, std::floor(std::sqrt(static_cast<double>(d))));
      colsample = std::min(1.0, (k + 0.5) / static_cast<double>(d));
    }
  }
  double base_score = 0.5;
  if (num_classes_ == 0) {
    double sum = 0;
    for (double v : y) sum += v;
    base_score = sum / static_cast<double>(n);
  }
  const bool hist = o.tree_method == "hist";
  // Unlimited depth is max_depth = 0 for lossguide growth (hist); the exact method needs a
  // bound, and n rows can never make a tree deeper than n levels.
  int depth = o.max_depth;
  if (depth == 0 && !hist) depth = static_cast<int>(std::min<index_t>(n, index_t{1} << 30));

  std::lock_guard<std::mutex> lock(xgboost_lock());
  quiet_xgboost();
  // The booster learns the number of features from the matrices it is created with; it keeps
  // only a weak reference to them, so `train` may be freed after training.
  BoosterHandle handle = nullptr;
  DMatrixHandle cache[] = {train.get()};
  check(XGBoosterCreate(cache, 1, &handle), "XGBoosterCreate");
  BoosterPtr booster(handle);
  auto set = [&](const char* key, const std::string& value) {
    if (XGBoosterSetParam(handle, key, value.c_str()) != 0)
      throw BackendError(std::string("forest: XGBoost rejected ") + key + " = " + value + ": " +
                         XGBGetLastError());
  };
  set("booster", "gbtree");
  set("objective", objective(num_classes_));
  if (num_classes_ > 2) set("num_class", std::to_string(num_classes_));
  set("base_score", num(base_score));
  set("eta", "1");
  set("num_parallel_tree", std::to_string(o.n_estimators));
  set("subsample", num(o.subsample));
  set("colsample_bynode", num(colsample));
  set("tree_method", o.tree_method);
  if (hist) set("grow_policy", "lossguide");
  set("max_depth", std::to_string(depth));
  set("min_child_weight", "0");
  set("lambda", "0");
  set("alpha", "0");
  set("gamma", "0");
  set("max_delta_step", "0");
  // XGBoost reads the seed as a signed 64-bit integer and seeds a 32-bit std::mt19937 with it:
  // the 64-bit seed is folded to 32 bits, so that its high half matters too.
  set("seed", std::to_string((opt_.seed ^ (opt_.seed >> 32)) & 0xffffffffu));
  set("nthread", std::to_string(threads));
  check(XGBoosterUpdateOneIter(handle, 0, train.get()), "XGBoosterUpdateOneIter");
  booster_ = std::move(booster);
}

std::vector<float> Forest::margins(const Matrix<double>& X, const char* call) const {
  const int threads = detail::resolve_threads(opt_.threads);
  DMatrixPtr data = to_dmatrix(X, threads, call);
  const size_t expect =
      static_cast<size_t>(X.rows()) * static_cast<size_t>(num_classes_ > 2 ? num_classes_ : 1);
  std::lock_guard<std::mutex> lock(predict_mutex_);
  bst_ulong len = 0;
  const float* out = nullptr;
  // option_mask 1: output margins; ntree_limit 0: all trees; training 0.
  check(XGBoosterPredict(booster_.get(), data.get(), 1, 0, 0, &len, &out), "XGBoosterPredict");
  if (static_cast<size_t>(len) != expect)
    throw BackendError("forest: XGBoost returned " + std::to_string(len) + " margins; expected " +
                       std::to_string(expect));
  return std::vector<float>(out, out + len);
}

// A leaf-fraction mean recovered from a single-precision margin: XGBoost sums the trees' leaf
// values in float, which leaves errors of about 1e-7 (100 pure leaves of value 2/100 add up to
// 1.9999999). Values within 1e-6 of 0 or 1 are taken as 0 or 1, so that pure leaves give
// exactly 0 and 1 as in sklearn.
double fraction(double f) {
  constexpr double kFloatNoise = 1e-6;
  if (f < kFloatNoise) return 0.0;
  if (f > 1.0 - kFloatNoise) return 1.0;
  return f;
}

Matrix<double> Forest::predict_proba_impl(const Matrix<double>& X) const {
  return probabilities(X, "predict_proba");
}

Matrix<double> Forest::probabilities(const Matrix<double>& X, const char* call) const {
  const index_t m = X.rows();
  const int k = num_classes_;
  const std::vector<float> margin = margins(X, call);
  Matrix<double> proba(m, k);
  if (k == 2) {
    for (index_t i = 0; i < m; ++i) {
      const double p1 = fraction(0.5 + 0.25 * margin[static_cast<size_t>(i)]);
      proba(i, 0) = 1.0 - p1;
      proba(i, 1) = p1;
    }
    return proba;
  }
  const double p0 = 1.0 / k, h = 2.0 * p0 * (1.0 - p0);
  std::vector<double> f(static_cast<size_t>(k));
  for (index_t i = 0; i < m; ++i) {
    double sum = 0;
    for (int c = 0; c < k; ++c) {
      const double v =
          margin[static_cast<size_t>(i) * static_cast<size_t>(k) + static_cast<size_t>(c)];
      // A class absent from the training data has fraction 0 in every leaf.
      f[static_cast<size_t>(c)] =
          present_[static_cast<size_t>(c)] ? fraction(p0 + h * (v - 0.5)) : 0.0;
      sum += f[static_cast<size_t>(c)];
    }
    // The fractions come from different trees per class, so they are normalised; should every
    // one be 0, the present classes share the probability equally.
    if (!(sum > 0))
      for (int c = 0; c < k; ++c) {
        f[static_cast<size_t>(c)] = present_[static_cast<size_t>(c)] ? 1.0 : 0.0;
        sum += f[static_cast<size_t>(c)];
      }
    for (int c = 0; c < k; ++c) proba(i, c) = f[static_cast<size_t>(c)] / sum;
  }
  return proba;
}

std::vector<double> Forest::predict_impl(const Matrix<double>& X) const {
  const index_t m = X.rows();
  std::vector<double> out(static_cast<size_t>(m));
  if (num_classes_ == 0) {
    const std::vector<float> margin = margins(X, "predict");
    for (index_t i = 0; i < m; ++i) out[static_cast<size_t>(i)] = margin[static_cast<size_t>(i)];
    return out;
  }
  // The most probable class, the lowest index on ties (sklearn's argmax).
  const Matrix<double> p = probabilities(X, "predict");
  for (index_t i = 0; i < m; ++i) {
    index_t arg = 0;
    for (index_t c = 1; c < p.cols(); ++c)
      if (p(i, c) > p(i, arg)) arg = c;
    out[static_cast<size_t>(i)] = static_cast<double>(arg);
  }
  return out;
}

// ---- saving: the booster in XGBoost's own JSON model, which keeps every float (shortest
// round-trip digits), and which load_model checks before XGBoost reads it (forest_model.cpp).

void Forest::save_state(detail::ModelState& s) const {
  s.options["threads"] = opt_.threads;
  if (num_classes_ > 0) {
    std::vector<double> present(present_.begin(), present_.end());
    s.add("present_classes", detail::as_row(present));
  }
  std::string text;
  {
    std::lock_guard<std::mutex> lock(predict_mutex_);  // the buffer is the booster's
    bst_ulong len = 0;
    const char* buf = nullptr;
    check(XGBoosterSaveModelToBuffer(booster_.get(), "{\"format\": \"json\"}", &len, &buf),
          "XGBoosterSaveModelToBuffer");
    text.assign(buf, buf + len);
  }
  try {  // what load_model would refuse is not saved
    detail::checked_xgboost_model(text, num_features_, num_classes_, objective(num_classes_));
  } catch (const std::invalid_argument& e) {
    throw InvalidInput(std::string("forest.save: XGBoost's model of this forest ") + e.what());
  }
  s.native.push_back({"booster", "xgboost-json", std::move(text)});
}

void Forest::restore(detail::ModelReader& in) {
  const int classes = in.num_classes();
  const std::string& text = in.native("booster", "xgboost-json");
  present_.clear();
  if (classes > 0) {
    const Matrix<double>& p = in.f64("present_classes");
    if (p.rows() != 1 || p.cols() != classes)
      in.fail_parameter("present_classes", "is " + std::to_string(p.rows()) + " x " +
                                               std::to_string(p.cols()) + "; expected 1 x " +
                                               std::to_string(classes));
    for (index_t c = 0; c < classes; ++c) {
      if (p(0, c) != 0 && p(0, c) != 1)
        in.fail_parameter("present_classes", "holds " + num(p(0, c)) + "; expected 0 or 1");
      present_.push_back(p(0, c) == 1);
    }
  }
  std::string checked;
  try {
    checked = detail::checked_xgboost_model(text, in.num_features(), classes, objective(classes));
  } catch (const std::invalid_argument& e) {
    in.fail_parameter("booster", e.what());
  }
  std::lock_guard<std::mutex> lock(xgboost_lock());
  quiet_xgboost();
  BoosterHandle handle = nullptr;
  check(XGBoosterCreate(nullptr, 0, &handle), "XGBoosterCreate");
  BoosterPtr booster(handle);
  if (XGBoosterLoadModelFromBuffer(handle, checked.data(),
                                   static_cast<bst_ulong>(checked.size())) != 0)
    in.fail_parameter("booster", std::string("is refused by XGBoost: ") + XGBGetLastError());
  if (XGBoosterSetParam(handle, "nthread",
                        std::to_string(detail::resolve_threads(opt_.threads)).c_str()) != 0)
    in.fail_parameter("booster", std::string("refuses nthread: ") + XGBGetLastError());
  bst_ulong features = 0;
  if (XGBoosterGetNumFeature(handle, &features) != 0 ||
      static_cast<index_t>(features) != in.num_features())
    in.fail_parameter(
        "booster", "has " + std::to_string(features) +
                       " features; expected num_features = " + std::to_string(in.num_features()));
  booster_ = std::move(booster);
  set_trained(classes, in.num_features());
  info_ = in.fit_info();
}

}  // namespace

namespace detail {
std::unique_ptr<Model> make_forest(const ModelOptions& options) {
  return std::make_unique<Forest>(options);
}

std::unique_ptr<Model> restore_forest(ModelReader& in) {
  const Json& o = in.options({"threads"});
  ModelOptions options;
  options.threads = in.threads(o);
  in.check_options("forest", options);
  auto model = std::make_unique<Forest>(options);
  model->restore(in);
  return model;
}
}  // namespace detail

}  // namespace dcalign::learn
