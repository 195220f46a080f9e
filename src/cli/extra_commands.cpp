// Commands from layers that are optional at build time, each in an executable of its own that
// dcalign execs with its own arguments, so that every other command starts without loading
// those layers:
//   `dcalign experiment` trains models and `dcalign predict` runs a saved one: they link the
//   learning layer (LibTorch, LIBSVM, XGBoost) and the data layer (dcalign-experiment);
//   `dcalign client` talks to dcalign-server: it links gRPC and Protobuf (dcalign-client);
//   `dcalign align --distributed` runs under mpirun: it links MPI (dcalign-mpi).
// All are installed next to dcalign.
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

// The directory of the running executable (not of argv[0], which may be a name on $PATH).
std::filesystem::path own_directory(const char* argv0) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) return self.parent_path();
  return std::filesystem::absolute(argv0, ec).parent_path();
}

// The command that runs in another executable, and that executable's name; with an option, only
// when the arguments hold that option too (the last entry, a null name, keeps the table
// non-empty in a build with none).
struct Forwarded {
  std::string_view command;
  const char* executable;
  std::string_view option = {};
};

constexpr Forwarded kForwarded[] = {
#ifdef DCALIGN_HAVE_EXPERIMENT_MPI
    {"experiment", "dcalign-experiment-mpi", "--distributed"},  // before the plain entry
#endif
#ifdef DCALIGN_HAVE_EXPERIMENT
    {"experiment", "dcalign-experiment"},
    {"predict", "dcalign-experiment"},
#endif
#ifdef DCALIGN_HAVE_SERVICE
    {"client", "dcalign-client"},
#endif
#ifdef DCALIGN_HAVE_MPI_EXECUTABLE
    {"align", "dcalign-mpi", "--distributed"},
#endif
    {"", nullptr}};

// Whether argv[2..] holds the flag `option` (alone or as --option=value). The executable that
// runs then parses the same arguments, so a match where the option is some value's text only
// moves the same command to the other executable.
bool has_option(int argc, char** argv, std::string_view option) {
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--") return false;
    if (arg == option || (arg.size() > option.size() && arg.substr(0, option.size()) == option &&
                          arg[option.size()] == '='))
      return true;
  }
  return false;
}

}  // namespace

bool forward_extra_command(int argc, char** argv, int& status) {
  if (argc < 2) return false;
  for (const Forwarded& f : kForwarded) {
    if (!f.executable || std::string_view(argv[1]) != f.command) continue;
    if (!f.option.empty() && !has_option(argc, argv, f.option)) continue;
    // argv is passed unchanged, so that usage and error messages read "dcalign <command>".
    const auto helper = own_directory(argv[0]) / f.executable;
    ::execv(helper.c_str(), argv);
    std::cerr << "dcalign: error: cannot run " << helper.string() << " (" << std::strerror(errno)
              << "); `dcalign " << argv[1] << "` needs " << f.executable
              << " installed next to dcalign\n";
    status = 1;
    return true;
  }
  return false;
}

void add_extra_commands(CLI::App& app) {
  // Listed for `dcalign --help`; forward_extra_command() runs them before parsing.
  [[maybe_unused]] auto listed = [&app](const char* name, const char* description) {
    app.add_subcommand(name, description)->allow_extras()->callback([name] {
      throw InvalidInput(std::string("`") + name + "` must be the first argument of dcalign");
    });
  };
#ifdef DCALIGN_HAVE_EXPERIMENT
  listed("experiment", kExperimentDescription);
  listed("predict", kPredictDescription);
#endif
#ifdef DCALIGN_HAVE_SERVICE
  listed("client", kClientDescription);
#else
  app.add_subcommand("client", "Talk to a dcalign-server (not built)")
      ->allow_extras()
      ->callback([] {
        throw Error(
            "dcalign was built without the analyst service (gRPC, Protobuf or SQLite "
            "missing when it was configured)");
      });
#endif
}

}  // namespace dcalign::cli
