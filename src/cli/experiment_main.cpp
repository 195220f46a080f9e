// dcalign-experiment: `dcalign experiment FILE ...` and `dcalign predict ...` in an executable
// of their own, the only one of the command line that links the learning layer (LibTorch).
// dcalign execs it with its own argv, so it parses "dcalign experiment ..." exactly as dcalign
// used to.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dcalign: basis alignment for Data Collaboration analysis"};
  app.require_subcommand(1);
  dcalign::cli::add_experiment_command(app);
  dcalign::cli::add_predict_command(app);
  return dcalign::cli::run_app(app, argc, argv);
}
