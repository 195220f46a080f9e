#pragma once
// Learning layer: the downstream models and metrics of the end-to-end experiments (paper 001,
// section 7: RBF SVM and a one-hidden-layer MLP on the aligned representations, accuracy,
// ROC-AUC, PR-AUC and RMSE reported as mean +- 95% confidence half-width).
//
// Conventions shared by every model:
//  * X is n x d with one sample per row (dcalign::Matrix<double>, column-major storage).
//  * y holds one target per sample. For classification (num_classes = K >= 2) the targets are
//    class indices 0..K-1 stored as doubles; num_classes = 0 means regression (real targets).
//  * predict() returns class indices (as doubles) or regression values; predict_proba() returns
//    an n x K matrix whose rows sum to one (classification only).
//  * Every model is deterministic given ModelOptions::seed (and, for the LibTorch models, the
//    thread count): the same seed gives identical predictions.
//
// LibTorch, LIBSVM and XGBoost stay behind this header: including it needs none of them.
//
// Saved models (Model::save, load_model). A trained model is a directory:
//  * model.json: {"format": "dcalign-model", "format_version": 1, "dcalign_version", "kind" (a
//    make_model name), "num_classes", "num_features", "target_scaling" (null, or {"mean", "sd"}
//    of ModelOptions::standardize_target in regression), "options" (exactly the options that
//    prediction reads, per kind: mlp {device, threads, hidden_layers, float64}, logreg {device,
//    threads}, svm {threads, gamma (the kernel's, resolved), probability}, knn {threads, k},
//    forest {threads}, linear {}), "fit_info" (the FitInfo fields; null for NaN),
//    "parameters" (a list of {"name", "file", "dtype", "shape"}) and "native_files" (a list of
//    {"name", "file", "format", "bytes", "fnv1a64"})}.
//  * one NumPy file <name>.npy per parameter, 2-D, in the model's own precision (a vector is one
//    row), so that nothing is rounded: mlp and logreg W<l> (fan_in x fan_out) and b<l> (1 x
//    fan_out); svm support_vectors (dense, one per row), sv_coef, rho, labels and n_sv
//    (classification), prob_a and prob_b (with probability estimates), LIBSVM's model arrays;
//    knn train and targets; linear weights (d x 1) and intercept; forest present_classes.
//  * files in a library's own format, listed in native_files with their size and FNV-1a
//    checksum: forest's booster.json, XGBoost's JSON model, whose tree shapes, child and feature
//    indices and objective load_model checks before XGBoost reads it (XGBoost's readers trust
//    their input). LIBSVM's text format is not used: it prints support vectors with 8
//    significant digits.
// Saving is atomic: the directory is written under a temporary name beside the destination,
// flushed to disk and renamed into place; an existing destination is replaced only when it is
// a dcalign-model directory itself (model.json and the files it lists, nothing else). Loading is
// strict: a missing, truncated or corrupt file, a key missing or unknown, another
// format_version, a shape or dtype that disagrees with model.json, parameters that disagree
// with each other, or a NaN or infinity in a parameter is an IoError naming the file and the key
// or parameter. A loaded model predicts exactly (bit for bit) as the saved one, on the same
// device and thread count (saved in "options"); it can be refitted, with make_model's defaults
// for the options that were not saved.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "dcalign/matrix.hpp"

namespace dcalign::learn {

namespace detail {
struct ModelState;
struct ModelIo;
}  // namespace detail

/// Multi-layer perceptron, with scikit-learn's MLPClassifier / MLPRegressor semantics
/// (solver="adam") and the paper's settings as defaults.
struct MlpOptions {
  std::vector<int> hidden_layers = {256};  ///< ReLU units per hidden layer.
  double learning_rate = 1e-3;             ///< Adam step size (learning_rate_init).
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  double alpha = 1e-4;         ///< L2 penalty: loss += alpha/2 * sum ||W||^2 / batch size.
  int batch_size = 32;         ///< Clipped to the number of training samples.
  int max_epochs = 1000;       ///< max_iter: passes over the training set.
  bool early_stopping = true;  ///< Hold out validation_fraction, stop on its score.
  double validation_fraction = 0.1;
  int n_iter_no_change = 10;  ///< Stop after more than this many epochs without gain.
  double tol = 1e-4;          ///< Minimum gain of the monitored score.
  bool float64 = false;       ///< Train in double (as sklearn does) instead of float.
};

/// Multinomial logistic regression (L2, full-batch L-BFGS with strong-Wolfe line search),
/// scikit-learn's LogisticRegression(C=1, lbfgs) objective:
///   mean cross-entropy + ||W||^2 / (2 C n),   intercepts not penalised.
struct LogRegOptions {
  double C = 1.0;
  int max_iter = 100;  ///< L-BFGS iterations.
  double tol = 1e-4;   ///< Stop when the largest gradient entry is below this.
};

/// LIBSVM support vector machine with an RBF kernel (C-SVC, or epsilon-SVR for regression).
struct SvmOptions {
  double C = 1.0;
  double gamma = 0.0;       ///< <= 0 means "scale": 1 / (d * Var(X)) over all entries of X.
  double epsilon = 0.1;     ///< epsilon-SVR tube width (regression only).
  double tol = 1e-3;        ///< LIBSVM stopping tolerance (-e).
  double cache_mb = 200.0;  ///< Kernel cache size.
  bool shrinking = true;
  /// Fit LIBSVM's probability model (-b 1: internal 5-fold CV, several times slower). Needed
  /// for predict_proba(); off by default as in scikit-learn's SVC(probability=False).
  bool probability = false;
};

/// k-nearest neighbours, Euclidean distance.
struct KnnOptions {
  int k = 5;
};

/// Random forest: XGBoost's random-forest mode (one round of n_estimators parallel trees,
/// eta = 1, lambda = 0, min_child_weight = 0) set up as scikit-learn's RandomForestClassifier /
/// RandomForestRegressor defaults. predict_proba() is the mean over trees of the leaves' class
/// fractions, as in sklearn. Differences from sklearn (listed in src/learn/forest.cpp): rows
/// are sampled without replacement instead of bootstrapped, multi-class forests grow one tree
/// per class on one-vs-rest splits instead of one tree on the multi-class Gini, and features
/// and thresholds are single precision.
struct ForestOptions {
  int n_estimators = 100;  ///< Trees (per class for K > 2).
  int max_depth = 0;       ///< 0: unlimited, nodes split until pure (sklearn's None).
  /// Fraction of the rows drawn without replacement for each tree, in (0, 1]. 0.632 matches
  /// the expected number of distinct rows of sklearn's bootstrap sample; 1 is bootstrap=False.
  double subsample = 0.632;
  /// Fraction of the features drawn for each split, in (0, 1]; <= 0 is sklearn's default:
  /// floor(sqrt(d)) features for classification ("sqrt"), all d for regression (1.0).
  double max_features = 0.0;
  /// "exact": thresholds half way between distinct values, as sklearn; "hist": 256 quantile
  /// bins per feature, faster on large data.
  std::string tree_method = "exact";
};

struct ModelOptions {
  std::uint64_t seed = 0;
  /// "cpu", "cuda" or "cuda:N". Applies to the LibTorch models (mlp, logreg); asking for CUDA
  /// where LibTorch has none throws BackendError. knn, svm and forest always run on the CPU.
  std::string device = "cpu";
  /// CPU threads (LibTorch intra-op threads, OpenMP for knn/svm prediction, XGBoost's nthread
  /// for forest); 0 = all cores.
  /// LibTorch's setting is process-wide. Mini-batch MLP training (batch 32) gains little from
  /// threads, and on a machine whose cores are busy elsewhere spinning threads can make it
  /// many times slower than threads = 1. Same seed gives identical results for a fixed count.
  int threads = 0;
  /// Regression: every model (and FedAvg) trains on the standardised targets (y - mean) / sd of
  /// the targets it is given (FedAvg: of all clients' together; sd 0 counts as 1) and predicts
  /// back in their units, as scikit-learn's TransformedTargetRegressor with a StandardScaler.
  /// No effect on classification. Off by default (sklearn's regressors do not scale y), but a
  /// target far from unit scale slows Adam's MLP and FedAvg's few steps by orders of magnitude.
  bool standardize_target = false;
  MlpOptions mlp;
  LogRegOptions logreg;
  SvmOptions svm;
  KnnOptions knn;
  ForestOptions forest;
};

/// What a fit did; fields that do not apply to a model keep their defaults.
struct FitInfo {
  int iterations = 0;                     ///< MLP: epochs run; logreg: L-BFGS iterations.
  std::vector<double> loss_curve;         ///< MLP: mean training loss (with penalty) per epoch.
  std::vector<double> validation_scores;  ///< MLP early stopping: accuracy or R^2 per epoch.
  double best_validation_score = std::numeric_limits<double>::quiet_NaN();
  double gamma = std::numeric_limits<double>::quiet_NaN();  ///< SVM: RBF gamma used.
  int support_vectors = 0;                                  ///< SVM: total support vectors.
};

/// A supervised model. The public calls validate their arguments (shapes, finiteness, labels,
/// fitted state) and throw dcalign::InvalidInput; the model-specific work is in the *_impl hooks.
class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// Trains on X (n x d) and y (n). num_classes = 0: regression; >= 2: classification.
  /// Refitting discards the previous fit.
  void fit(const Matrix<double>& X, const std::vector<double>& y, int num_classes);
  /// Class indices or regression values, one per row of X.
  std::vector<double> predict(const Matrix<double>& X) const;
  /// n x K class probabilities (classification only).
  Matrix<double> predict_proba(const Matrix<double>& X) const;

  virtual std::string name() const = 0;
  /// Whether fit() takes this task: regression (num_classes = 0) or classification (>= 2).
  bool can_fit(int num_classes) const {
    return num_classes == 0 ? supports_regression() : supports_classification();
  }
  bool fitted() const { return fitted_; }
  int num_classes() const { return num_classes_; }
  index_t num_features() const { return num_features_; }
  const FitInfo& info() const { return info_; }
  /// Trained parameters flattened in a fixed order (MLP and logreg weights and intercepts);
  /// empty for the non-parametric models. For reproducibility checks.
  virtual std::vector<double> parameters() const { return {}; }
  /// Saves the fitted model as the directory `dir` (format at the top of this header).
  /// Throws InvalidInput before fit, IoError when `dir` cannot be written or is something other
  /// than a saved model (nothing at `dir` is changed then).
  void save(const std::string& dir) const;

 protected:
  Model() = default;
  virtual bool supports_regression() const { return true; }
  virtual bool supports_classification() const { return true; }
  virtual void fit_impl(const Matrix<double>& X, const std::vector<double>& y) = 0;
  virtual std::vector<double> predict_impl(const Matrix<double>& X) const = 0;
  virtual Matrix<double> predict_proba_impl(const Matrix<double>& X) const = 0;
  /// For a model assembled from trained parameters instead of by fit() (FedAvg's central model,
  /// a loaded one): sets what fit() sets and marks the model fitted.
  void set_trained(int num_classes, index_t num_features);
  /// The model's part of its saved directory: the options prediction reads and the trained
  /// parameters (src/learn/model_io.hpp). The default refuses (InvalidInput).
  virtual void save_state(detail::ModelState& state) const;
  // Set by fit() before fit_impl() runs, so the hooks can read them.
  int num_classes_ = 0;
  index_t num_features_ = 0;
  FitInfo info_;

 private:
  void check_predict_input(const Matrix<double>& X, const char* call) const;
  bool fitted_ = false;
  friend struct detail::ModelIo;
};

/// "mlp", "logreg", "svm", "knn", "forest" or "linear" (ordinary least squares with an
/// intercept, regression only). Throws InvalidInput for an unknown name or invalid options,
/// BackendError for an unavailable device.
std::unique_ptr<Model> make_model(const std::string& kind, const ModelOptions& options = {});
/// The kinds make_model knows ("mlp", "logreg", "svm", "knn", "forest", "linear"), in that
/// order.
/// What a saved model of `kind` keeps of its training data beyond fitted parameters, in words
/// ("every training row" for knn, the support vectors of svm, the forest's split thresholds), or
/// "" for a kind whose saved state holds only parameters fitted over all rows (mlp, logreg,
/// linear). Whoever receives a model of the first kind receives (approximations of) training
/// rows: the analyst service never hands such a model to participants. Throws InvalidInput for
/// an unknown kind.
std::string model_training_data(const std::string& kind);
std::vector<std::string> model_names();

/// The format_version that Model::save writes and load_model reads.
constexpr int kSaveFormatVersion = 1;

/// A model saved by Model::save (format at the top of this header), fitted and ready to
/// predict. Throws IoError naming the file and the key for anything malformed, BackendError
/// when its saved device is not available here.
std::unique_ptr<Model> load_model(const std::string& dir);

// ---------------------------------------------------------------------------------------------
// Federated averaging (FedAvg; McMahan et al. 2017, as paper 002 section 3.3 runs it): the
// central MLP (ModelOptions::mlp's layers, Adam settings and L2 penalty) is initialised from the
// seed exactly as an MLP fit would be and sent to the participating clients; each trains it for
// E local epochs of mini-batches of B on its own rows; the server sets the central weights to
// the n_k-weighted mean of the returned ones; R rounds. Details the papers leave open:
//  * Optimiser: Adam with MlpOptions' step size, betas and epsilon (sklearn's / Keras' update,
//    the one the MLP uses), its moments and step count started afresh at every client in every
//    round: clients keep no state between rounds, which is what FedAvg assumes when a client may
//    not be selected again. Paper 002 (Keras) names no optimiser; Adam is Keras' usual choice
//    and keeps FedAvg and the central/DC MLP on the same optimiser.
//  * Randomness: one stream from ModelOptions::seed draws the initial weights and then every
//    client's epoch shuffles, clients in increasing index within a round; the participants of a
//    round (participation < 1) come from a separate stream. So one round with one client and
//    E epochs gives exactly the weights of an MLP fit of E epochs without early stopping.
//  * Averaging: in double precision over the participants, weights n_k / sum of their n_k,
//    then rounded to the training precision once.
//  * No early stopping (MlpOptions::early_stopping, tol and max_epochs do not apply).
struct FedAvgOptions {
  int rounds = 24;             ///< R >= 1
  int local_epochs = 1;        ///< E >= 1
  int batch_size = 32;         ///< B >= 1, clipped to a client's rows
  double participation = 1.0;  ///< p in (0, 1]: max(1, round(p c)) clients drawn per round
  /// Keep each participant's returned weights in FedAvgRound::client_parameters (for tests and
  /// diagnostics; costs c copies of the model per round).
  bool record_client_parameters = false;
};

/// One round as it happened. Byte counts are those of the parameter tensors actually copied
/// between the central model and the clients (element count x element size).
struct FedAvgRound {
  int round = 0;                      ///< 1-based
  std::vector<index_t> participants;  ///< client indices, increasing
  /// n_k-weighted mean over the participants of their last local epoch's mean training loss.
  double train_loss = 0.0;
  double downlink_bytes = 0.0;  ///< central -> clients, this round
  double uplink_bytes = 0.0;    ///< clients -> central, this round
  /// Flattened as Model::parameters(), one per participant, when record_client_parameters.
  std::vector<std::vector<double>> client_parameters;
};

/// Called after every round with the round and the central model as it now is (fitted: it can
/// predict, e.g. to record training and test curves).
using FedAvgCallback = std::function<void(const FedAvgRound&, const Model& central)>;

/// Throws InvalidInput naming the option that is out of range (R, E, B or p).
void validate(const FedAvgOptions& options);

/// Runs FedAvg over the clients' rows X[k] (n_k x d, the same d for all) and labels y[k] and
/// returns the central model (an "mlp"). Validates everything before training: options, client
/// count, shapes, finite features and labels (naming the client). Regression (num_classes = 0)
/// is supported as for the MLP.
std::unique_ptr<Model> fit_fedavg(const std::vector<Matrix<double>>& X,
                                  const std::vector<std::vector<double>>& y, int num_classes,
                                  const ModelOptions& model_options, const FedAvgOptions& options,
                                  const FedAvgCallback& after_round = {});

/// Whether LibTorch in this build can use a CUDA device.
bool cuda_available();
/// Whether this build links a LibTorch with CUDA (Debian's libtorch-dev has none; a CUDA
/// LibTorch comes through -DTorch_DIR, e.g. from PyTorch's torch.utils.cmake_prefix_path). With
/// it, cuda_available() is false only without a usable GPU.
bool torch_built_with_cuda();

/// scikit-learn's gamma="scale" for X: 1 / (d * Var(X)), the population variance of all n*d
/// entries; 1 when that variance is zero.
double gamma_scale(const Matrix<double>& X);

// ---------------------------------------------------------------------------------------------
// Metrics. Labels are class indices stored as doubles, as predict() returns them. The matrix
// forms have their own names (*_ovr) because a braced list of two or three numbers would
// otherwise also match a Matrix constructor.

/// Fraction of equal entries.
double accuracy(const std::vector<double>& y_true, const std::vector<double>& y_pred);
/// Root mean squared error.
double rmse(const std::vector<double>& y_true, const std::vector<double>& y_pred);

/// Binary ROC-AUC: y_true in {0, 1}, higher score = more likely class 1. Tied scores count 1/2
/// (the Mann-Whitney statistic, equal to sklearn's roc_auc_score). Both classes must occur.
double roc_auc(const std::vector<double>& y_true, const std::vector<double>& score);
/// ROC-AUC from an n x K probability (or score) matrix: K = 2 uses column 1; K > 2 is the
/// unweighted mean of the one-vs-rest AUCs (sklearn's multi_class="ovr", average="macro").
/// Every class must occur in y_true.
double roc_auc_ovr(const std::vector<double>& y_true, const Matrix<double>& proba);

/// Binary average precision, sklearn's average_precision_score:
///   AP = sum_k (R_k - R_{k-1}) P_k  over the distinct score thresholds, highest first.
/// Class 1 must occur in y_true.
double average_precision(const std::vector<double>& y_true, const std::vector<double>& score);
/// Average precision from an n x K matrix: K = 2 uses column 1; K > 2 is the macro mean of the
/// one-vs-rest values.
double average_precision_ovr(const std::vector<double>& y_true, const Matrix<double>& proba);

/// Mean and confidence half-width  t_{(1+level)/2, n-1} * s / sqrt(n)  (s with n-1 divisor).
struct Summary {
  double mean = 0.0;
  double half_width = 0.0;  ///< NaN for a single value.
  index_t count = 0;
};
Summary summarize(const std::vector<double>& values, double level = 0.95);

/// Quantile of Student's t distribution with `dof` > 0 degrees of freedom, 0 < p < 1.
double student_t_quantile(double p, double dof);
/// Its CDF.
double student_t_cdf(double t, double dof);
/// Regularized incomplete beta function I_x(a, b), a, b > 0, 0 <= x <= 1.
double incomplete_beta(double x, double a, double b);

}  // namespace dcalign::learn
