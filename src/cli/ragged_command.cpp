// `dcalign align-ragged`: users with different latent dimensions l_i (align_ragged,
// include/dcalign/align.hpp). One NPY file per user in and out:
//   dcalign align-ragged --method imakura --dim 20 --anchor A_0.npy --anchor A_1.npy ...
//                        --out G_0.npy --out G_1.npy ... [--target-out Z.npy] [--report r.json]
// A_i is a x l_i; G_i (l_i x dim) goes to the i-th --out. Every output is written under a
// temporary name and renamed into place only when the whole run has succeeded.
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/align.hpp"
#include "dcalign/npy.hpp"
#include "io/staged_outputs.hpp"

namespace dcalign::cli {
namespace {

struct RaggedArgs {
  std::string method = "imakura", right = "identity", svd = "gram", kawakami_form = "qr-svd";
  std::string precision = "float64", device = "cpu", report, target_out;
  std::vector<std::string> anchors, outs;
  long long dim = 0;
  std::uint64_t seed = 0;
};

template <typename T>
void run_ragged(const RaggedArgs& a, const CLI::App& cmd) {
  if (a.anchors.size() != a.outs.size())
    throw UsageError("--anchor was given " + std::to_string(a.anchors.size()) +
                     " times and --out " + std::to_string(a.outs.size()) +
                     " times: expected one --out per --anchor");
  const Method method = parse_method(a.method);
  refuse_unused(cmd, "--right", method == Method::imakura,
                "by method " + a.method + " (only imakura)");
  refuse_unused(cmd, "--target-out", method == Method::imakura,
                "by method " + a.method + " (only imakura has a target)");
  refuse_unused(cmd, "--kawakami-form", method == Method::kawakami,
                "by method " + a.method + " (only kawakami)");
  io::StagedOutputs outputs;
  for (const auto& p : a.anchors) outputs.protect(p, "--anchor");
  std::vector<std::string> tmp;
  for (const auto& p : a.outs) tmp.push_back(outputs.stage(p, "--out"));
  const std::string target_tmp =
      a.target_out.empty() ? std::string() : outputs.stage(a.target_out, "--target-out");
  const std::string report_tmp =
      a.report.empty() ? std::string() : outputs.stage(a.report, "--report");
  AlignOptions opts;
  opts.method = method;
  opts.seed = a.seed;
  opts.right = parse_right_factor(a.right);
  opts.svd.algorithm = parse_svd_algorithm(a.svd);
  opts.kawakami_form = parse_kawakami_form(a.kawakami_form);
  std::vector<Matrix<T>> anchors;
  for (const auto& p : a.anchors) anchors.push_back(read_npy_matrix<T>(p));
  auto backend = make_backend(parse_device(a.device));
  const auto res = align_ragged(anchors, static_cast<index_t>(a.dim), opts, *backend);
  for (std::size_t i = 0; i < tmp.size(); ++i) write_npy<T>(tmp[i], res.G[i].view());
  if (!target_tmp.empty()) write_npy<T>(target_tmp, res.target.view());
  if (!report_tmp.empty()) write_report(report_tmp, a.report, res.report);
  outputs.commit();
  std::cerr << "dcalign: " << res.report.method << " aligned " << res.report.users
            << " users of different dimensions (a = " << res.report.anchor_rows
            << ", dim = " << res.report.dim << "); objective " << res.report.objective << "\n";
}

}  // namespace

void add_ragged_command(CLI::App& app) {
  static RaggedArgs args;
  auto* cmd = app.add_subcommand(
      "align-ragged", "Align users of different latent dimensions l_i (imakura, kawakami)");
  add_choice(cmd, "--method", args.method, "imakura | kawakami (the others need one l)",
             [](const std::string& v) { (void)parse_method(v); });
  cmd->add_option("--anchor", args.anchors, "a user's A_i (a x l_i NPY); once per user, in order")
      ->required();
  cmd->add_option("--out", args.outs, "a user's G_i (l_i x dim NPY); once per --anchor, in order")
      ->required();
  add_integer(cmd, "--dim", args.dim, 1, 1LL << 31, "the common dimension")->required();
  add_path(cmd, "--target-out", args.target_out, "imakura: write the target Z (a x dim) here");
  add_path(cmd, "--report", args.report, "write the JSON report here");
  add_unsigned(cmd, "--seed", args.seed, "seed of Imakura's uniform R and randomized SVD");
  add_right_factor(cmd, args.right);
  add_svd_algorithm(cmd, args.svd, "gram | exact | randomized");
  add_kawakami_form(cmd, args.kawakami_form);
  add_precision(cmd, args.precision);
  cmd->add_option("--device", args.device, "cpu | cuda")
      ->capture_default_str()
      ->check(device_names());
  for (auto* o : cmd->get_options())
    if (o->get_name() == "--anchor" || o->get_name() == "--out")
      o->each([](const std::string& v) {
        if (v.empty()) throw UsageError("an empty path was given");
      });
  cmd->callback([cmd] {
    if (is_float32(args.precision))
      run_ragged<float>(args, *cmd);
    else
      run_ragged<double>(args, *cmd);
  });
}

}  // namespace dcalign::cli
