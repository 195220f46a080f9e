// dcalign._experiment: experiment configs run from Python, as `dcalign experiment` runs them.
// Built only where the learning layer is (pip install . with DCALIGN_WITH_LEARN=ON: LibTorch,
// LIBSVM, XGBoost, toml++); dcalign.run_experiment imports it on first use, so `import dcalign`
// never loads LibTorch. The run releases the GIL; progress messages go to a Python callable
// with the GIL held.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>

#include <string>

#include "dcalign/experiment.hpp"
#include "errors.hpp"

namespace py = pybind11;
using namespace dcalign;

namespace {

// The config file with the overrides of the command's options (empty / 0: the file's value).
experiment::Config configure(const std::string& path, const std::string& data_dir, long long trials,
                             const std::string& device) {
  experiment::Config cfg = experiment::load_config(path);
  if (!data_dir.empty()) cfg.data_dir = data_dir;
  if (trials > 0) cfg.trials = trials;
  if (!device.empty()) cfg.device = device;
  return cfg;
}

// (result_json, summary table). `out` non-empty: the three files written there, atomically.
py::tuple run(const std::string& path, const std::string& data_dir, long long trials,
              const std::string& device, const std::string& out,
              const std::function<void(const std::string&)>& progress) {
  const experiment::Config cfg = configure(path, data_dir, trials, device);
  if (!out.empty()) experiment::check_output_directory(out, cfg.name, "out");
  experiment::Progress report;
  if (progress)
    report = [&progress](const std::string& msg) {
      py::gil_scoped_acquire gil;
      progress(msg);
    };
  std::string json, summary;
  {
    py::gil_scoped_release nogil;
    const experiment::Result result = experiment::run(cfg, report);
    if (!out.empty()) experiment::write_outputs(result, out);
    json = experiment::result_json(result);
    summary = experiment::summary_table(result);
  }
  return py::make_tuple(json, summary);
}

// The number of sweep points of a valid config (`dcalign experiment --check`).
std::size_t check(const std::string& path, const std::string& data_dir, long long trials,
                  const std::string& device) {
  const experiment::Config cfg = configure(path, data_dir, trials, device);
  py::gil_scoped_release nogil;
  return experiment::check(cfg);
}

}  // namespace

PYBIND11_MODULE(_experiment, m) {
  m.doc() = "dcalign's experiment runner; use dcalign.run_experiment.";
  py::object numerical = py::module_::import("dcalign._core").attr("NumericalError");
  python::register_error_translation(numerical.ptr());
  m.def("_run", &run);
  m.def("_check", &check);
}
