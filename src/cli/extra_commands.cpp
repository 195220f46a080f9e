#include "cli/commands.hpp"

namespace dcalign::cli {

// Experiment and benchmark commands register here once their layers exist.
void add_extra_commands(CLI::App&) {}

}  // namespace dcalign::cli
