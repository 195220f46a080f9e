// dcalign._core: the C++ half of the Python module dcalign (python/dcalign/__init__.py wraps it).
//
// Layout. dcalign stores each matrix column-major and a stack of c matrices (a x l) back to back,
// so a NumPy array of shape (c, a, l) with byte strides (a*l*s, s, a*s) (each A[i]
// Fortran-ordered, slices back to back) IS a dcalign stack: align() then hands its buffer to
// align_resident on the CPU backend's primitives without any copy. Any other layout is copied
// once into a dcalign Stack. G is returned in the same layout, shape (c, l, l), so that
// A[i] @ G[i] is user i's aligned anchor.
//
// Device memory. _align_dlpack takes the DLPack capsule of an array in GPU (or host) memory and
// returns G in the same memory as a _DlpackArray (see "DLPack" below).
//
// Errors. dcalign::InvalidInput -> ValueError, IoError -> OSError, NumericalError ->
// dcalign.NumericalError (a subclass of both ArithmeticError and ValueError), BackendError and
// any other dcalign::Error -> RuntimeError; unknown option names and options of the wrong type ->
// TypeError.
//
// Its parts are in python/module/, one file per topic (the pybind11 convention): options.cpp,
// align.cpp, dlpack.cpp, user.cpp, aligner.cpp, analysis.cpp.
#include <pybind11/pybind11.h>

#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"
#include "errors.hpp"
#include "module/module.hpp"

namespace py = pybind11;
using namespace dcalign;

namespace {

PyObject* g_numerical_error = nullptr;

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "dcalign's C++ core; use the package dcalign.";
  {
    py::tuple bases =
        py::make_tuple(py::handle(PyExc_ArithmeticError), py::handle(PyExc_ValueError));
    g_numerical_error = PyErr_NewExceptionWithDoc(
        "dcalign.NumericalError",
        "A numerical routine failed (dcalign::NumericalError): no convergence, a LAPACK error "
        "or a non-finite result. Subclass of ArithmeticError and ValueError.",
        bases.ptr(), nullptr);
    if (!g_numerical_error) throw py::error_already_set();
    m.add_object("NumericalError", py::handle(g_numerical_error));
  }
  python::register_error_translation(g_numerical_error);
  pymodule::bind_align(m);
  pymodule::bind_dlpack(m);
  pymodule::bind_user(m);
  pymodule::bind_aligners(m);
  pymodule::bind_analysis(m);

  m.def("cuda_available", []() { return cuda_available(); });
  // The host BLAS as it runs in this process (its kernel set is chosen when the module loads).
  m.def("blas_info", []() {
    const BlasInfo b = blas_info();
    py::dict d;
    d["library"] = b.library;
    d["kernels"] = b.kernels;
    d["chosen_by"] = b.chosen_by;
    d["reason"] = b.reason;
    d["cpu"] = b.cpu;
    d["threads"] = b.threads;
    return d;
  });
}
