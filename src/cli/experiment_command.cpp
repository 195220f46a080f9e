// `dcalign experiment FILE`: runs a TOML experiment and writes JSON, CSV and a Markdown table.
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/experiment.hpp"

namespace dcalign::cli {

// The most trials `--trials` accepts (the config's `trials` key has the same bound).
constexpr long long kMaxTrials = 1000000;

void add_experiment_command(CLI::App& app) {
  struct Args {
    std::string file, out_dir = "experiments/results", data_dir, device;
    long long trials = 0;
    bool check = false;
  };
  static Args args;
  auto* cmd = app.add_subcommand("experiment", kExperimentDescription);
  add_path(cmd, "file", args.file, "experiment file (see experiments/)")->required();
  add_path(cmd, "--out", args.out_dir, "directory for the JSON, CSV and Markdown results");
  add_path(cmd, "--data-dir", args.data_dir,
           "dataset folder (default: $DCALIGN_DATA, then ../shared/datasets)");
  add_integer(cmd, "--trials", args.trials, 1, kMaxTrials,
              "override the number of trials (1 to 10^6)");
  cmd->add_option("--device", args.device, "override the device (cpu | cuda)")
      ->check(device_names());
  cmd->add_flag("--check", args.check,
                "only check the file: keys, dataset, sizes and every sweep point; no trial runs");
  cmd->callback([cmd] {
    // Only options the user gave are checked (and applied): an explicit --trials must be a
    // usable count, never ignored.
    experiment::Config cfg = experiment::load_config(args.file);
    if (!args.data_dir.empty()) cfg.data_dir = args.data_dir;
    if (cmd->count("--trials")) cfg.trials = args.trials;
    if (!args.device.empty()) cfg.device = args.device;
    if (args.check) {
      const auto points = experiment::check(cfg);
      std::cout << "dcalign: " << args.file << " is valid: " << points << " point(s) of "
                << cfg.trials << " trial(s)\n";
      return;
    }
    experiment::check_output_directory(args.out_dir, cfg.name, "--out");
    auto result = experiment::run(
        cfg, [](const std::string& msg) { std::cerr << "dcalign: " << msg << std::endl; });
    experiment::write_outputs(result, args.out_dir);
    std::cout << experiment::summary_table(result);
    std::cout << "wall time " << result.wall_seconds << " s; results in " << args.out_dir << "/"
              << cfg.name << ".{json,csv,md}\n";
  });
}

}  // namespace dcalign::cli
