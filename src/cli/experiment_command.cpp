// `dcalign experiment FILE`: runs a TOML experiment and writes JSON, CSV and a Markdown table.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#ifdef DCALIGN_EXPERIMENT_MPI
#include "cli/experiment_mpi.hpp"
#endif
#include "dcalign/experiment.hpp"

namespace dcalign::cli {

// The most trials `--trials` accepts (the config's `trials` key has the same bound).
constexpr long long kMaxTrials = 1000000;

namespace {

// Where the run stands: on a terminal one line redrawn in place with a bar, else a plain line
// per finished trial (for logs).
class ProgressView {
 public:
  ProgressView() : tty_(::isatty(STDERR_FILENO) == 1) {}
  void message(const std::string& m) {
    clear();
    std::cerr << "dcalign: " << m << std::endl;
    redraw();
  }
  void trial(const experiment::ProgressReport& p) {
    const std::string text = experiment::progress_line(p);
    if (!tty_) {
      std::cerr << "dcalign: " << text << std::endl;
      return;
    }
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * p.done / std::max<std::size_t>(1, p.total));
    line_ = "[" + std::string(static_cast<size_t>(filled), '#') +
            std::string(static_cast<size_t>(kWidth - filled), '.') + "] " + text;
    redraw();
  }
  void finish() {
    if (tty_ && !line_.empty()) std::cerr << std::endl;
    line_.clear();
  }

 private:
  void clear() {
    if (tty_ && !line_.empty()) std::cerr << "\r\033[K";
  }
  void redraw() {
    if (tty_ && !line_.empty()) std::cerr << "\r\033[K" << line_ << std::flush;
  }
  bool tty_;
  std::string line_;
};

}  // namespace

void add_experiment_command(CLI::App& app) {
  struct Args {
    std::string file, out_dir = "experiments/results", data_dir, device;
    long long trials = 0;
    int threads = 0;
    bool check = false, resume = false, restart = false, distributed = false;
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
  add_integer(cmd, "--threads", args.threads, 0, max_threads(),
              "override the threads in all (0: the hardware threads; at most 4 x them); trials "
              "and models run "
              "side by side, one thread each, with the same records at any count");
  cmd->add_flag("--resume", args.resume,
                "continue an interrupted run from its checkpoint (<out>/<name>.trials): its "
                "finished trials are read back; another config, build or data is refused");
  cmd->add_flag("--restart", args.restart,
                "discard the finished trials of an interrupted run in <out>/<name>.trials")
      ->excludes("--resume");
  cmd->add_flag("--distributed", args.distributed,
                "run under mpirun: the trials and sweep points are spread over the ranks (rank 0 "
                "hands them out and writes the results; the others run them)");
  cmd->add_flag("--check", args.check,
                "only check the file: keys, dataset, sizes and every sweep point; no trial runs");
  cmd->callback([cmd] {
    // Only options the user gave are checked (and applied): an explicit --trials must be a
    // usable count, never ignored.
    experiment::Config cfg = experiment::load_config(args.file);
    if (!args.data_dir.empty()) cfg.data_dir = args.data_dir;
    if (cmd->count("--trials")) cfg.trials = args.trials;
    if (!args.device.empty()) cfg.device = args.device;
    if (cmd->count("--threads")) cfg.threads = args.threads;
    if (args.check) {
      const auto points = experiment::check(cfg);
      std::cout << "dcalign: " << args.file << " is valid: " << points << " point(s) of "
                << cfg.trials << " trial(s)\n";
      return;
    }
    if (args.distributed) {
#ifndef DCALIGN_EXPERIMENT_MPI
      throw BackendError(
          "--distributed: dcalign was built without MPI (CMake found no MPI when it was "
          "configured); install libopenmpi-dev and openmpi-bin and rebuild");
#endif
    }
    experiment::check_output_directory(args.out_dir, cfg.name, "--out");
    ProgressView view;
    experiment::RunOptions run;
    run.progress = [&view](const std::string& msg) { view.message(msg); };
    run.on_trial = [&view](const experiment::ProgressReport& p) { view.trial(p); };
    run.checkpoint_dir = experiment::checkpoint_directory(args.out_dir, cfg.name);
    run.resume = args.resume;
    run.restart = args.restart;
    experiment::Result result;
#ifdef DCALIGN_EXPERIMENT_MPI
    if (args.distributed) {
      if (!run_experiment_distributed(cfg, run, result)) return;  // rank 0 writes
    } else {
      result = experiment::run(cfg, run);
    }
#else
    result = experiment::run(cfg, run);
#endif
    view.finish();
    experiment::write_outputs(result, args.out_dir);
    experiment::remove_checkpoint(run.checkpoint_dir);  // the outputs hold every trial now
    std::cout << experiment::summary_table(result);
    std::cout << "wall time " << result.wall_seconds << " s on " << result.workers
              << " worker thread(s)" << (args.distributed ? " per rank" : "");
    if (result.resumed_trials > 0)
      std::cout << " (" << result.resumed_trials << " trial(s) resumed from the checkpoint)";
    std::cout << "; results in " << args.out_dir << "/" << cfg.name << ".{json,csv,md}\n";
    if (!result.method_seconds.empty()) {
      std::cout << "model time by method (" << cfg.protocol << ", summed over trials and workers):";
      for (const auto& [method, secs] : result.method_seconds)
        std::cout << " " << method << " " << experiment::format_duration(secs) << ";";
      std::cout << "\n";
    }
  });
}

}  // namespace dcalign::cli
