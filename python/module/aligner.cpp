// Aligner (fit, enroll, save, load) and the error-translation test hook.
#include "module/module.hpp"

#include <stdexcept>

#include "dcalign/aligner.hpp"

using namespace dcalign;

namespace dcalign::pymodule {
namespace {

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

}  // namespace

void bind_aligners(py::module_& m) {
  bind_aligner<double>(m, "_AlignerF64");
  bind_aligner<float>(m, "_AlignerF32");
  m.def("_model_precision", [](const std::string& dir) { return read_model_info(dir).precision; });
  m.def("_throw_for_test", &throw_for_test);
}

}  // namespace dcalign::pymodule
