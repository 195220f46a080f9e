// Commands from layers that are optional at build time.
//
// `dcalign experiment` trains models and `dcalign predict` runs a saved one, so they link the
// learning layer (LibTorch, LIBSVM, XGBoost) and the data layer. They live in an executable of
// their own, dcalign-experiment, installed next to dcalign, which dcalign execs with its own
// arguments: every other command starts without loading LibTorch.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <system_error>

#include "cli/commands.hpp"
#include "dcalign/error.hpp"

namespace dcalign::cli {
namespace {

#ifdef DCALIGN_HAVE_EXPERIMENT
// The directory of the running executable (not of argv[0], which may be a name on $PATH).
std::filesystem::path own_directory(const char* argv0) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) return self.parent_path();
  return std::filesystem::absolute(argv0, ec).parent_path();
}
#endif

}  // namespace

bool forward_extra_command(int argc, char** argv, int& status) {
#ifdef DCALIGN_HAVE_EXPERIMENT
  if (argc > 1 &&
      (std::string_view(argv[1]) == "experiment" || std::string_view(argv[1]) == "predict")) {
    // argv is passed unchanged, so that usage and error messages read "dcalign experiment".
    const auto helper = own_directory(argv[0]) / "dcalign-experiment";
    ::execv(helper.c_str(), argv);
    std::cerr << "dcalign: error: cannot run " << helper.string() << " (" << std::strerror(errno)
              << "); `dcalign " << argv[1]
              << "` needs dcalign-experiment installed next to dcalign\n";
    status = 1;
    return true;
  }
#else
  (void)argc;
  (void)argv;
#endif
  (void)status;
  return false;
}

void add_extra_commands(CLI::App& app) {
#ifdef DCALIGN_HAVE_EXPERIMENT
  // Listed for `dcalign --help`; forward_extra_command() runs them before parsing.
  app.add_subcommand("experiment", kExperimentDescription)->allow_extras()->callback([] {
    throw InvalidInput("`experiment` must be the first argument of dcalign");
  });
  app.add_subcommand("predict", kPredictDescription)->allow_extras()->callback([] {
    throw InvalidInput("`predict` must be the first argument of dcalign");
  });
#else
  (void)app;
#endif
}

}  // namespace dcalign::cli
