// dcalign-mpi: `dcalign align --distributed ...` in an executable of its own, the only one of the
// command line that links MPI (libmpi and the Open MPI run-time libraries beside it cost about
// 2.7 ms of every process start on a 2-core Zen), so that every other command starts without
// them. dcalign execs it with its own argv, so it parses "dcalign align ..." exactly as dcalign
// did; it runs the whole align command, with or without --distributed.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dcalign: basis alignment for Data Collaboration analysis"};
  app.require_subcommand(1);
  dcalign::cli::AlignArgs align_args;
  dcalign::cli::add_align_command(app, align_args);
  return dcalign::cli::run_app(app, argc, argv);
}
