#include <chrono>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/align.hpp"
#include "dcalign/aligner.hpp"
#include "dcalign/npy.hpp"

namespace dcalign::cli {
namespace {

AlignOptions make_options(const AlignArgs& a) {
  AlignOptions o;
  o.method = parse_method(a.method);
  o.seed = a.seed;
  o.reference_user = a.reference_user;
  o.rotation = parse_target_rotation(a.target_rotation);
  if (!a.rotation_in.empty()) {
    o.rotation = TargetRotation::supplied;
    o.rotation_matrix = read_npy_matrix<double>(a.rotation_in);
  }
  if (!a.target_in.empty()) o.target = read_npy_matrix<double>(a.target_in);
  o.right = parse_right_factor(a.right);
  o.svd.algorithm = a.svd == "randomized" ? SvdAlgorithm::randomized : SvdAlgorithm::exact;
  if (a.svd != "randomized" && a.svd != "exact")
    throw InvalidInput("unknown --svd '" + a.svd + "'; expected exact or randomized");
  o.svd.oversampling = a.oversampling;
  o.svd.power_iterations = a.power_iterations;
  o.svd.seed = a.seed ^ 0x5eedULL;
  o.kawakami_form = parse_kawakami_form(a.kawakami_form);
  o.gopp_init = parse_gopp_init(a.gopp_init);
  o.polar = parse_polar_method(a.polar);
  o.gopp_tolerance = a.gopp_tolerance;
  o.gopp_max_iterations = a.gopp_max_iterations;
  o.evaluate = !a.no_evaluate;
  o.evaluate_consensus = a.consensus;
  return o;
}

template <typename T>
void run(const AlignArgs& a) {
  const AlignOptions opts = make_options(a);
  BackendOptions bo;
  bo.threads = a.threads;
  auto backend = make_backend(parse_device(a.device), bo);
  const auto t0 = std::chrono::steady_clock::now();
  Stack<T> anchors = read_npy_stack<T>(a.anchors);
  const double read_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // With --model-out the same alignment goes through an Aligner, which keeps its target.
  Aligner<T> model;
  Alignment<T> res =
      a.model_out.empty() ? align(anchors, opts, *backend) : model.fit(anchors, opts, *backend);
  write_npy<T>(a.out, res.G.view());
  if (!a.target_out.empty()) {
    if (res.target.size() == 0)
      throw InvalidInput("--target-out: method " + a.method + " has no target matrix");
    write_npy<T>(a.target_out, res.target.view());
  }
  if (!a.model_out.empty()) model.save(a.model_out);
  if (!a.report.empty()) {
    std::ofstream f(a.report);
    if (!f) throw IoError("cannot write the report to '" + a.report + "'");
    f << res.report.to_json() << "\n";
    if (!f) throw IoError("writing the report to '" + a.report + "' failed");
  }
  std::cerr << "dcalign: " << res.report.method << " aligned " << res.report.users
            << " users (a = " << res.report.anchor_rows << ", l = " << res.report.dim << ") in "
            << res.report.total_seconds << " s (read " << read_s << " s); objective "
            << res.report.objective << ", orthogonality error " << res.report.orthogonality_error
            << "\n";
}

}  // namespace

void add_align_command(CLI::App& app, AlignArgs& args) {
  auto* cmd = app.add_subcommand("align", "Compute change-of-basis matrices G_i from anchors");
  cmd->add_option("--method", args.method, "odc | imakura | kawakami | gopp")
      ->capture_default_str();
  cmd->add_option("--anchors", args.anchors, "NPY array of shape (c, a, l); slice i is A_i")
      ->required();
  cmd->add_option("--out", args.out, "output NPY array of shape (c, l, l); slice i is G_i")
      ->required();
  cmd->add_option("--report", args.report, "write the JSON report here");
  cmd->add_option("--target-out", args.target_out, "write the target Z (a x l) here");
  cmd->add_option("--model-out", args.model_out,
                  "save the fitted model to this directory, for dcalign enroll");
  cmd->add_option("--target", args.target_in, "ODC: align to this a x l target (NPY)");
  cmd->add_option("--rotation", args.rotation_in, "ODC: use this l x l orthogonal O (NPY)");
  cmd->add_option("--seed", args.seed, "seed for O, R and randomized SVD")->capture_default_str();
  cmd->add_option("--target-rotation", args.target_rotation, "ODC's O: haar | identity")
      ->capture_default_str();
  cmd->add_option("--right", args.right, "Imakura's R: identity | uniform")->capture_default_str();
  cmd->add_option("--reference-user", args.reference_user, "ODC reference user r (0-based)")
      ->capture_default_str();
  cmd->add_option("--device", args.device, "cpu | cuda")->capture_default_str();
  cmd->add_option("--precision", args.precision, "float64 | float32")->capture_default_str();
  cmd->add_option("--svd", args.svd, "exact | randomized (Imakura, Kawakami, GOPP start)")
      ->capture_default_str();
  cmd->add_option("--oversampling", args.oversampling, "randomized SVD oversampling")
      ->capture_default_str();
  cmd->add_option("--power-iterations", args.power_iterations, "randomized SVD power iterations")
      ->capture_default_str();
  cmd->add_option("--kawakami-form", args.kawakami_form, "qr-svd | eigen")->capture_default_str();
  cmd->add_option("--polar", args.polar,
                  "ODC/GOPP polar factors: auto | svd (one SVD per user) | iterative (batched "
                  "Newton)")
      ->capture_default_str();
  cmd->add_option("--gopp-init", args.gopp_init, "spectral | odc")->capture_default_str();
  cmd->add_option("--gopp-tolerance", args.gopp_tolerance, "relative objective decrease to stop")
      ->capture_default_str();
  cmd->add_option("--gopp-max-iterations", args.gopp_max_iterations, "GOPP iteration cap")
      ->capture_default_str();
  cmd->add_option("--threads", args.threads, "CPU threads over users (0: all)")
      ->capture_default_str();
  cmd->add_flag("--no-evaluate", args.no_evaluate, "skip objective/orthogonality evaluation");
  cmd->add_flag("--consensus", args.consensus,
                "also compute the consensus objective (one more product over all anchors)");
  cmd->callback([&args] {
    if (args.precision == "float64" || args.precision == "double")
      run<double>(args);
    else if (args.precision == "float32" || args.precision == "float")
      run<float>(args);
    else
      throw InvalidInput("unknown --precision '" + args.precision +
                         "'; expected float64 or float32");
  });
}

}  // namespace dcalign::cli
