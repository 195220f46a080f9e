#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <limits>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include "cli/commands.hpp"
#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"
#include "io/staged_outputs.hpp"

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

std::string shown(const std::string& value) {
  constexpr std::size_t kMax = 64;
  if (value.size() <= kMax) return value;
  return value.substr(0, kMax) + "... (" + std::to_string(value.size()) + " characters)";
}

namespace {

std::string long_name(const CLI::Option* o) {
  const auto& names = o->get_lnames();
  if (!names.empty()) return "--" + names.front();
  const auto& snames = o->get_snames();
  return snames.empty() ? o->get_name() : "-" + snames.front();
}

// A whole decimal number in [lo, hi] (from_chars: no spaces, no '+', no hex, no fraction).
template <typename I>
I parse_integer(const std::string& opt, const std::string& text, I lo, I hi) {
  const auto range = [&] {
    out_of_range(opt, shown(text), std::to_string(lo) + " to " + std::to_string(hi));
  };
  if (text.empty()) throw UsageError(opt + " needs a value: expected an integer");
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (std::is_unsigned_v<I> && *first == '-') {
    // "-0" aside, a negative value is out of the range of an unsigned option.
    range();
  }
  I v{};
  const auto [end, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range) range();
  if (ec != std::errc() || end != last)
    throw UsageError(opt + " '" + shown(text) + "' is not an integer: expected a whole decimal " +
                     "number from " + std::to_string(lo) + " to " + std::to_string(hi));
  if (v < lo || v > hi) range();
  return v;
}

template <typename I>
CLI::Option* add_integer_impl(CLI::App* cmd, const std::string& names, I& var, I lo, I hi,
                              const std::string& desc) {
  auto* o = cmd->add_option_function<std::string>(
      names, [](const std::string&) {}, desc);
  o->each([o, &var, lo, hi](const std::string& text) {
    var = parse_integer<I>(long_name(o), text, lo, hi);
  });
  o->default_str(std::to_string(var))
      ->type_name("INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return o;
}

}  // namespace

CLI::Option* add_integer(CLI::App* cmd, const std::string& names, long long& var, long long lo,
                         long long hi, const std::string& desc) {
  return add_integer_impl<long long>(cmd, names, var, lo, hi, desc);
}
CLI::Option* add_integer(CLI::App* cmd, const std::string& names, int& var, long long lo,
                         long long hi, const std::string& desc) {
  return add_integer_impl<int>(cmd, names, var, static_cast<int>(lo), static_cast<int>(hi), desc);
}
CLI::Option* add_integer(CLI::App* cmd, const std::string& names, std::int64_t& var, long long lo,
                         long long hi, const std::string& desc) {
  return add_integer_impl<std::int64_t>(cmd, names, var, lo, hi, desc);
}
CLI::Option* add_unsigned(CLI::App* cmd, const std::string& names, std::uint64_t& var,
                          const std::string& desc) {
  return add_integer_impl<std::uint64_t>(cmd, names, var, 0,
                                         std::numeric_limits<std::uint64_t>::max(), desc);
}

CLI::Option* add_real(CLI::App* cmd, const std::string& names, double& var,
                      const std::string& desc) {
  auto* o = cmd->add_option_function<std::string>(
      names, [](const std::string&) {}, desc);
  o->each([o, &var](const std::string& text) {
    const std::string opt = long_name(o);
    errno = 0;
    char* end = nullptr;
    const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() ||
        std::isspace(static_cast<unsigned char>(text.front())))
      throw UsageError(opt + " '" + shown(text) + "' is not a number: expected a finite decimal " +
                       "number");
    // An overflowing literal (1e999) is refused here; "nan" and "inf" written as such reach
    // the command's range check, which names the quantity.
    if (errno == ERANGE && std::abs(v) > 1)
      out_of_range(opt, shown(text), "a finite number (at most 1.8e308 in magnitude)");
    var = v;
  });
  std::ostringstream os;
  os << var;
  o->default_str(os.str())->type_name("REAL");
  return o;
}

CLI::Option* add_choice(CLI::App* cmd, const std::string& names, std::string& var,
                        const std::string& desc,
                        const std::function<void(const std::string&)>& parse) {
  auto* o = cmd->add_option_function<std::string>(
      names, [](const std::string&) {}, desc);
  o->each([o, &var, parse](const std::string& text) {
    try {
      parse(text);
    } catch (const dcalign::Error& e) {
      throw UsageError(long_name(o) + " '" + shown(text) + "': " + e.what());
    }
    var = text;
  });
  o->default_str(var);
  return o;
}

CLI::Option* add_right_factor(CLI::App* cmd, std::string& var) {
  return add_choice(cmd, "--right", var, "Imakura's R: identity | uniform",
                    [](const std::string& v) {
                      if (parse_right_factor(v) == RightFactor::supplied)
                        throw InvalidInput("expected identity or uniform");
                    });
}

CLI::Option* add_precision(CLI::App* cmd, std::string& var) {
  return add_choice(cmd, "--precision", var, "float64 | float32", [](const std::string& v) {
    if (v != "float64" && v != "double" && v != "float32" && v != "float")
      throw InvalidInput("unknown precision; expected float64 or float32");
  });
}

bool is_float32(const std::string& precision) {
  return precision == "float32" || precision == "float";
}

CLI::Option* add_svd_algorithm(CLI::App* cmd, std::string& var, const std::string& desc) {
  return add_choice(cmd, "--svd", var, desc,
                    [](const std::string& v) { (void)parse_svd_algorithm(v); });
}

CLI::Option* add_kawakami_form(CLI::App* cmd, std::string& var) {
  return add_choice(cmd, "--kawakami-form", var, "qr-svd | eigen",
                    [](const std::string& v) { (void)parse_kawakami_form(v); });
}

CLI::Option* add_path(CLI::App* cmd, const std::string& names, std::string& var,
                      const std::string& desc) {
  auto* o = cmd->add_option_function<std::string>(
      names, [](const std::string&) {}, desc);
  o->each([o, &var](const std::string& text) {
    if (text.empty()) throw UsageError(long_name(o) + " '' is an empty path: expected a file name");
    var = text;
  });
  if (!var.empty()) o->default_str(var);
  return o;
}

void refuse_unused(const CLI::App& cmd, const std::string& opt, bool used, const std::string& why) {
  if (!used && cmd.count(opt) > 0)
    throw UsageError(opt + " is not used " + why + "; remove it or change what it depends on");
}

void check_threads(long long threads) {
  if (threads < 0 || threads > max_threads())
    out_of_range("--threads", std::to_string(threads),
                 "0 (all cores) to " + std::to_string(max_threads()) +
                     " (4 x the hardware threads of this machine)");
}

int run_app(CLI::App& app, int argc, char** argv) {
  // A signal while an output is being written removes its temporaries before the process dies.
  io::install_signal_cleanup();
  // --version: dcalign's version and what it runs on (BLAS and its kernel set, CPU, CUDA).
  app.set_version_flag("--version", [] { return dcalign::runtime_summary(); });
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
