#include "cli/commands.hpp"

namespace dcalign::cli {

#ifdef DCALIGN_HAVE_EXPERIMENT
void add_experiment_command(CLI::App& app);
#endif

// Commands from layers that are optional at build time.
void add_extra_commands(CLI::App& app) {
#ifdef DCALIGN_HAVE_EXPERIMENT
  add_experiment_command(app);
#else
  (void)app;
#endif
}

}  // namespace dcalign::cli
