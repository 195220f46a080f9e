// dcalign-experiment-mpi: `dcalign experiment FILE --distributed ...` under mpirun, in an
// executable of its own that links both the learning layer and MPI, so that neither
// dcalign-experiment (every other experiment) nor dcalign-mpi (`align --distributed`) pays the
// other's start-up. dcalign execs it with its own argv.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dcalign: basis alignment for Data Collaboration analysis"};
  app.require_subcommand(1);
  dcalign::cli::add_experiment_command(app);
  return dcalign::cli::run_app(app, argc, argv);
}
