#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <thread>

#include "cli/commands.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"

namespace dcalign::cli {

long long max_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return 4LL * (hw == 0 ? 1 : static_cast<long long>(hw));
}

CLI::Validator device_names() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          (void)parse_device(value);
          return {};
        } catch (const dcalign::Error&) {
          return "unknown device '" + value + "': expected cpu or cuda";
        }
      },
      "cpu|cuda", "device name");
}

void out_of_range(const std::string& opt, const std::string& value, const std::string& expected) {
  throw UsageError(opt + " " + value + " is out of range: expected " + expected);
}

void check_threads(long long threads) {
  if (threads < 0 || threads > max_threads())
    out_of_range("--threads", std::to_string(threads),
                 "0 (all cores) to " + std::to_string(max_threads()) +
                     " (4 x the hardware threads of this machine)");
}

int run_app(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help) and knows its own codes (105-109 for usage
    // errors); the README promises 2 for every usage error and 0 for --help.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const UsageError& e) {
    std::cerr << "dcalign: error: " << e.what() << "\n";
    return 2;
  } catch (const dcalign::Error& e) {
    std::cerr << "dcalign: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "dcalign: error: out of memory (a memory allocation failed; smaller inputs or "
                 "fewer threads may fit)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "dcalign: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace dcalign::cli
