// `dcalign options`: the option schema (dcalign/options.hpp) as a reference: a Markdown page (the
// documentation's option reference is this output) or JSON for tools.
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/options.hpp"

namespace dcalign::cli {

void add_options_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "options",
      "Print every alignment option: its name at each entry point, values, default "
      "and the methods that use it");
  static std::string format = "markdown";
  add_choice(cmd, "--format", format, "markdown | json", [](const std::string& v) {
    if (v != "markdown" && v != "json") throw InvalidInput("expected one of: markdown, json");
  });
  cmd->callback([] {
    std::cout << (format == "json" ? option_schema_json() : option_reference_markdown());
    std::cout.flush();
    if (!std::cout) throw IoError("dcalign options: writing to standard output failed");
  });
}

}  // namespace dcalign::cli
