// align()'s keyword arguments, read and checked through the option schema (dcalign/options.hpp).
#include "module/module.hpp"

#include "dcalign/options.hpp"

namespace dcalign::pymodule {
namespace {

// ---------------------------------------------------------------- options

// A Python value as the schema takes it (dcalign/options.hpp): bool, int, float or str, NumPy
// scalars included. Anything else is given as its repr, which the schema refuses as a wrong type
// (TypeError, below).
OptionValue option_value(py::handle v) {
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  if (py::hasattr(v, "dtype") && std::string(py::str(v.attr("dtype"))) == "bool")
    return py::cast<bool>(py::bool_(py::reinterpret_borrow<py::object>(v)));
  if (PyIndex_Check(v.ptr())) {
    py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
    if (!i) throw py::error_already_set();
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow == 0) return static_cast<std::int64_t>(x);
    const unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
    if (!PyErr_Occurred()) return static_cast<std::uint64_t>(u);
    PyErr_Clear();
    return std::string(py::str(v));  // out of every integer range: a real, refused as such
  }
  if (PyFloat_Check(v.ptr()) || py::hasattr(v, "__float__"))
    return py::cast<double>(py::float_(py::reinterpret_borrow<py::object>(v)));
  if (py::isinstance<py::str>(v)) return py::cast<std::string>(v);
  throw py::type_error("must be a bool, int, float or str, got " +
                       std::string(py::str(py::type::of(v).attr("__name__"))));
}

}  // namespace

// The keyword arguments of align(), fit() and _align_dlpack: the schema's Python keys, and the
// matrices rotation (O) and target (Z), which are arrays rather than options.
CallOptions parse_options(const std::string& method, const py::dict& kw) {
  AlignRequest r;
  r.align.method = parse_method(method);
  bool have_rotation = false;
  for (auto item : kw) {
    const std::string k = py::cast<std::string>(item.first);
    py::handle v = item.second;
    if (k == "rotation") {
      if (!v.is_none()) {
        r.align.rotation_matrix = to_matrix<double>(v, "option 'rotation'");
        have_rotation = true;
      }
      continue;
    }
    if (k == "target") {
      if (!v.is_none()) r.align.target = to_matrix<double>(v, "option 'target'");
      continue;
    }
    const OptionInfo* row = find_option(OptionEntry::python, k, r.align.method);
    if (!row)
      throw py::type_error("align() got an unexpected keyword argument '" + k +
                           "' (the options are dcalign.options(): the long options of `dcalign "
                           "align` with underscores, e.g. target_rotation)");
    // As `dcalign align` refuses --gopp-tolerance with --method odc: an option of another
    // method would otherwise be read and silently do nothing (ValueError).
    check_option_used(*row, r.align.method, k);
    OptionValue value;
    try {
      value = option_value(v);
    } catch (const py::type_error& e) {
      throw py::type_error(k + " " + e.what());
    }
    try {
      set_option(r, *row, value, k, OptionEntry::python);
    } catch (const OptionTypeError& e) {
      throw py::type_error(e.what());
    }
  }
  // As `dcalign align` (src/cli/align_command.cpp): a given O makes the rotation "supplied".
  if (have_rotation) r.align.rotation = TargetRotation::supplied;
  CallOptions o;
  o.align = r.align;
  o.threads = r.threads;
  o.device = r.device;
  return o;
}

std::shared_ptr<Backend> backend_for(const CallOptions& o) {
  BackendOptions bo;
  bo.threads = o.threads;
  return make_backend(o.device, bo);
}

}  // namespace dcalign::pymodule
