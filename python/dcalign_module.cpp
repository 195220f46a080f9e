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
#include "dcalign/aligner.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/comm.hpp"
#include "dcalign/error.hpp"
#include "dcalign/matrix.hpp"
#include "dcalign/options.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/privacy.hpp"
#include "dcalign/privacy_attacks.hpp"
#include "dcalign/stats.hpp"
#include "dcalign/user.hpp"
#include "errors.hpp"

namespace py = pybind11;
using namespace dcalign;

namespace {

PyObject* g_numerical_error = nullptr;

// ---------------------------------------------------------------- options

struct CallOptions {
  AlignOptions align;
  int threads = 0;
  Device device = Device::cpu;
};

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

void require_ndim(const py::array& x, int nd, const char* what) {
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

// ---------------------------------------------------------------- Aligner

template <typename T>
void bind_aligner(py::module_& m, const char* name) {
  using A = Aligner<T>;
  py::class_<A>(m, name)
      .def(py::init<>())
      .def("fit",
           [](A& self, const py::array& x, const std::string& method, const py::dict& kw) {
             const CallOptions o = parse_options(method, kw);
             Stack<T> st = to_stack<T>(x);  // the one copy: an Aligner takes a Stack
             auto backend = backend_for(o);
             Alignment<T> res;
             {
               py::gil_scoped_release nogil;
               res = self.fit(st, o.align, *backend);
             }
             return py::make_tuple(stack_to_array(res.G), res.report.to_json(-1));
           })
      .def("enroll",
           [](const A& self, const py::array& x, int threads) {
             BackendOptions bo;
             bo.threads = threads;
             auto backend = make_backend(Device::cpu, bo);
             if (x.ndim() == 2) {
               const Matrix<T> mnew = to_dc_matrix<T>(x, "A_new (a, l)");
               Enrolment<T> e;
               {
                 py::gil_scoped_release nogil;
                 e = self.enroll(mnew, *backend);
               }
               return py::make_tuple(matrix_to_array(e.G), e.report.to_json(-1));
             }
             if (x.ndim() != 3)
               throw py::value_error(
                   "A_new must be (a, l) for one user or (k, a, l) for k users, "
                   "got " +
                   std::to_string(x.ndim()) + " dimensions");
             const Stack<T> snew = to_stack<T>(x);
             BatchEnrolment<T> e;
             {
               py::gil_scoped_release nogil;
               e = self.enroll(snew, *backend);
             }
             return py::make_tuple(stack_to_array(e.G), e.report.to_json(-1));
           })
      .def("save", &A::save)
      .def_static("load", &A::load)
      .def_property_readonly("fitted", &A::fitted)
      .def_property_readonly("method", [](const A& s) { return to_string(s.method()); })
      .def_property_readonly("anchor_rows", &A::anchor_rows)
      .def_property_readonly("dim", &A::dim)
      .def_property_readonly("users", &A::users)
      .def_property_readonly("rank_tolerance", &A::rank_tolerance)
      .def_property_readonly("target", [](const A& s) { return matrix_to_array(s.target()); });
}

void throw_for_test(const std::string& kind) {
  if (kind == "invalid") throw InvalidInput("test: invalid input");
  if (kind == "io") throw IoError("test: io error");
  if (kind == "numerical") throw NumericalError("test: numerical error");
  if (kind == "backend") throw BackendError("test: backend error");
  if (kind == "error") throw Error("test: error");
  throw std::invalid_argument("unknown kind " + kind);
}

// ---------------------------------------------------------------- communication model

// dcalign comm's options as keyword arguments (CommModel's names), and its JSON document.
std::string communication_impl(const py::dict& options) {
  static const std::set<std::string> known = {
      "users",  "mean_samples",     "samples", "anchor_rows", "features",
      "dim",    "model_parameters", "bits",    "gamma",       "participation",
      "rounds", "bandwidth",        "rtt"};
  CommModel m;
  bool users_given = false, timed = false;
  double bandwidth = 0, rtt = 0;
  for (const auto& item : options) {
    const std::string key = py::str(item.first);
    if (!known.count(key)) throw py::type_error("communication: unknown option '" + key + "'");
    const py::handle v = item.second;
    try {
      if (key == "users") m.users = v.cast<std::int64_t>(), users_given = true;
      if (key == "mean_samples") m.mean_samples = v.cast<double>();
      if (key == "samples") m.samples = v.cast<std::vector<double>>();
      if (key == "anchor_rows") m.anchor_rows = v.cast<std::int64_t>();
      if (key == "features") m.features = v.cast<std::int64_t>();
      if (key == "dim") m.dim = v.cast<std::int64_t>();
      if (key == "model_parameters") m.model_parameters = v.cast<double>();
      if (key == "bits") m.bits = v.cast<double>();
      if (key == "gamma" && !v.is_none()) m.gamma = v.cast<double>();
      if (key == "participation") m.participation = v.cast<double>();
      if (key == "rounds") m.rounds = v.cast<double>();
      if (key == "bandwidth") bandwidth = v.cast<double>(), timed = true;
      if (key == "rtt") rtt = v.cast<double>();
    } catch (const py::cast_error&) {
      throw py::type_error("communication: option '" + key + "' has the wrong type (" +
                           std::string(py::str(v.get_type())) + ")");
    }
  }
  // As the command: the list of n_i gives c unless users says otherwise.
  if (!m.samples.empty() && !users_given) m.users = static_cast<std::int64_t>(m.samples.size());
  const CommEstimate e = estimate_communication(m);
  std::optional<TransferTimes> t;
  if (timed) t = estimate_transfer_times(m, bandwidth, rtt);
  return communication_json(m, e, t, bandwidth, rtt, -1);
}

// ---------------------------------------------------------------- statistics

py::dict paired_t_impl(const std::vector<double>& x, const std::vector<double>& y,
                       const std::string& alternative, double confidence) {
  const stats::PairedTTest r =
      stats::paired_t_test(x, y, stats::parse_alternative(alternative), confidence);
  py::dict d;
  d["n"] = r.n;
  d["mean_diff"] = r.mean_diff;
  d["sd_diff"] = r.sd_diff;
  d["t"] = r.t;
  d["df"] = r.df;
  d["p"] = r.p;
  d["cohens_dz"] = r.cohens_dz;
  d["confidence"] = r.confidence;
  d["ci_lower"] = r.ci_lower;
  d["ci_upper"] = r.ci_upper;
  d["alternative"] = alternative;
  return d;
}

py::dict one_way_impl(const std::vector<std::vector<double>>& groups) {
  const stats::OneWayAnova r = stats::one_way_anova(groups);
  py::dict d;
  d["ss_between"] = r.ss_between;
  d["ss_within"] = r.ss_within;
  d["ss_total"] = r.ss_total;
  d["df_between"] = r.df_between;
  d["df_within"] = r.df_within;
  d["F"] = r.F;
  d["p"] = r.p;
  d["eta_squared"] = r.eta_squared;
  d["cohens_f"] = r.cohens_f;
  return d;
}

py::dict anova_term(const stats::AnovaTerm& t) {
  py::dict d;
  d["ss"] = t.ss;
  d["df"] = t.df;
  d["F"] = t.F;
  d["p"] = t.p;
  d["partial_eta_squared"] = t.partial_eta_squared;
  d["cohens_f"] = t.cohens_f;
  return d;
}

py::dict two_way_impl(const std::vector<double>& y, const std::vector<std::string>& a,
                      const std::vector<std::string>& b, const std::string& type) {
  const stats::TwoWayAnova r = stats::two_way_anova(y, a, b, stats::parse_sum_of_squares(type));
  py::dict d;
  d["type"] = type;
  d["levels_a"] = r.levels_a;
  d["levels_b"] = r.levels_b;
  d["n"] = r.n;
  d["A"] = anova_term(r.a);
  d["B"] = anova_term(r.b);
  d["A:B"] = anova_term(r.interaction);
  d["ss_residual"] = r.ss_residual;
  d["df_residual"] = r.df_residual;
  return d;
}

// ---------------------------------------------------------------- privacy measurements

// A 2-D float64 array as a column-major Matrix<double> (one copy, any layout).
Matrix<double> matrix_from(const py::array_t<double, py::array::forcecast>& a, const char* what) {
  if (a.ndim() != 2)
    throw InvalidInput(std::string(what) + " must be a 2-D array, got " + std::to_string(a.ndim()) +
                       " dimensions");
  const auto r = a.unchecked<2>();
  Matrix<double> m(static_cast<index_t>(a.shape(0)), static_cast<index_t>(a.shape(1)));
  for (py::ssize_t j = 0; j < a.shape(1); ++j)
    for (py::ssize_t i = 0; i < a.shape(0); ++i)
      m(static_cast<index_t>(i), static_cast<index_t>(j)) = r(i, j);
  return m;
}

py::dict analytic_gaussian_impl(double epsilon, double delta, double sensitivity) {
  const AnalyticGaussian g = analytic_gaussian(epsilon, delta, sensitivity);
  py::dict d;
  d["sigma"] = g.sigma;
  d["alpha"] = g.alpha;
  d["delta0"] = g.delta0;
  d["upper_branch"] = g.upper_branch;
  d["boundary"] = g.boundary;
  d["classical_sigma"] = classical_gaussian_sigma(epsilon, delta, sensitivity);
  return d;
}

py::dict dr_privacy_impl(const py::array_t<double, py::array::forcecast>& X,
                         const py::array_t<double, py::array::forcecast>& basis, double epsilon) {
  const DrSummary s = dr_privacy(matrix_from(X, "X"), matrix_from(basis, "basis"), epsilon);
  py::dict d;
  d["ratios"] = s.ratios;
  d["min"] = s.min;
  d["median"] = s.median;
  d["below"] = s.below;
  d["fraction_below"] = s.fraction_below;
  d["kept"] = s.kept;
  return d;
}

py::dict reconstruction_error_impl(const py::array_t<double, py::array::forcecast>& truth,
                                   const py::array_t<double, py::array::forcecast>& rec) {
  const ReconstructionError e =
      reconstruction_error(matrix_from(truth, "truth"), matrix_from(rec, "reconstruction"));
  py::dict d;
  d["relative"] = e.relative;
  d["per_row"] = e.per_row;
  d["median_row"] = e.median_row;
  return d;
}

// ---------------------------------------------------------------- DLPack (device memory)
//
// align() on an array in GPU memory: the caller's library hands a DLPack capsule over (its
// __dlpack__(stream=1): ordered before the legacy default stream, on which the CUDA backend then
// runs), the anchors are read where they are (dcalign's layout) or gathered once on the device,
// and G comes back in device memory as a _DlpackArray, which the caller's from_dlpack takes
// without a copy. Host capsules (kDLCPU) take the same path on the CPU backend, which is how the
// CPU tests check it. The legacy capsule ("dltensor", DLPack 0.6 / dlpack.h of libdlpack-dev)
// is what every consumer accepts.

/// Owns a result buffer until it is handed out through DLPack, then the capsule owns it.
struct DlpackArray {
  std::unique_ptr<Buffer<float>> f32;
  std::unique_ptr<Buffer<double>> f64;
  std::vector<std::int64_t> shape, strides;  // elements
  DLDevice device{kDLCPU, 0};
  bool exported = false;
};

struct DlpackOwner {  // manager_ctx of an exported DLManagedTensor
  std::unique_ptr<Buffer<float>> f32;
  std::unique_ptr<Buffer<double>> f64;
  std::vector<std::int64_t> shape, strides;
};

void delete_dlpack(DLManagedTensor* m) {
  delete static_cast<DlpackOwner*>(m->manager_ctx);  // frees the buffer (stream-ordered on a GPU)
  delete m;
}

void delete_unused_capsule(PyObject* capsule) {
  // A capsule nobody consumed still owns its tensor (the DLPack protocol's rule).
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (m && m->deleter) m->deleter(m);
  PyErr_Restore(type, value, trace);
}

py::capsule export_dlpack(DlpackArray& a) {
  if (a.exported)
    throw py::buffer_error(
        "this dcalign result was already handed out through __dlpack__; DLPack transfers it once "
        "(call from_dlpack on it once)");
  auto owner = std::make_unique<DlpackOwner>();
  owner->shape = a.shape;
  owner->strides = a.strides;
  auto m = std::make_unique<DLManagedTensor>();
  m->dl_tensor.data = a.f64 ? static_cast<void*>(a.f64->data()) : static_cast<void*>(a.f32->data());
  m->dl_tensor.device = a.device;
  m->dl_tensor.ndim = static_cast<int>(owner->shape.size());
  m->dl_tensor.dtype = DLDataType{kDLFloat, static_cast<std::uint8_t>(a.f64 ? 64 : 32), 1};
  m->dl_tensor.shape = owner->shape.data();
  m->dl_tensor.strides = owner->strides.data();
  m->dl_tensor.byte_offset = 0;
  owner->f32 = std::move(a.f32);
  owner->f64 = std::move(a.f64);
  m->manager_ctx = owner.release();
  m->deleter = &delete_dlpack;
  PyObject* capsule = PyCapsule_New(m.get(), "dltensor", &delete_unused_capsule);
  if (!capsule) {
    delete_dlpack(m.release());
    throw py::error_already_set();
  }
  m.release();
  a.exported = true;
  return py::reinterpret_steal<py::capsule>(capsule);
}

/// Takes the tensor of an unused DLPack capsule (renamed "used_dltensor": its deleter is ours to
/// call, which ~DlpackInput does).
struct DlpackInput {
  DLManagedTensor* m = nullptr;
  DlpackInput(const py::object& capsule, const std::string& what) {
    if (!PyCapsule_CheckExact(capsule.ptr()) || !PyCapsule_IsValid(capsule.ptr(), "dltensor"))
      throw py::value_error(
          what + ": expected an unused DLPack capsule (named 'dltensor', from __dlpack__())");
    m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (!m) throw py::error_already_set();
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  }
  DlpackInput(const DlpackInput&) = delete;
  DlpackInput& operator=(const DlpackInput&) = delete;
  ~DlpackInput() {
    if (m && m->deleter) m->deleter(m);
  }
};

std::string dlpack_device_name(const DLDevice& d) {
  switch (d.device_type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda:" + std::to_string(d.device_id);
    case kDLCUDAHost:
      return "cuda_host:" + std::to_string(d.device_id);
    case kDLCUDAManaged:
      return "cuda_managed:" + std::to_string(d.device_id);
    default:
      return "DLPack device type " + std::to_string(static_cast<int>(d.device_type)) + ":" +
             std::to_string(d.device_id);
  }
}

void check_dlpack_device_and_dtype(const DLTensor& t, const std::string& what) {
  const DLDeviceType dt = t.device.device_type;
  if (dt != kDLCPU && dt != kDLCUDA && dt != kDLCUDAHost && dt != kDLCUDAManaged)
    throw py::value_error(what + ": array on " + dlpack_device_name(t.device) +
                          "; dcalign computes on the CPU and CUDA GPUs");
  if (t.dtype.code != kDLFloat || t.dtype.lanes != 1 || (t.dtype.bits != 32 && t.dtype.bits != 64))
    throw py::value_error(what + " must be float32 or float64, got DLPack type code " +
                          std::to_string(t.dtype.code) + " with " + std::to_string(t.dtype.bits) +
                          " bits x " + std::to_string(t.dtype.lanes) + " lanes");
}

template <typename T>
py::tuple align_dlpack_typed(const DLTensor& t, const CallOptions& o) {
  const index_t c = t.shape[0], a = t.shape[1], l = t.shape[2];
  detail::check_shape(c, a, l, "anchors");
  // Element strides; none given means C order (the DLPack convention).
  index_t sc = a * l, si = l, sj = 1;
  if (t.strides) {
    sc = t.strides[0];
    si = t.strides[1];
    sj = t.strides[2];
  }
  if (sc < 0 || si < 0 || sj < 0)
    throw py::value_error("anchors: negative strides (" + std::to_string(sc) + ", " +
                          std::to_string(si) + ", " + std::to_string(sj) +
                          "); expected non-negative strides (make the array contiguous first)");
  const T* base = reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset);
  if (reinterpret_cast<std::uintptr_t>(base) % alignof(T) != 0)
    throw py::value_error("anchors: the data pointer is not aligned to its dtype");
  BackendOptions bo;
  bo.threads = o.threads;
  Device device = Device::cpu;
  if (t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged) {
    device = Device::cuda;
    bo.device_id = t.device.device_id;
    bo.cuda_stream = cuda_legacy_default_stream();  // the stream 1 the producer was given
  }
  auto backend = make_backend(device, bo);
  auto& p = backend->primitives<T>();
  const bool view = (c == 1 || sc == a * l) && (a == 1 || si == 1) && (l == 1 || sj == a);
  DlpackArray out;
  out.shape = {c, l, l};
  out.strides = {l * l, 1, l};
  out.device = t.device.device_type == kDLCUDAHost ? DLDevice{kDLCPU, 0} : t.device;
  auto G = std::make_unique<Buffer<T>>(p.allocate(c * l * l));
  AlignReport report;
  {
    py::gil_scoped_release nogil;
    Buffer<T> gathered;
    StackView<const T> A(base, c, a, l);
    if (!view) {
      gathered = p.allocate(c * a * l);
      p.gather(base, sc, si, sj, gathered.stack(c, a, l));
      A = StackView<const T>(gathered.data(), c, a, l);
    }
    report = align_resident(p, A, G->stack(c, l, l), MatrixView<T>(), o.align);
    // G complete, and the anchors no longer read, before the caller gets G and its capsule is
    // released (only this stream waits).
    p.synchronize();
  }
  if constexpr (std::is_same_v<T, double>)
    out.f64 = std::move(G);
  else
    out.f32 = std::move(G);
  return py::make_tuple(std::move(out), report.to_json(-1), !view);
}

/// (G as a _DlpackArray, report JSON, copied) for the anchors of an unused DLPack capsule.
py::tuple align_dlpack(const py::object& capsule, const std::string& method, const py::dict& kw) {
  const CallOptions o = parse_options(method, kw);
  DlpackInput in(capsule, "anchors");
  const DLTensor& t = in.m->dl_tensor;
  if (t.ndim != 3)
    throw py::value_error("anchors must be a 3-D array (c, a, l), got " + std::to_string(t.ndim) +
                          " dimensions");
  check_dlpack_device_and_dtype(t, "anchors");
  return t.dtype.bits == 64 ? align_dlpack_typed<double>(t, o) : align_dlpack_typed<float>(t, o);
}

/// The values of a float32/float64 DLPack tensor of 2 or 3 dimensions (host or GPU memory) as a
/// new host array: an (n, m) matrix Fortran-ordered, a (c, a, l) stack in dcalign's layout. GPU
/// memory is gathered into that layout on the device (stream 1, which the producer was given)
/// and copied to the host once.
template <typename T>
py::array dlpack_to_host_typed(const DLTensor& t) {
  const bool stack = t.ndim == 3;
  const index_t c = stack ? t.shape[0] : 1, r = t.shape[t.ndim - 2], cl = t.shape[t.ndim - 1];
  index_t sc = r * cl, si = cl, sj = 1;  // C order when no strides are given
  if (t.strides) {
    sc = stack ? t.strides[0] : 0;
    si = t.strides[t.ndim - 2];
    sj = t.strides[t.ndim - 1];
  }
  if (c < 0 || r < 0 || cl < 0 || sc < 0 || si < 0 || sj < 0)
    throw py::value_error("DLPack tensor with a negative extent or stride; make it contiguous");
  const T* base = reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset);
  const py::ssize_t s = sizeof(T);
  py::array_t<T> out =
      stack ? py::array_t<T>({py::ssize_t(c), py::ssize_t(r), py::ssize_t(cl)},
                             {py::ssize_t(r * cl) * s, s, py::ssize_t(r) * s})
            : py::array_t<T>({py::ssize_t(r), py::ssize_t(cl)}, {s, py::ssize_t(r) * s});
  const index_t n = c * r * cl;
  T* dst = out.mutable_data();
  const bool gpu = t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged;
  if (n > 0) {
    py::gil_scoped_release nogil;
    if (!gpu) {
      make_backend(Device::cpu)
          ->primitives<T>()
          .gather(base, sc, si, sj, StackView<T>(dst, c, r, cl));
    } else {
      BackendOptions bo;
      bo.device_id = t.device.device_id;
      bo.cuda_stream = cuda_legacy_default_stream();
      auto backend = make_backend(Device::cuda, bo);
      auto& p = backend->primitives<T>();
      Buffer<T> packed = p.allocate(n);
      p.gather(base, sc, si, sj, packed.stack(c, r, cl));
      p.to_host(packed.data(), dst, n);
      p.synchronize();
    }
  }
  return std::move(out);
}

py::array dlpack_to_host(const py::object& capsule, const std::string& what) {
  DlpackInput in(capsule, what);
  const DLTensor& t = in.m->dl_tensor;
  if (t.ndim != 2 && t.ndim != 3)
    throw py::value_error(what + ": expected a 2-D or 3-D array, got " + std::to_string(t.ndim) +
                          " dimensions");
  check_dlpack_device_and_dtype(t, what);
  return t.dtype.bits == 64 ? dlpack_to_host_typed<double>(t) : dlpack_to_host_typed<float>(t);
}

/// A host float32/float64 array of 2 or 3 dimensions copied once into CUDA device `device`'s
/// memory, as a _DlpackArray there (Fortran order / dcalign's layout); device < 0 keeps it in
/// the CPU backend's memory (how the CPU tests check the export).
template <typename T>
DlpackArray host_to_device_typed(const py::array& x0, int device) {
  const py::array x = as_dtype<T>(x0);
  const bool stack = x.ndim() == 3;
  const index_t c = stack ? x.shape(0) : 1, r = x.shape(x.ndim() - 2), cl = x.shape(x.ndim() - 1),
                n = c * r * cl;
  std::vector<T> host(static_cast<size_t>(n));
  copy_to_dc<T>(x, host.data());
  DlpackArray out;
  out.shape = stack ? std::vector<std::int64_t>{c, r, cl} : std::vector<std::int64_t>{r, cl};
  out.strides = stack ? std::vector<std::int64_t>{r * cl, 1, r} : std::vector<std::int64_t>{1, r};
  BackendOptions bo;
  if (device >= 0) {
    bo.device_id = device;
    bo.cuda_stream = cuda_legacy_default_stream();
    out.device = DLDevice{kDLCUDA, device};
  }
  auto backend = make_backend(device >= 0 ? Device::cuda : Device::cpu, bo);
  auto& p = backend->primitives<T>();
  auto buffer = std::make_unique<Buffer<T>>(p.allocate(n));
  {
    py::gil_scoped_release nogil;
    p.to_device(host.data(), buffer->data(), n);
    p.synchronize();
  }
  if constexpr (std::is_same_v<T, double>)
    out.f64 = std::move(buffer);
  else
    out.f32 = std::move(buffer);
  return out;
}

DlpackArray host_to_device(const py::array& x, int device) {
  if (x.ndim() != 2 && x.ndim() != 3)
    throw py::value_error("expected a 2-D or 3-D array, got " + std::to_string(x.ndim()) +
                          " dimensions");
  if (py::isinstance<py::array_t<float>>(x)) return host_to_device_typed<float>(x, device);
  return host_to_device_typed<double>(x, device);
}

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

  m.def("_align_f64", &align_impl<double>);
  m.def("_align_f32", &align_impl<float>);
  m.def("_align_dlpack", &align_dlpack);
  m.def("_dlpack_to_host", &dlpack_to_host);
  m.def("_host_to_device", &host_to_device);
  py::class_<DlpackArray>(m, "_DlpackArray",
                          "An alignment result in a backend's memory (a GPU's, or the host's), "
                          "handed to the caller's from_dlpack once, without a copy.")
      .def(
          "__dlpack__",
          [](DlpackArray& a, const py::object& stream, const py::kwargs&) {
            // The result is complete when align returns (its stream was synchronised), so a
            // consumer's stream needs no wait.
            (void)stream;
            return export_dlpack(a);
          },
          py::arg("stream") = py::none())
      .def("__dlpack_device__",
           [](const DlpackArray& a) {
             return py::make_tuple(static_cast<int>(a.device.device_type), a.device.device_id);
           })
      .def_property_readonly("shape", [](const DlpackArray& a) {
        return py::make_tuple(a.shape[0], a.shape[1], a.shape[2]);
      });
#if DCALIGN_HAVE_CUDA
  m.attr("_built_with_cuda") = true;
#else
  m.attr("_built_with_cuda") = false;
#endif
  m.def("_dc_layout_f64", &dc_layout<double>);
  m.def("_dc_layout_f32", &dc_layout<float>);
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
  // The option schema and the method table, from which dcalign.options(), align()'s docstring
  // and the method list of the Python API are generated.
  m.def("_option_schema_json", &option_schema_json);
  m.def("_method_names", &method_names);
  m.def("_model_precision", [](const std::string& dir) { return read_model_info(dir).precision; });
  m.def("_throw_for_test", &throw_for_test);
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
  m.def("_communication", &communication_impl);
  m.def("_paired_t_test", &paired_t_impl);
  m.def("_one_way_anova", &one_way_impl);
  m.def("_two_way_anova", &two_way_impl);
  m.def("_analytic_gaussian", &analytic_gaussian_impl);
  m.def("_dr_privacy", &dr_privacy_impl);
  m.def("_reconstruction_error", &reconstruction_error_impl);
  bind_aligner<double>(m, "_AlignerF64");
  bind_aligner<float>(m, "_AlignerF32");
}
