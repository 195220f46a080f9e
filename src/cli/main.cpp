// dcalign command-line interface.
//   dcalign align --method odc --anchors A.npy --out G.npy [--report r.json] ...
//   dcalign demo
//   dcalign comm [--users 100 --participation 0.1 ...] [--json FILE]
//   dcalign options [--format markdown|json]
//   dcalign experiment FILE   (runs dcalign-experiment, see extra_commands.cpp)
//   dcalign client ...        (runs dcalign-client, likewise)
// Errors print one line "dcalign: error: ..." and exit with status 1 (2 for usage errors).
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "dcalign/error.hpp"

int main(int argc, char** argv) {
  int status = 0;
  if (dcalign::cli::forward_extra_command(argc, argv, status)) return status;
  CLI::App app{"dcalign: basis alignment for Data Collaboration analysis"};
  app.require_subcommand(1);
  dcalign::cli::AlignArgs align_args;
  dcalign::cli::add_align_command(app, align_args);
  dcalign::cli::DemoArgs demo_args;
  dcalign::cli::add_demo_command(app, demo_args);
  dcalign::cli::add_enroll_command(app);
  dcalign::cli::add_ragged_command(app);
  dcalign::cli::add_comm_command(app);
  dcalign::cli::add_options_command(app);
  dcalign::cli::add_extra_commands(app);
  return dcalign::cli::run_app(app, argc, argv);
}
