#pragma once
// What the parts of dcalign._core share (python/dcalign_module.cpp says how the module lays out
// arrays, reaches device memory and translates errors): the keyword options of align(), the
// array conversions, and one bind_* function per part, which PYBIND11_MODULE calls.
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"
#include "dcalign/matrix.hpp"

namespace dcalign::pymodule {

namespace py = pybind11;

struct CallOptions {
  AlignOptions align;
  int threads = 0;
  Device device = Device::cpu;
};

/// A 2-D array as a column-major Matrix<T> (one copy, any layout); TypeError/ValueError name
/// `what`.
template <typename T>
Matrix<T> to_matrix(py::handle v, const std::string& what) {
  auto a = py::array_t<T, py::array::f_style | py::array::forcecast>::ensure(v);
  if (!a) throw py::type_error(what + " must be a 2-D array of numbers");
  if (a.ndim() != 2)
    throw py::value_error(what + " must be a 2-D array, got " + std::to_string(a.ndim()) +
                          " dimensions");
  const index_t rows = a.shape(0), cols = a.shape(1);
  return Matrix<T>(rows, cols, std::vector<T>(a.data(), a.data() + rows * cols));
}

/// align()'s keyword arguments through the option schema (options.cpp).
CallOptions parse_options(const std::string& method, const py::dict& kw);
std::shared_ptr<Backend> backend_for(const CallOptions& o);

// ---------------------------------------------------------------- arrays

/// Whether x (shape [count,] rows, cols) is laid out as a contiguous dcalign stack/matrix of T:
/// element (k, i, j) at byte offset (k*rows*cols + i + j*rows) * sizeof(T).
template <typename T>
bool dc_layout(const py::array& x) {
  const auto nd = x.ndim();
  if (nd < 2) return false;
  if (reinterpret_cast<std::uintptr_t>(x.data()) % alignof(T) != 0) return false;
  const py::ssize_t s = sizeof(T);
  const py::ssize_t rows = x.shape(nd - 2), cols = x.shape(nd - 1);
  py::ssize_t expected[3] = {rows * cols * s, s, rows * s};
  for (py::ssize_t d = 0; d < nd; ++d) {
    const py::ssize_t e = expected[3 - nd + d];
    if (x.shape(d) > 1 && x.strides(d) != e) return false;
  }
  return true;
}

/// x itself when its dtype is T (native byte order), else a converted copy.
template <typename T>
py::array as_dtype(const py::array& x) {
  if (py::isinstance<py::array_t<T>>(x)) return x;
  auto y = py::array_t<T, py::array::forcecast>::ensure(x);
  if (!y)
    throw py::type_error("cannot convert the array to " +
                         std::string(sizeof(T) == 8 ? "float64" : "float32"));
  return std::move(y);
}

/// Copies x (shape [count,] rows, cols, any strides, dtype T) into dst in dcalign's layout.
template <typename T>
void copy_to_dc(const py::array& x, T* dst) {
  const auto nd = x.ndim();
  const index_t count = nd == 3 ? x.shape(0) : 1, rows = x.shape(nd - 2), cols = x.shape(nd - 1);
  const py::ssize_t sk = nd == 3 ? x.strides(0) : 0, si = x.strides(nd - 2), sj = x.strides(nd - 1);
  const char* base = static_cast<const char*>(x.data());
  constexpr index_t B = 32;  // row blocks: reads along j, writes stay within B-row stripes
  for (index_t k = 0; k < count; ++k) {
    T* d = dst + k * rows * cols;
    const char* src = base + k * sk;
    for (index_t i0 = 0; i0 < rows; i0 += B) {
      const index_t i1 = std::min(rows, i0 + B);
      for (index_t i = i0; i < i1; ++i)
        for (index_t j = 0; j < cols; ++j) {
          T v;
          std::memcpy(&v, src + i * si + j * sj, sizeof(T));
          d[i + j * rows] = v;
        }
    }
  }
}

template <typename T>
py::array_t<T> new_stack_array(index_t count, index_t rows, index_t cols) {
  const py::ssize_t s = sizeof(T);
  return py::array_t<T>({py::ssize_t(count), py::ssize_t(rows), py::ssize_t(cols)},
                        {py::ssize_t(rows * cols) * s, s, py::ssize_t(rows) * s});
}

template <typename T>
py::array_t<T> matrix_to_array(const Matrix<T>& m) {
  const py::ssize_t s = sizeof(T);
  py::array_t<T> out({py::ssize_t(m.rows()), py::ssize_t(m.cols())},
                     {s, py::ssize_t(m.rows()) * s});
  if (m.size() > 0) std::memcpy(out.mutable_data(), m.data(), sizeof(T) * m.size());
  return out;
}

template <typename T>
py::array_t<T> stack_to_array(const Stack<T>& st) {
  auto out = new_stack_array<T>(st.count(), st.rows(), st.cols());
  if (st.size() > 0) std::memcpy(out.mutable_data(), st.data(), sizeof(T) * st.size());
  return out;
}

inline void require_ndim(const py::array& x, int nd, const char* what) {
  if (x.ndim() != nd)
    throw py::value_error(std::string(what) + " must be a " + std::to_string(nd) +
                          "-D array, got shape with " + std::to_string(x.ndim()) + " dimensions");
}

template <typename T>
Stack<T> to_stack(const py::array& x0) {
  const py::array x = as_dtype<T>(x0);
  require_ndim(x, 3, "anchors (c, a, l)");
  Stack<T> st(x.shape(0), x.shape(1), x.shape(2));
  copy_to_dc<T>(x, st.data());
  return st;
}

template <typename T>
Matrix<T> to_dc_matrix(const py::array& x0, const char* what) {
  const py::array x = as_dtype<T>(x0);
  require_ndim(x, 2, what);
  Matrix<T> m(x.shape(0), x.shape(1));
  copy_to_dc<T>(x, m.data());
  return m;
}

/// The parts of the module, each in its own file.
void bind_align(py::module_& m);     // align.cpp: align() on host arrays, the schema
void bind_user(py::module_& m);      // user.cpp: the user side
void bind_aligners(py::module_& m);  // aligner.cpp: Aligner, saved models, error test hook
void bind_analysis(py::module_& m);  // analysis.cpp: communication, statistics, privacy
void bind_dlpack(py::module_& m);    // dlpack.cpp: arrays in device memory

}  // namespace dcalign::pymodule
