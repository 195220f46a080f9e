#include <exception>
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/error.hpp"

namespace dcalign::cli {

int run_app(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help) and knows its own codes (105-109 for usage
    // errors); the README promises 2 for every usage error and 0 for --help.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const dcalign::Error& e) {
    std::cerr << "dcalign: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "dcalign: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace dcalign::cli
