// The LibTorch models: MLP (scikit-learn MLPClassifier / MLPRegressor semantics) and
// multinomial logistic regression. This is the only translation unit that includes LibTorch,
// because its headers dominate compile time.
//
// Output layer convention (as scikit-learn): K > 2 classes -> K softmax outputs; K = 2 -> one
// logistic output (probability of class 1); regression -> one identity output. For K = 2 this
// matters beyond speed: with an L2 penalty a single logit is not the same model as two.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "dcalign/random.hpp"
#include "learn/internal.hpp"
#include "learn/torch_internal.hpp"

namespace dcalign::learn {

bool cuda_available() { return torch::cuda::is_available(); }

bool torch_built_with_cuda() { return DCALIGN_TORCH_CUDA != 0; }

namespace torch_impl {

torch::Device parse_device(const std::string& name, const std::string& model) {
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    // Which of the two is missing: LibTorch's CUDA, or a usable GPU.
    if (!torch_built_with_cuda())
      throw BackendError(model + ": device \"" + name +
                         "\" requested but dcalign was built against a LibTorch without CUDA "
                         "(Debian's libtorch-dev is CPU-only); rebuild with -DTorch_DIR=<a CUDA "
                         "LibTorch>, e.g. the Torch folder under python3 -c 'import torch; "
                         "print(torch.utils.cmake_prefix_path)', or use device \"cpu\"");
    if (!torch::cuda::is_available())
      throw BackendError(model + ": device \"" + name +
                         "\" requested; LibTorch has CUDA but sees no usable GPU (no NVIDIA "
                         "driver, or no device visible to this process); use device \"cpu\"");
    torch::Device dev(torch::kCPU);
    try {
      dev = torch::Device(name);
    } catch (const c10::Error&) {
      throw InvalidInput(model + ": device \"" + name + "\" is malformed; expected cuda:N");
    }
    const int count = static_cast<int>(torch::cuda::device_count());
    if (dev.has_index() && dev.index() >= count)
      throw BackendError(model + ": device \"" + name + "\" requested but only " +
                         std::to_string(count) + " CUDA device(s) are visible");
    return dev;
  }
  throw InvalidInput(model + ": device \"" + name + "\"; expected \"cpu\", \"cuda\" or \"cuda:N\"");
}

// X (column-major n x d) as a row-major n x d tensor. Column-major n x d is row-major d x n,
// so the copy reads a transposed view of the caller's buffer; copying into a fresh tensor
// (rather than contiguous(), which returns the view itself when n or d is 1) guarantees that
// the result never aliases the caller's memory.
torch::Tensor to_tensor(const Matrix<double>& X, torch::Dtype dtype, torch::Device device) {
  auto view =
      torch::from_blob(const_cast<double*>(X.data()), {X.cols(), X.rows()}, torch::kFloat64);
  return torch::empty({X.rows(), X.cols()}, torch::kFloat64).copy_(view.t()).to(device, dtype);
}

// n x K tensor -> column-major Matrix<double>.
Matrix<double> to_matrix(const torch::Tensor& t) {
  auto host = t.to(torch::kCPU, torch::kFloat64).t().contiguous();  // K x n row-major
  Matrix<double> out(t.size(0), t.size(1));
  std::copy(host.data_ptr<double>(), host.data_ptr<double>() + out.size(), out.data());
  return out;
}

std::vector<double> to_vector(const torch::Tensor& t) {
  auto host = t.to(torch::kCPU, torch::kFloat64).contiguous().reshape({-1});
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

int output_units(int num_classes) { return num_classes > 2 ? num_classes : 1; }

torch::Tensor labels_from_output(const torch::Tensor& out, int num_classes) {
  if (num_classes > 2) return out.argmax(1);
  // sklearn thresholds the class-1 probability with p > 0.5, i.e. logit > 0.
  return out.reshape({-1}).gt(0).to(torch::kInt64);
}

torch::Tensor proba_from_output(const torch::Tensor& out, int num_classes) {
  if (num_classes > 2) return torch::softmax(out, 1);
  auto p = torch::sigmoid(out.reshape({-1, 1}));
  return torch::cat({1 - p, p}, 1);
}

}  // namespace torch_impl

namespace {

using namespace torch_impl;

// Targets in the form the loss wants: class indices (int64, n) for K > 2, a float column
// (n x 1) of 0/1 for K = 2 and of values for regression.
torch::Tensor target_tensor(const std::vector<double>& y, int num_classes, torch::Dtype dtype,
                            torch::Device device) {
  auto host = torch::from_blob(const_cast<double*>(y.data()), {static_cast<int64_t>(y.size())},
                               torch::kFloat64)
                  .clone();
  if (num_classes > 2) return host.to(device, torch::kInt64);
  return host.reshape({-1, 1}).to(device, dtype);
}

// Mean data loss of a batch: cross-entropy (softmax or logistic) or half the squared error,
// the loss functions of sklearn's MLP (log_loss, binary_log_loss, squared_loss).
torch::Tensor data_loss(const torch::Tensor& out, const torch::Tensor& target, int num_classes) {
  if (num_classes > 2) return torch::nn::functional::cross_entropy(out, target);
  if (num_classes == 2) return torch::nn::functional::binary_cross_entropy_with_logits(out, target);
  return 0.5 * torch::nn::functional::mse_loss(out, target);
}

// sklearn's (and Keras') Adam: its update differs from torch::optim::Adam in where epsilon
// enters,
//   p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps),
// so it is written out here rather than borrowed.
struct Adam {
  std::vector<torch::Tensor> mom, vel;
  int64_t step = 0;

  explicit Adam(const std::vector<torch::Tensor>& params) {
    for (const auto& p : params) {
      mom.push_back(torch::zeros_like(p).detach());
      vel.push_back(torch::zeros_like(p).detach());
    }
  }
};

// Fisher-Yates with the model's own generator, so that shuffles do not depend on the device.
void shuffle(std::vector<int64_t>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// One pass over (Xt, yt) in mini-batches of `batch` rows, in the order of `perm` after
// shuffling it with rng; returns the mean training loss (penalty included) over the pass.
double train_epoch(const Layers& layers, std::vector<torch::Tensor>& params, Adam& adam,
                   const MlpOptions& m, const torch::Tensor& Xt, const torch::Tensor& yt,
                   int num_classes, index_t batch, std::vector<int64_t>& perm, Rng& rng,
                   torch::Device device) {
  const index_t n_train = static_cast<index_t>(perm.size());
  shuffle(perm, rng);
  auto perm_t = torch::from_blob(perm.data(), {n_train}, torch::kInt64).to(device);
  // Accumulated on the device so that a GPU run does not synchronise once per batch.
  auto loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  for (index_t start = 0; start < n_train; start += batch) {
    const index_t nb = std::min(batch, n_train - start);
    auto idx = perm_t.slice(0, start, start + nb);
    auto out = layers.forward(Xt.index_select(0, idx));
    auto loss = data_loss(out, yt.index_select(0, idx), num_classes);
    // sklearn's penalty: alpha/2 * sum of squared weights (not intercepts) / batch size.
    if (m.alpha > 0) {
      torch::Tensor sq = torch::zeros({}, out.options());
      for (const auto& w : layers.W) sq = sq + w.pow(2).sum();
      loss = loss + (0.5 * m.alpha / static_cast<double>(nb)) * sq;
    }
    auto grads = torch::autograd::grad({loss}, params);
    ++adam.step;
    const double lr_t = m.learning_rate *
                        std::sqrt(1.0 - std::pow(m.beta2, static_cast<double>(adam.step))) /
                        (1.0 - std::pow(m.beta1, static_cast<double>(adam.step)));
    {
      torch::NoGradGuard no_grad;
      for (size_t k = 0; k < params.size(); ++k) {
        adam.mom[k].mul_(m.beta1).add_(grads[k], 1.0 - m.beta1);
        adam.vel[k].mul_(m.beta2).addcmul_(grads[k], grads[k], 1.0 - m.beta2);
        params[k].addcdiv_(adam.mom[k], adam.vel[k].sqrt().add_(m.epsilon), -lr_t);
      }
      loss_sum += loss.detach().to(torch::kFloat64) * static_cast<double>(nb);
    }
  }
  return loss_sum.item<double>() / static_cast<double>(n_train);
}

// ---------------------------------------------------------------------------------------------

class Mlp final : public TorchModel {
 public:
  explicit Mlp(const ModelOptions& o) : TorchModel(o, "mlp") {
    dtype_ = o.mlp.float64 ? torch::kFloat64 : torch::kFloat32;
  }
  std::string name() const override { return "mlp"; }

  /// FedAvg's central model: runs the whole protocol in place of fit().
  void fit_federated(const std::vector<Matrix<double>>& X,
                     const std::vector<std::vector<double>>& y, int num_classes,
                     const FedAvgOptions& fo, const FedAvgCallback& after_round);

 protected:
  void fit_impl(const Matrix<double>& X, const std::vector<double>& y) override;

 private:
  void init_layers(index_t d, Rng& rng);
  double validation_score(const torch::Tensor& Xv, const std::vector<double>& yv) const;
};

// sklearn's _init_coef: for each layer, W then b drawn from U(-r, r) with
// r = sqrt(6 / (fan_in + fan_out)) (Glorot uniform for ReLU networks; biases too).
void Mlp::init_layers(index_t d, Rng& rng) {
  std::vector<int64_t> sizes{d};
  for (int h : opt_.mlp.hidden_layers) sizes.push_back(h);
  sizes.push_back(output_units(num_classes_));
  layers_ = Layers();
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const int64_t fan_in = sizes[l], fan_out = sizes[l + 1];
    const double r = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    std::vector<double> w(static_cast<size_t>(fan_in * fan_out)), b(static_cast<size_t>(fan_out));
    for (auto& v : w) v = (2.0 * rng.uniform() - 1.0) * r;
    for (auto& v : b) v = (2.0 * rng.uniform() - 1.0) * r;
    auto make = [&](std::vector<double>& v, c10::IntArrayRef shape) {
      return torch::from_blob(v.data(), shape, torch::kFloat64)
          .to(device_, dtype_)
          .clone()
          .requires_grad_(true);
    };
    layers_.W.push_back(make(w, {fan_in, fan_out}));
    layers_.b.push_back(make(b, {fan_out}));
  }
}

// Accuracy for classification, R^2 for regression (sklearn's score(); with constant targets
// R^2 is 1 for a perfect fit and 0 otherwise, as r2_score's force_finite).
double Mlp::validation_score(const torch::Tensor& Xv, const std::vector<double>& yv) const {
  torch::NoGradGuard no_grad;
  auto out = layers_.forward(Xv);
  if (num_classes_ > 0) {
    const auto pred = to_vector(labels_from_output(out, num_classes_));
    return accuracy(yv, pred);
  }
  const auto pred = to_vector(out);
  double mean = 0.0;
  for (double v : yv) mean += v;
  mean /= static_cast<double>(yv.size());
  double ss_res = 0.0, ss_tot = 0.0;
  for (size_t i = 0; i < yv.size(); ++i) {
    ss_res += (yv[i] - pred[i]) * (yv[i] - pred[i]);
    ss_tot += (yv[i] - mean) * (yv[i] - mean);
  }
  if (ss_tot == 0.0) return ss_res == 0.0 ? 1.0 : 0.0;
  return 1.0 - ss_res / ss_tot;
}

void Mlp::fit_impl(const Matrix<double>& X, const std::vector<double>& y) {
  const MlpOptions& m = opt_.mlp;
  use_threads();
  // Nothing below draws from LibTorch's generator (initialisation and shuffling use Rng, so
  // they do not depend on the device), but seeding it keeps any future use reproducible.
  torch::manual_seed(opt_.seed);
  Rng rng(opt_.seed);
  const index_t n = X.rows(), d = X.cols();
  init_layers(d, rng);

  // Validation split (sklearn: train_test_split, test_size = ceil(fraction * n)); a random,
  // not stratified, subset.
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  index_t n_val = 0;
  if (m.early_stopping) {
    n_val = static_cast<index_t>(std::ceil(m.validation_fraction * static_cast<double>(n)));
    if (n - n_val < 1)
      throw InvalidInput("mlp.fit: " + std::to_string(n) +
                         " samples leave none for training "
                         "after the early-stopping validation split; expected more samples");
    shuffle(order, rng);
  }
  const index_t n_train = n - n_val;
  auto rows_of = [&](index_t begin, index_t count) {
    auto idx = torch::from_blob(order.data() + begin, {count}, torch::kInt64).clone();
    return idx;
  };
  auto X_all = to_tensor(X, dtype_, device_);
  auto y_all = target_tensor(y, num_classes_, dtype_, device_);
  auto train_idx = rows_of(0, n_train).to(device_);
  auto Xt = X_all.index_select(0, train_idx);
  auto yt = y_all.index_select(0, train_idx);
  torch::Tensor Xv;
  std::vector<double> yv;
  if (n_val > 0) {
    Xv = X_all.index_select(0, rows_of(n_train, n_val).to(device_));
    for (index_t i = n_train; i < n; ++i) yv.push_back(y[static_cast<size_t>(order[i])]);
  }
  X_all = torch::Tensor();
  y_all = torch::Tensor();

  auto params = layers_.all();
  Adam adam(params);
  const index_t batch = std::min<index_t>(std::max(m.batch_size, 1), n_train);
  std::vector<int64_t> perm(static_cast<size_t>(n_train));
  for (index_t i = 0; i < n_train; ++i) perm[static_cast<size_t>(i)] = i;

  double best_score = -std::numeric_limits<double>::infinity();
  double best_loss = std::numeric_limits<double>::infinity();
  Layers best;
  int no_improvement = 0;
  for (int epoch = 0; epoch < m.max_epochs; ++epoch) {
    const double epoch_loss =
        train_epoch(layers_, params, adam, m, Xt, yt, num_classes_, batch, perm, rng, device_);
    info_.loss_curve.push_back(epoch_loss);
    info_.iterations = epoch + 1;
    // sklearn's _update_no_improvement_count: a gain below tol counts as no improvement, but
    // any gain still updates the best score (and, with early stopping, the kept weights).
    if (m.early_stopping) {
      const double score = validation_score(Xv, yv);
      info_.validation_scores.push_back(score);
      if (score < best_score + m.tol)
        ++no_improvement;
      else
        no_improvement = 0;
      if (score > best_score) {
        best_score = score;
        best = layers_.clone();
      }
    } else {
      if (epoch_loss > best_loss - m.tol)
        ++no_improvement;
      else
        no_improvement = 0;
      if (epoch_loss < best_loss) best_loss = epoch_loss;
    }
    if (!std::isfinite(epoch_loss))
      throw NumericalError("mlp.fit: training loss became " + std::to_string(epoch_loss) +
                           " in epoch " + std::to_string(epoch + 1) +
                           "; the learning rate may be too large for unscaled inputs");
    if (no_improvement > m.n_iter_no_change) break;
  }
  if (m.early_stopping) {
    info_.best_validation_score = best_score;
    layers_ = std::move(best);
  }
  // Prediction needs no autograd bookkeeping on the kept weights.
  for (auto& w : layers_.W) w = w.detach();
  for (auto& b : layers_.b) b = b.detach();
}

// Bytes of a parameter set as it would travel: element count x element size of each tensor.
double tensor_bytes(const std::vector<torch::Tensor>& params) {
  double bytes = 0;
  for (const auto& p : params)
    bytes += static_cast<double>(p.numel()) * static_cast<double>(p.element_size());
  return bytes;
}

void Mlp::fit_federated(const std::vector<Matrix<double>>& X,
                        const std::vector<std::vector<double>>& y, int num_classes,
                        const FedAvgOptions& fo, const FedAvgCallback& after_round) {
  const MlpOptions& m = opt_.mlp;
  use_threads();
  torch::manual_seed(opt_.seed);
  Rng rng(opt_.seed);  // the initial weights, then every client's shuffles (see learn.hpp)
  const index_t d = X.front().cols();
  info_ = FitInfo();
  set_trained(num_classes, d);  // init_layers reads num_classes_; the model predicts every round
  init_layers(d, rng);
  const size_t c = X.size();
  std::vector<torch::Tensor> Xc, yc;
  for (size_t k = 0; k < c; ++k) {
    Xc.push_back(to_tensor(X[k], dtype_, device_));
    yc.push_back(target_tensor(y[k], num_classes_, dtype_, device_));
  }
  const size_t per_round = std::clamp<size_t>(
      static_cast<size_t>(std::llround(fo.participation * static_cast<double>(c))), 1, c);
  Rng pick = Rng::stream(opt_.seed, 0xFEDA);  // participants only: the shuffles stay as above
  std::vector<index_t> everyone(c);
  for (size_t k = 0; k < c; ++k) everyone[k] = static_cast<index_t>(k);
  for (int r = 1; r <= fo.rounds; ++r) {
    FedAvgRound round;
    round.round = r;
    if (per_round == c) {
      round.participants = everyone;
    } else {  // the first per_round entries of a partial Fisher-Yates shuffle
      std::vector<index_t> pool = everyone;
      for (size_t i = 0; i < per_round; ++i) std::swap(pool[i], pool[i + pick.below(c - i)]);
      round.participants.assign(pool.begin(),
                                pool.begin() + static_cast<std::ptrdiff_t>(per_round));
      std::sort(round.participants.begin(), round.participants.end());
    }
    double total = 0;
    for (index_t k : round.participants) total += static_cast<double>(X[k].rows());
    const auto central = layers_.all();
    std::vector<torch::Tensor> sum;
    for (const auto& p : central) sum.push_back(torch::zeros_like(p, torch::kFloat64));
    for (index_t k : round.participants) {
      Layers local = layers_.clone();  // the copy sent to client k
      for (auto* part : {&local.W, &local.b})
        for (auto& t : *part) t.requires_grad_(true);
      auto params = local.all();
      round.downlink_bytes += tensor_bytes(params);
      Adam adam(params);  // fresh at every client and round: clients keep no state
      const index_t n_k = X[k].rows();
      const index_t batch = std::min<index_t>(std::max(fo.batch_size, 1), n_k);
      std::vector<int64_t> perm(static_cast<size_t>(n_k));
      for (index_t i = 0; i < n_k; ++i) perm[static_cast<size_t>(i)] = i;
      double loss = 0;
      for (int e = 0; e < fo.local_epochs; ++e) {
        loss = train_epoch(local, params, adam, m, Xc[k], yc[k], num_classes_, batch, perm, rng,
                           device_);
        if (!std::isfinite(loss))
          throw NumericalError("fedavg: client " + std::to_string(k) + "'s training loss became " +
                               std::to_string(loss) + " in round " + std::to_string(r) +
                               ", local epoch " + std::to_string(e + 1) +
                               "; the learning rate may be too large for unscaled inputs");
      }
      round.uplink_bytes += tensor_bytes(params);  // what client k returns
      const double weight = static_cast<double>(n_k) / total;
      round.train_loss += weight * loss;
      torch::NoGradGuard no_grad;
      for (size_t j = 0; j < params.size(); ++j)
        sum[j].add_(params[j].detach().to(torch::kFloat64), weight);
      if (fo.record_client_parameters) round.client_parameters.push_back(local.flat());
    }
    const size_t layers = layers_.W.size();
    for (size_t l = 0; l < layers; ++l) {
      layers_.W[l] = sum[l].to(dtype_);
      layers_.b[l] = sum[layers + l].to(dtype_);
    }
    info_.loss_curve.push_back(round.train_loss);
    info_.iterations = r;
    if (after_round) after_round(round, *this);
  }
}

// ---------------------------------------------------------------------------------------------

// Multinomial logistic regression, full-batch L-BFGS in double precision from zero weights;
// deterministic without any random draw (the seed is not used).
class LogReg final : public TorchModel {
 public:
  explicit LogReg(const ModelOptions& o) : TorchModel(o, "logreg") { dtype_ = torch::kFloat64; }
  std::string name() const override { return "logreg"; }

 protected:
  bool supports_regression() const override { return false; }
  void fit_impl(const Matrix<double>& X, const std::vector<double>& y) override;
};

void LogReg::fit_impl(const Matrix<double>& X, const std::vector<double>& y) {
  const LogRegOptions& o = opt_.logreg;
  use_threads();
  const index_t n = X.rows(), d = X.cols();
  const int64_t k = output_units(num_classes_);
  auto opts = torch::TensorOptions().dtype(dtype_).device(device_);
  layers_ = Layers();
  layers_.W.push_back(torch::zeros({d, k}, opts).requires_grad_(true));
  layers_.b.push_back(torch::zeros({k}, opts).requires_grad_(true));
  auto Xt = to_tensor(X, dtype_, device_);
  auto yt = target_tensor(y, num_classes_, dtype_, device_);

  // sklearn's objective C * sum(loss) + ||W||^2 / 2, divided by C n so that the gradient
  // tolerance does not scale with n (recent scikit-learn versions scale it the same way).
  const double penalty = 1.0 / (2.0 * o.C * static_cast<double>(n));
  torch::optim::LBFGS opt(layers_.all(), torch::optim::LBFGSOptions(1.0)
                                             .max_iter(o.max_iter)
                                             .max_eval(o.max_iter * 20)
                                             .tolerance_grad(o.tol)
                                             .tolerance_change(1e-14)
                                             .history_size(10)
                                             .line_search_fn("strong_wolfe"));
  auto closure = [&]() {
    opt.zero_grad();
    auto loss =
        data_loss(layers_.forward(Xt), yt, num_classes_) + penalty * layers_.W[0].pow(2).sum();
    loss.backward();
    return loss;
  };
  opt.step(closure);
  for (const auto& entry : opt.state())
    info_.iterations =
        static_cast<int>(static_cast<const torch::optim::LBFGSParamState&>(*entry.second).n_iter());
  auto loss = closure();
  info_.loss_curve.push_back(loss.item<double>());
  for (auto& w : layers_.W) w = w.detach();
  for (auto& b : layers_.b) b = b.detach();
}

}  // namespace

namespace detail {

std::unique_ptr<Model> make_mlp(const ModelOptions& options) {
  return std::make_unique<Mlp>(options);
}
std::unique_ptr<Model> make_logreg(const ModelOptions& options) {
  return std::make_unique<LogReg>(options);
}

}  // namespace detail

std::unique_ptr<Model> fit_fedavg(const std::vector<Matrix<double>>& X,
                                  const std::vector<std::vector<double>>& y, int num_classes,
                                  const ModelOptions& model_options, const FedAvgOptions& options,
                                  const FedAvgCallback& after_round) {
  detail::validate_options("mlp", model_options);
  validate(options);
  if (X.empty()) throw InvalidInput("fedavg: no clients; expected at least one");
  if (y.size() != X.size())
    throw InvalidInput("fedavg: " + std::to_string(X.size()) + " clients' features but " +
                       std::to_string(y.size()) +
                       " clients' labels; expected one label vector "
                       "per client");
  if (num_classes < 0 || num_classes == 1)
    throw InvalidInput("fedavg: num_classes = " + std::to_string(num_classes) +
                       "; expected 0 (regression) or at least 2 classes");
  for (size_t k = 0; k < X.size(); ++k) {
    detail::check_training_data(X[k], y[k], num_classes, "fedavg, client " + std::to_string(k));
    if (X[k].cols() != X.front().cols())
      throw InvalidInput("fedavg: client " + std::to_string(k) + " has " +
                         std::to_string(X[k].cols()) + " features; expected " +
                         std::to_string(X.front().cols()) + " as client 0");
  }
  auto model = std::make_unique<Mlp>(model_options);
  if (!model_options.standardize_target || num_classes != 0) {
    model->fit_federated(X, y, num_classes, options, after_round);
    return model;
  }
  // Standardised targets (ModelOptions::standardize_target): the clients train on y scaled by
  // the moments of all their targets; the callback and the result predict in y's units.
  double mean = 0, sd = 1;
  detail::target_moments(y, mean, sd);
  std::vector<std::vector<double>> scaled(y);
  for (auto& v : scaled)
    for (double& t : v) t = (t - mean) / sd;
  const int d = static_cast<int>(X.front().cols());
  const Mlp* central = model.get();
  model->fit_federated(X, scaled, 0, options, [&](const FedAvgRound& round, const Model&) {
    if (after_round) after_round(round, *detail::scaled_view(*central, d, mean, sd));
  });
  return detail::scale_targets(std::move(model), d, mean, sd);
}

}  // namespace dcalign::learn
