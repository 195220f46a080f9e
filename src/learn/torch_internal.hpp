#pragma once
// What the LibTorch translation units share (torch_models.cpp trains, torch_io.cpp saves and
// restores): the conversions between dcalign matrices and tensors, the layer stack and the base
// class of the MLP and logistic regression. Includes LibTorch: only those two files include it.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "learn/internal.hpp"

namespace dcalign::learn {

namespace detail {
struct ModelState;
class ModelReader;
}  // namespace detail

namespace torch_impl {

/// "cpu", "cuda" or "cuda:N" as a torch device; BackendError when CUDA is asked for and absent.
torch::Device parse_device(const std::string& name, const std::string& model);
/// X (n x d) as a fresh row-major n x d tensor of `dtype` on `device`.
torch::Tensor to_tensor(const Matrix<double>& X, torch::Dtype dtype, torch::Device device);
/// n x K tensor -> column-major Matrix<double>.
Matrix<double> to_matrix(const torch::Tensor& t);
std::vector<double> to_vector(const torch::Tensor& t);
/// Output units: K for K > 2 classes, else one (a logit or a regression value).
int output_units(int num_classes);
torch::Tensor labels_from_output(const torch::Tensor& out, int num_classes);
torch::Tensor proba_from_output(const torch::Tensor& out, int num_classes);

// Weights W_l (fan_in x fan_out) and intercepts b_l of a stack of affine layers.
struct Layers {
  std::vector<torch::Tensor> W, b;

  std::vector<torch::Tensor> all() const {
    std::vector<torch::Tensor> p(W);
    p.insert(p.end(), b.begin(), b.end());
    return p;
  }
  // ReLU between layers, none after the last: the output is logits or regression values.
  torch::Tensor forward(torch::Tensor h) const {
    for (size_t l = 0; l < W.size(); ++l) {
      h = torch::addmm(b[l], h, W[l]);
      if (l + 1 < W.size()) h = torch::relu(h);
    }
    return h;
  }
  Layers clone() const {
    Layers c;
    for (const auto& w : W) c.W.push_back(w.detach().clone());
    for (const auto& v : b) c.b.push_back(v.detach().clone());
    return c;
  }
  std::vector<double> flat() const {
    std::vector<double> out;
    for (size_t l = 0; l < W.size(); ++l) {
      for (const auto* t : {&W[l], &b[l]}) {
        auto v = to_vector(t->detach());
        out.insert(out.end(), v.begin(), v.end());
      }
    }
    return out;
  }
};

// Base for the two LibTorch models: device, threads and prediction from a Layers stack.
class TorchModel : public Model {
 public:
  explicit TorchModel(const ModelOptions& o, const std::string& model)
      : opt_(o), device_(parse_device(o.device, model)) {}

  std::vector<double> parameters() const override { return layers_.flat(); }
  /// A loaded model: the layers from the saved W<l>, b<l> (torch_io.cpp), `hidden` units
  /// between the features and the outputs.
  void restore(detail::ModelReader& in, const std::vector<int>& hidden);

 protected:
  void use_threads() const { torch::set_num_threads(detail::resolve_threads(opt_.threads)); }

  torch::Tensor output(const Matrix<double>& X) const {
    use_threads();
    torch::NoGradGuard no_grad;
    return layers_.forward(to_tensor(X, dtype_, device_));
  }
  std::vector<double> predict_impl(const Matrix<double>& X) const override {
    auto out = output(X);
    if (num_classes_ == 0) return to_vector(out);
    return to_vector(labels_from_output(out, num_classes_));
  }
  Matrix<double> predict_proba_impl(const Matrix<double>& X) const override {
    return to_matrix(proba_from_output(output(X), num_classes_));
  }
  void save_state(detail::ModelState& s) const override;  // torch_io.cpp

  ModelOptions opt_;
  torch::Device device_;
  torch::Dtype dtype_ = torch::kFloat32;
  Layers layers_;
};

}  // namespace torch_impl
}  // namespace dcalign::learn
