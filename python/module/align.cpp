// align() on arrays in host memory (dcalign's layout read in place, any other copied once).
#include "module/module.hpp"

#include "dcalign/options.hpp"

using namespace dcalign;

namespace dcalign::pymodule {
namespace {

// ---------------------------------------------------------------- align

/// Returns (G, report JSON, address of the anchor buffer the library read, copied).
template <typename T>
py::tuple align_impl(const py::array& x0, const std::string& method, const py::dict& kw) {
  const py::array x = as_dtype<T>(x0);
  const CallOptions o = parse_options(method, kw);
  require_ndim(x, 3, "anchors (c, a, l)");
  const index_t c = x.shape(0), a = x.shape(1), l = x.shape(2);
  detail::check_shape(c, a, l, "anchors");
  auto backend = backend_for(o);
  auto G = new_stack_array<T>(c, l, l);
  T* g = G.mutable_data();
  const bool view = dc_layout<T>(x) && backend->device() == Device::cpu;
  Stack<T> copy;
  AlignReport report;
  const T* used = nullptr;
  {
    if (view) {
      used = static_cast<const T*>(x.data());
      py::gil_scoped_release nogil;
      report = align_resident(backend->primitives<T>(), StackView<const T>(used, c, a, l),
                              StackView<T>(g, c, l, l), MatrixView<T>(), o.align);
    } else {
      copy = Stack<T>(c, a, l);
      {
        py::gil_scoped_release nogil;
        copy_to_dc<T>(x, copy.data());
      }
      used = copy.data();
      py::gil_scoped_release nogil;
      if (backend->device() == Device::cpu) {
        report = align_resident(backend->primitives<T>(), std::as_const(copy).view(),
                                StackView<T>(g, c, l, l), MatrixView<T>(), o.align);
      } else {
        Alignment<T> res = align(copy, o.align, *backend);
        std::memcpy(g, res.G.data(), sizeof(T) * res.G.size());
        report = std::move(res.report);
      }
    }
  }
  return py::make_tuple(G, report.to_json(-1), reinterpret_cast<std::uintptr_t>(used),
                        !view || !x.is(x0));
}

}  // namespace

void bind_align(py::module_& m) {
  m.def("_align_f64", &align_impl<double>);
  m.def("_align_f32", &align_impl<float>);
  m.def("_dc_layout_f64", &dc_layout<double>);
  m.def("_dc_layout_f32", &dc_layout<float>);
  // The option schema and the method table, from which dcalign.options(), align()'s docstring
  // and the method list of the Python API are generated.
  m.def("_option_schema_json", &option_schema_json);
  m.def("_method_names", &method_names);
}

}  // namespace dcalign::pymodule
