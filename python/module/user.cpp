// The user side: anchors, secret bases, releases and transforms.
#include "module/module.hpp"

#include "dcalign/user.hpp"

using namespace dcalign;

namespace dcalign::pymodule {
namespace {

// ---------------------------------------------------------------- user side

template <typename T>
py::array_t<T> make_anchor_impl(index_t rows, index_t features, const std::string& kind,
                                std::uint64_t seed) {
  return matrix_to_array(make_anchor<T>(rows, features, parse_anchor_kind(kind), seed));
}

Mixing parse_mixing(const std::string& s) {
  if (s == "haar") return Mixing::haar;
  if (s == "uniform") return Mixing::uniform;
  throw InvalidInput("unknown mixing '" + s + "'; expected haar or uniform");
}

template <typename T>
py::array_t<T> secret_basis_impl(const py::array& X, index_t l, const std::string& mixing,
                                 std::uint64_t seed, bool center, const py::object& subspace) {
  User<T> user(to_dc_matrix<T>(X, "X (n, m)"));
  if (subspace.is_none()) {
    user.choose_secret_basis(l, parse_mixing(mixing), seed, center);
  } else {
    const Matrix<T> V = to_matrix<T>(subspace, "subspace (m, l)");
    user.choose_secret_basis_in(V, parse_mixing(mixing), seed);
  }
  return matrix_to_array(user.reveal_secret_basis());
}

template <typename T>
py::array_t<T> top_right_impl(const py::array& X, index_t l, bool center) {
  return matrix_to_array(top_right_singular_vectors<T>(to_dc_matrix<T>(X, "X (n, m)"), l, center));
}

/// X F on the CPU backend's GEMM (X: n x m, F: m x l).
template <typename T>
py::array_t<T> release_impl(const py::array& X, const py::array& F) {
  const Matrix<T> x = to_dc_matrix<T>(X, "X (n, m)");
  const Matrix<T> f = to_dc_matrix<T>(F, "F (m, l)");
  if (f.rows() != x.cols())
    throw InvalidInput("release: X is " + std::to_string(x.rows()) + " x " +
                       std::to_string(x.cols()) + " but F is " + std::to_string(f.rows()) + " x " +
                       std::to_string(f.cols()) + "; expected F with " + std::to_string(x.cols()) +
                       " rows (one per feature of X)");
  Matrix<T> out(x.rows(), f.cols());
  if (out.size() > 0) {
    auto backend = make_backend(Device::cpu);
    py::gil_scoped_release nogil;
    backend->primitives<T>().gemm(Op::none, Op::none, T(1), x.view(), f.view(), T(0), out.view());
  }
  return matrix_to_array(out);
}

template <typename T>
py::array_t<T> transform_impl(const py::array& X, const py::array& G) {
  return matrix_to_array(
      apply_change_of_basis<T>(to_dc_matrix<T>(X, "X (n, l)"), to_dc_matrix<T>(G, "G (l, l)")));
}

}  // namespace

void bind_user(py::module_& m) {
  m.def("_make_anchor_f64", &make_anchor_impl<double>);
  m.def("_make_anchor_f32", &make_anchor_impl<float>);
  m.def("_secret_basis_f64", &secret_basis_impl<double>);
  m.def("_secret_basis_f32", &secret_basis_impl<float>);
  m.def("_top_right_f64", &top_right_impl<double>);
  m.def("_top_right_f32", &top_right_impl<float>);
  m.def("_release_f64", &release_impl<double>);
  m.def("_release_f32", &release_impl<float>);
  m.def("_transform_f64", &transform_impl<double>);
  m.def("_transform_f32", &transform_impl<float>);
}

}  // namespace dcalign::pymodule
