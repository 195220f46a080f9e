// dcalign-client: `dcalign client ...` in an executable of its own, the only one of the command
// line that links gRPC and Protobuf, so that every other command starts without loading them.
// dcalign execs it with its own argv, so it parses "dcalign client ..." exactly as dcalign did.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dcalign: basis alignment for Data Collaboration analysis"};
  app.require_subcommand(1);
  dcalign::cli::add_client_command(app);
  return dcalign::cli::run_app(app, argc, argv);
}
