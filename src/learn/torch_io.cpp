// Saving and restoring the LibTorch models (include/dcalign/learn.hpp, "Saved models"): each
// layer's W<l> (fan_in x fan_out) and b<l> (1 x fan_out) in the precision the model computes in,
// so that a loaded model predicts bit for bit as the saved one.
#include <torch/torch.h>

#include <string>
#include <type_traits>
#include <vector>

#include "learn/model_io.hpp"
#include "learn/torch_internal.hpp"

namespace dcalign::learn {
namespace torch_impl {
namespace {

// A 2-D tensor as a matrix of T, element for element (the tensor is row-major, the matrix
// column-major).
template <typename T>
Matrix<T> to_saved(const torch::Tensor& t) {
  constexpr auto dtype = std::is_same_v<T, float> ? torch::kFloat32 : torch::kFloat64;
  const torch::Tensor host = t.detach().to(torch::kCPU, dtype).t().contiguous();
  Matrix<T> out(t.size(0), t.size(1));
  std::copy(host.data_ptr<T>(), host.data_ptr<T>() + out.size(), out.data());
  return out;
}

template <typename T>
torch::Tensor from_saved(const Matrix<T>& m, torch::Device device) {
  constexpr auto dtype = std::is_same_v<T, float> ? torch::kFloat32 : torch::kFloat64;
  auto view = torch::from_blob(const_cast<T*>(m.data()), {m.cols(), m.rows()}, dtype);
  return torch::empty({m.rows(), m.cols()}, dtype).copy_(view.t()).to(device);
}

template <typename T>
void save_layers(const Layers& layers, detail::ModelState& s) {
  for (size_t l = 0; l < layers.W.size(); ++l) {
    s.add("W" + std::to_string(l), to_saved<T>(layers.W[l]));
    s.add("b" + std::to_string(l), to_saved<T>(layers.b[l].reshape({1, -1})));
  }
}

template <typename T>
const Matrix<T>& saved(detail::ModelReader& in, const std::string& name) {
  if constexpr (std::is_same_v<T, float>)
    return in.f32(name);
  else
    return in.f64(name);
}

// Layer l maps sizes[l] units to sizes[l + 1].
template <typename T>
Layers restore_layers(detail::ModelReader& in, const std::vector<int64_t>& sizes,
                      torch::Device device) {
  Layers layers;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const std::string w = "W" + std::to_string(l), b = "b" + std::to_string(l);
    const Matrix<T>& W = saved<T>(in, w);
    const Matrix<T>& B = saved<T>(in, b);
    const auto shape = [](index_t r, index_t c) {
      return std::to_string(r) + " x " + std::to_string(c);
    };
    if (W.rows() != sizes[l] || W.cols() != sizes[l + 1])
      in.fail_parameter(w, "is " + shape(W.rows(), W.cols()) + "; expected " +
                               shape(sizes[l], sizes[l + 1]) + " (num_features, the hidden " +
                               "layers and the outputs of num_classes)");
    if (B.rows() != 1 || B.cols() != sizes[l + 1])
      in.fail_parameter(b,
                        "is " + shape(B.rows(), B.cols()) + "; expected " + shape(1, sizes[l + 1]));
    layers.W.push_back(from_saved(W, device));
    layers.b.push_back(from_saved(B, device).reshape({-1}));
  }
  return layers;
}

}  // namespace

void TorchModel::save_state(detail::ModelState& s) const {
  s.options["device"] = opt_.device;
  s.options["threads"] = opt_.threads;
  if (name() == "mlp") {
    s.options["hidden_layers"] = opt_.mlp.hidden_layers;
    s.options["float64"] = dtype_ == torch::kFloat64;
  }
  if (dtype_ == torch::kFloat32)
    save_layers<float>(layers_, s);
  else
    save_layers<double>(layers_, s);
}

void TorchModel::restore(detail::ModelReader& in, const std::vector<int>& hidden) {
  const int classes = in.num_classes();
  std::vector<int64_t> sizes{in.num_features()};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(output_units(classes));
  layers_ = dtype_ == torch::kFloat32 ? restore_layers<float>(in, sizes, device_)
                                      : restore_layers<double>(in, sizes, device_);
  set_trained(classes, in.num_features());
  info_ = in.fit_info();
}

}  // namespace torch_impl

namespace detail {
namespace {

std::unique_ptr<Model> restore_torch(ModelReader& in, bool mlp) {
  const Json& o = mlp ? in.options({"device", "threads", "hidden_layers", "float64"})
                      : in.options({"device", "threads"});
  ModelOptions options;
  options.device = in.device(o);
  options.threads = in.threads(o);
  if (mlp) {
    const Json& h = in.json().at(o, "hidden_layers", "options.");
    if (!h.is_array() || h.size() > 1000)
      in.fail("key 'options.hidden_layers' must be a list of layer widths, found " + h.dump());
    options.mlp.hidden_layers.clear();
    for (size_t i = 0; i < h.size(); ++i) {
      if (!h[i].is_number_unsigned() || h[i].get<std::uint64_t>() < 1 ||
          h[i].get<std::uint64_t>() > (1u << 24))
        in.fail("key 'options.hidden_layers[" + std::to_string(i) +
                "]' must be a layer width of 1 to 2^24 units, found " + h[i].dump());
      options.mlp.hidden_layers.push_back(h[i].get<int>());
    }
    options.mlp.float64 = in.json().boolean(o, "float64", "options.");
  }
  const char* kind = mlp ? "mlp" : "logreg";
  in.check_options(kind, options);
  std::unique_ptr<Model> model = mlp ? make_mlp(options) : make_logreg(options);
  static_cast<torch_impl::TorchModel&>(*model).restore(
      in, mlp ? options.mlp.hidden_layers : std::vector<int>());
  return model;
}

}  // namespace

std::unique_ptr<Model> restore_mlp(ModelReader& in) { return restore_torch(in, true); }
std::unique_ptr<Model> restore_logreg(ModelReader& in) { return restore_torch(in, false); }

}  // namespace detail
}  // namespace dcalign::learn
