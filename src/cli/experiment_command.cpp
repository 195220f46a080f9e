// `dcalign experiment FILE`: runs a TOML experiment and writes JSON, CSV and a Markdown table.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/experiment.hpp"
#include "io/staged_outputs.hpp"

namespace dcalign::cli {

// The results' directory, checked before the first trial (a long run must not end unable to
// write): created if missing, writable (a probe file is created and removed), and the three
// result paths replaceable. Errors give the OS's reason.
void check_output_directory(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw IoError("--out '" + dir + "': cannot create the results directory (" + ec.message() +
                  ")");
  if (!fs::is_directory(dir, ec))
    throw IoError("--out '" + dir + "' is not a directory; expected a directory for the results");
  const std::string probe =
      (fs::path(dir) / (".dcalign-probe.tmp." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw IoError("--out '" + dir + "': cannot write the results there (" + std::strerror(errno) +
                  "); checked before the first trial");
  ::close(fd);
  ::unlink(probe.c_str());
  for (const char* ext : {".json", ".csv", ".md"})
    io::check_replaceable_file((fs::path(dir) / (name + ext)).string(), "experiment output");
}

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
    check_output_directory(args.out_dir, cfg.name);
    auto result = experiment::run(
        cfg, [](const std::string& msg) { std::cerr << "dcalign: " << msg << std::endl; });
    experiment::write_outputs(result, args.out_dir);
    std::cout << experiment::summary_table(result);
    std::cout << "wall time " << result.wall_seconds << " s; results in " << args.out_dir << "/"
              << cfg.name << ".{json,csv,md}\n";
  });
}

}  // namespace dcalign::cli
