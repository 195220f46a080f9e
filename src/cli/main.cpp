// dcalign command-line interface.
//   dcalign align --method odc --anchors A.npy --out G.npy [--report r.json] ...
//   dcalign demo
// Errors print one line "dcalign: error: ..." and exit with status 1 (2 for usage errors).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "cli/commands.hpp"
#include "dcalign/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dcalign: basis alignment for Data Collaboration analysis"};
  app.require_subcommand(1);
  dcalign::cli::AlignArgs align_args;
  dcalign::cli::add_align_command(app, align_args);
  dcalign::cli::DemoArgs demo_args;
  dcalign::cli::add_demo_command(app, demo_args);
  dcalign::cli::add_extra_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const dcalign::Error& e) {
    std::cerr << "dcalign: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "dcalign: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
