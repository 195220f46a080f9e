// dcalign enroll: aligns users who join after the fit against a saved model (written by
// `dcalign align --model-out M` or Aligner::save), without touching the users of the fit.
//   dcalign enroll --model M --anchors A_new.npy --out G_new.npy [--report R.json]
// A_new.npy is (a, l) for one new user, giving G_new.npy of shape (l, l), or (k, a, l) for k new
// users, giving (k, l, l). The computation runs in the model's precision (A_new is converted).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>

#include "cli/commands.hpp"
#include "dcalign/aligner.hpp"
#include "dcalign/npy.hpp"
#include "io/staged_outputs.hpp"

namespace dcalign::cli {
namespace {

struct EnrollArgs {
  std::string model, anchors, out, report;
  std::string device = "cpu";
  int threads = 0;
};

template <typename T>
void run(const EnrollArgs& a) {
  // As for align: outputs are renamed into place only once the whole run has succeeded.
  io::StagedOutputs outputs;
  outputs.protect(a.model, "--model", true);
  outputs.protect(a.anchors, "--anchors");
  const std::string out_tmp = outputs.stage(a.out, "--out");
  const std::string report_tmp =
      a.report.empty() ? std::string() : outputs.stage(a.report, "--report");
  const Aligner<T> model = Aligner<T>::load(a.model);
  BackendOptions bo;
  bo.threads = a.threads;
  auto backend = make_backend(parse_device(a.device), bo);
  const NpyHeader h = read_npy_header(a.anchors);
  EnrolmentReport report;
  if (h.shape.size() == 2) {
    const Enrolment<T> e = model.enroll(read_npy_matrix<T>(a.anchors), *backend);
    write_npy<T>(out_tmp, e.G.view());
    report = e.report;
  } else if (h.shape.size() == 3) {
    const BatchEnrolment<T> e = model.enroll(read_npy_stack<T>(a.anchors), *backend);
    write_npy<T>(out_tmp, e.G.view());
    report = e.report;
  } else {
    throw InvalidInput("--anchors '" + a.anchors + "' is a " + std::to_string(h.shape.size()) +
                       "-D array; expected (a, l) for one new user or (k, a, l) for k new users");
  }
  if (!a.report.empty()) write_report(report_tmp, a.report, report);
  outputs.commit();
  double worst = 0;
  for (double r : report.relative_residual) worst = std::max(worst, r);
  std::cerr << "dcalign: enrolled " << report.users << " user(s) against the " << report.method
            << " model of " << report.fitted_users << " users (a = " << report.anchor_rows
            << ", l = " << report.dim << ") in " << report.total_seconds
            << " s; largest relative residual " << worst << "\n";
}

}  // namespace

void add_enroll_command(CLI::App& app) {
  static EnrollArgs args;
  auto* cmd = app.add_subcommand(
      "enroll", "Align users who join later against a saved model (dcalign align --model-out)");
  add_path(cmd, "--model", args.model, "model directory written by dcalign align --model-out")
      ->required();
  add_path(cmd, "--anchors", args.anchors,
           "NPY array A_new of shape (a, l), or (k, a, l) for k new users")
      ->required();
  add_path(cmd, "--out", args.out, "output NPY: G_new (l, l), or (k, l, l)")->required();
  add_path(cmd, "--report", args.report, "write the JSON enrolment report here");
  cmd->add_option("--device", args.device, "cpu | cuda")
      ->capture_default_str()
      ->check(device_names());
  // The range (0 to 4 x the hardware threads) is check_threads'.
  add_integer(cmd, "--threads", args.threads, std::numeric_limits<int>::min(),
              std::numeric_limits<int>::max(), "CPU threads over users (0: all)");
  cmd->callback([] {
    check_threads(args.threads);
    // The model's precision decides T; read_model_info validates model.json first.
    if (read_model_info(args.model).precision == "float32")
      run<float>(args);
    else
      run<double>(args);
  });
}

}  // namespace dcalign::cli
