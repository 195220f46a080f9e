#include <exception>
#include <iostream>

#include "cli/commands.hpp"
#include "dcalign/error.hpp"

namespace dcalign::cli {

int run_app(CLI::App& app, int argc, char** argv) {
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

}  // namespace dcalign::cli
