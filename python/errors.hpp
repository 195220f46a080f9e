#pragma once
// The translation of dcalign's C++ errors into Python exceptions, shared by the extensions
// dcalign._core and dcalign._experiment: InvalidInput -> ValueError, IoError -> OSError,
// NumericalError -> dcalign.NumericalError (a subclass of both ArithmeticError and ValueError,
// created by _core), BackendError and any other dcalign::Error -> RuntimeError.
#include <pybind11/pybind11.h>

#include <exception>

#include "dcalign/error.hpp"

namespace dcalign::python {

/// The class dcalign.NumericalError (each extension holds its own pointer to the one class).
inline PyObject*& numerical_error_class() {
  static PyObject* cls = nullptr;
  return cls;
}

/// Registers the translation; `numerical` is dcalign.NumericalError.
inline void register_error_translation(PyObject* numerical) {
  numerical_error_class() = numerical;
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InvalidInput& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const NumericalError& e) {
      PyErr_SetString(numerical_error_class(), e.what());
    } catch (const BackendError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

}  // namespace dcalign::python
