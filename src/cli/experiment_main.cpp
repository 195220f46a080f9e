// dcalign-experiment: `dcalign experiment FILE ...` and `dcalign predict ...` in an executable
// of their own, the only one of the command line that links the learning layer (LibTorch).
// dcalign execs it with its own argv, so it parses "dcalign experiment ..." exactly as dcalign
// used to.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "base/sanitizers.hpp"
#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dcalign: basis alignment for Data Collaboration analysis"};
  app.require_subcommand(1);
  dcalign::cli::add_experiment_command(app);
  dcalign::cli::add_predict_command(app);
  const int status = dcalign::cli::run_app(app, argc, argv);
  // Every output file is written, renamed into place and closed by now. What exit() would
  // still do is run the static destructors of LibTorch and the ~300 libraries Debian's build
  // of it loads (deregistering every operator): about 0.2 s of a 3 s experiment, doing
  // nothing a user can see. So the streams are flushed and the process ends at once; a
  // sanitizer build keeps the normal exit for its leak report.
  if (!DCALIGN_ASAN && !DCALIGN_TSAN) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(status);
  }
  return status;
}
