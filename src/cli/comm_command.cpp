// `dcalign comm`: paper 001's communication model (eqs. 10-18) for the options given, as a table
// and optionally as JSON. The defaults are the paper's worked example (section 2.3).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "dcalign/comm.hpp"
#include "dcalign/error.hpp"
#include "io/staged_outputs.hpp"

namespace dcalign::cli {
namespace {

struct CommArgs {
  CommModel model;
  double gamma = 0;
  double dc_parameters = 0, fl_parameters = 0;  // the per-protocol N, when given
  double bandwidth = 0, rtt = 0;
  std::string json;
};

void print_row(const char* what, double bytes) {
  std::printf("%-44s %14.6g %12.6g %12.6g\n", what, bytes, to_gb(bytes), to_gib(bytes));
}

void print_table(const CommModel& m, const CommEstimate& e, const std::optional<TransferTimes>& t,
                 double bandwidth, double rtt) {
  std::printf(
      "dcalign comm: paper 001's communication model (eqs. 10-18)\n"
      "c = %lld users, n = %.6g samples per user (mean%s), a = %lld anchor rows, m = %lld "
      "features, l = %lld, N_DC = %.6g and N_FL = %.6g parameters%s, q = %.6g bits, "
      "gamma = %.6g, p = %.6g, R = %.6g\n\n",
      static_cast<long long>(m.users), e.mean_samples, m.samples.empty() ? "" : " of --samples",
      static_cast<long long>(m.anchor_rows), static_cast<long long>(m.features),
      static_cast<long long>(m.dim), e.dc_model_parameters, e.fl_model_parameters,
      e.dc_model_parameters == e.fl_model_parameters ? " (one N)" : "", m.bits, e.gamma,
      m.participation, m.rounds);
  std::printf("%-44s %14s %12s %12s\n", "quantity", "bytes", "GB (1e9)", "GiB (2^30)");
  print_row("DC uplink per user, (n + a) l q/8 (10)", e.uplink_bytes_per_user);
  if (!m.samples.empty()) print_row("DC uplink of the largest user (10)", e.uplink_bytes_max_user);
  print_row("DC uplink, all users", e.uplink_bytes);
  print_row("DC downlink per user, (l^2 + N_DC) q/8 (11)", e.downlink_bytes_per_user);
  print_row("DC downlink, all users", e.downlink_bytes);
  print_row("raw anchor, a m q/8 (12)", e.anchor_bytes);
  print_row("anchor distribution, gamma a m q/8 (13)", e.anchor_distribution_bytes);
  print_row("B_DC, total (14)", e.dc_bytes);
  print_row("B_FL per round, 2 p c N_FL q/8 (15)", e.fl_bytes_per_round);
  print_row("B_FL, R rounds (15)", e.fl_bytes);
  std::printf("\nbreak-even R* (16) = %.6g: DC sends less once R >= ceil(R*) = %.0f\n",
              e.break_even_rounds, e.break_even_rounds_ceil);
  std::printf("at R = %.6g: B_DC / B_FL = %.6g, %s\n", m.rounds,
              e.fl_bytes > 0 ? e.dc_bytes / e.fl_bytes : 0.0,
              e.dc_sends_less ? "DC sends less" : "FL sends less");
  if (t) {
    std::printf("\ntransfer time (18), beta = %.6g bit/s, tau = %.6g s    %14s %14s\n", bandwidth,
                rtt, "aggregate s", "per client s");
    std::printf("%-57s %14.6g %14.6g\n", "DC, 8 B_DC / beta + 3 tau", t->dc_seconds,
                t->dc_client_seconds);
    std::printf("%-57s %14.6g %14.6g\n", "FL, 8 B_FL / beta + 2 R tau", t->fl_seconds,
                t->fl_client_seconds);
  }
}

// A model size is a count of parameters: finite and >= 1, named by the option that gave it.
void check_parameters(const char* option, double v, const char* quantity) {
  if (std::isfinite(v) && v >= 1) return;
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", v);
  throw UsageError(std::string(option) + " " + text +
                   " is out of range: expected a finite number >= 1 (" + quantity + ")");
}

// -N gives both protocols' model size; --dc-model-parameters and --fl-model-parameters override
// it for one protocol each. -N with both overrides would apply to nothing: refused.
void set_model_parameters(CommArgs& args, const CLI::App& cmd) {
  const bool both = cmd.count("--model-parameters") > 0,
             dc = cmd.count("--dc-model-parameters") > 0,
             fl = cmd.count("--fl-model-parameters") > 0;
  if (both && dc && fl)
    throw UsageError(
        "--model-parameters sets no protocol's model when --dc-model-parameters and "
        "--fl-model-parameters are both given: drop it, or one of the two");
  CommModel& m = args.model;
  if (both) check_parameters("--model-parameters", m.model_parameters, "model_parameters N");
  if (dc) {
    check_parameters("--dc-model-parameters", args.dc_parameters, "dc_model_parameters N_DC");
    m.dc_model_parameters = args.dc_parameters;
  }
  if (fl) {
    check_parameters("--fl-model-parameters", args.fl_parameters, "fl_model_parameters N_FL");
    m.fl_model_parameters = args.fl_parameters;
  }
}

void run_comm(CommArgs& args, const CLI::App& cmd) {
  if (cmd.count("--samples") > 0 && cmd.count("--mean-samples") > 0)
    throw UsageError("--samples and --mean-samples both give n: use one of them");
  if (cmd.count("--rtt") > 0 && cmd.count("--bandwidth") == 0)
    throw UsageError("--rtt needs --bandwidth (the transfer times need both)");
  CommModel& m = args.model;
  // One --samples entry per user: the list gives c unless --users says otherwise (then both
  // must agree, which validate() checks).
  if (cmd.count("--samples") > 0 && cmd.count("--users") == 0)
    m.users = static_cast<std::int64_t>(m.samples.size());
  if (cmd.count("--gamma") > 0) m.gamma = args.gamma;
  set_model_parameters(args, cmd);
  const bool timed = cmd.count("--bandwidth") > 0;
  CommEstimate e;
  std::optional<TransferTimes> t;
  try {
    e = estimate_communication(m);
    if (timed) t = estimate_transfer_times(m, args.bandwidth, args.rtt);
  } catch (const InvalidInput& err) {
    // Every input of the model is an option of this command: a bad value is a usage error.
    throw UsageError(err.what());
  }
  io::StagedOutputs outputs;
  if (!args.json.empty()) {
    const std::string tmp = outputs.stage(args.json, "--json");
    std::ofstream f(tmp);
    if (!f) throw IoError("cannot write the JSON to '" + args.json + "'");
    f << communication_json(m, e, t, args.bandwidth, args.rtt) << "\n";
    f.close();
    if (!f) throw IoError("writing the JSON to '" + args.json + "' failed");
  }
  outputs.commit();
  print_table(m, e, t, args.bandwidth, args.rtt);
}

}  // namespace

void add_comm_command(CLI::App& app) {
  static CommArgs args;
  auto* cmd = app.add_subcommand(
      "comm", "Bytes and times of DC against federated learning (paper 001 eqs. 10-18)");
  CommModel& m = args.model;
  // Parsed strictly over the valid range of each count (the model's validate says the same
  // with the quantities' names), so that a value past int64 names that range, not the type's.
  constexpr long long kMin = 0;
  constexpr long long kMax = std::numeric_limits<std::int64_t>::max();
  add_integer(cmd, "-c,--users", m.users, 1, kMax, "number of users c (1 to 2^63 - 1)");
  add_real(cmd, "-n,--mean-samples", m.mean_samples, "mean samples per user n");
  cmd->add_option("--samples", m.samples, "samples n_i of each user, comma-separated")
      ->delimiter(',');
  add_integer(cmd, "-a,--anchor-rows", m.anchor_rows, kMin, kMax, "anchor rows a");
  add_integer(cmd, "-m,--features", m.features, kMin, kMax, "input dimension m");
  add_integer(cmd, "-l,--dim", m.dim, kMin, kMax, "latent dimension l");
  add_real(cmd, "-N,--model-parameters", m.model_parameters,
           "parameters N of the downstream model, for both protocols");
  add_real(cmd, "--dc-model-parameters", args.dc_parameters,
           "parameters N_DC of DC's model h on the l aligned features (eqs. 11, 14; default N)")
      ->default_str("N");
  add_real(cmd, "--fl-model-parameters", args.fl_parameters,
           "parameters N_FL of FL's model on the m raw features (eq. 15; default N)")
      ->default_str("N");
  add_real(cmd, "-q,--bits", m.bits, "bits per scalar q (32: FP32, 16: FP16)");
  add_real(cmd, "--gamma", args.gamma,
           "anchor replication factor (default c: unicast; 0: public or seeded anchor)");
  add_real(cmd, "-p,--participation", m.participation, "FL participation fraction p in (0, 1]");
  add_real(cmd, "-R,--rounds", m.rounds, "FL rounds R");
  add_real(cmd, "--bandwidth", args.bandwidth,
           "bottleneck goodput beta in bits/s (prints the transfer times)");
  add_real(cmd, "--rtt", args.rtt, "round-trip time tau in s (default 0; needs --bandwidth)");
  add_path(cmd, "--json", args.json, "also write the results to this JSON file");
  cmd->callback([cmd] { run_comm(args, *cmd); });
}

}  // namespace dcalign::cli
