// `dcalign experiment FILE`: runs a TOML experiment and writes JSON, CSV and a Markdown table.
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/experiment.hpp"

namespace dcalign::cli {

void add_experiment_command(CLI::App& app) {
  struct Args {
    std::string file, out_dir = "experiments/results", data_dir, device;
    long long trials = 0;
    bool check = false;
  };
  static Args args;
  auto* cmd = app.add_subcommand("experiment", kExperimentDescription);
  cmd->add_option("file", args.file, "experiment file (see experiments/)")->required();
  cmd->add_option("--out", args.out_dir, "directory for the JSON, CSV and Markdown results")
      ->capture_default_str();
  cmd->add_option("--data-dir", args.data_dir,
                  "dataset folder (default: $DCALIGN_DATA, then ../shared/datasets)");
  cmd->add_option("--trials", args.trials, "override the number of trials (>= 1)");
  cmd->add_option("--device", args.device, "override the device (cpu | cuda)")
      ->check(device_names());
  cmd->add_flag("--check", args.check,
                "only check the file: keys, dataset, sizes and every sweep point; no trial runs");
  cmd->callback([cmd] {
    // Only options the user gave are checked (and applied): an explicit --trials must be a
    // usable count, never ignored.
    if (cmd->count("--trials") && args.trials < 1)
      out_of_range("--trials", std::to_string(args.trials), ">= 1");
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
    std::filesystem::create_directories(args.out_dir);
    auto result = experiment::run(
        cfg, [](const std::string& msg) { std::cerr << "dcalign: " << msg << std::endl; });
    experiment::write_outputs(result, args.out_dir);
    std::cout << experiment::summary_table(result);
    std::cout << "wall time " << result.wall_seconds << " s; results in " << args.out_dir << "/"
              << cfg.name << ".{json,csv,md}\n";
  });
}

}  // namespace dcalign::cli
