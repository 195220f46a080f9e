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

long long max_threads() { return static_cast<long long>(option_info("threads").max_int); }

CLI::Validator device_names() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        // CLI11 puts "--device: " in front of the schema's message.
        const std::string where = "--device";
        try {
          (void)check_option(option_info("device"), value, where);
          return {};
        } catch (const dcalign::Error& e) {
          return std::string(e.what()).substr(where.size() + 1);
        }
      },
      "cpu|cuda", "device name");
}

void out_of_range(const std::string& opt, const std::string& value, const std::string& expected) {
  throw UsageError(opt + " " + value + " is out of range: expected " + expected);
}

std::string shown(const std::string& value) { return shown_text(value); }

namespace {

std::string long_name(const CLI::Option* o) {
  const auto& names = o->get_lnames();
  if (!names.empty()) return "--" + names.front();
  const auto& snames = o->get_snames();
  return snames.empty() ? o->get_name() : "-" + snames.front();
}

template <typename I>
I parse_integer(const std::string& opt, const std::string& text, I lo, I hi) {
  return as_usage_error([&] { return parse_integer_text<I>(opt, text, lo, hi); });
}

// A choice checked by its schema row, under the command line's spelling.
CLI::Option* add_schema_choice(CLI::App* cmd, const std::string& name, std::string& var,
                               const std::string& desc) {
  const OptionInfo& row = option_info(name);
  auto* o = cmd->add_option_function<std::string>(
      row.cli, [](const std::string&) {}, desc);
  o->each([&row, &var](const std::string& text) {
    var = std::get<std::string>(as_usage_error([&] { return check_option(row, text, row.cli); }));
  });
  o->default_str(var);
  return o;
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
    var = as_usage_error([&] { return parse_real_text(long_name(o), text); });
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
  return add_schema_choice(cmd, "right", var, "Imakura's R: identity | uniform");
}

CLI::Option* add_precision(CLI::App* cmd, std::string& var) {
  return add_schema_choice(cmd, "precision", var, "float64 | float32");
}

bool is_float32(const std::string& precision) { return precision == "float32"; }

CLI::Option* add_svd_algorithm(CLI::App* cmd, std::string& var, const std::string& desc) {
  return add_schema_choice(cmd, "svd", var, desc);
}

CLI::Option* add_kawakami_form(CLI::App* cmd, std::string& var) {
  return add_schema_choice(cmd, "kawakami_form", var, "qr-svd | eigen");
}

CLI::Option* add_schema_option(CLI::App* cmd, const OptionInfo& row, AlignRequest& request) {
  // The schema's help, then what it takes and who uses it: "(0 to 100; used by imakura, ...)".
  std::string desc = row.cli_negated ? "do not " + row.help : row.help;
  std::string detail;
  if (row.type != OptionType::flag)
    detail = row.expected() + (row.unit.empty() ? "" : ", in " + row.unit);
  if (!row.methods.empty())
    detail += (detail.empty() ? "" : "; ") + std::string("used by ") + row.methods_text();
  if (!row.route.empty()) detail += (detail.empty() ? "" : ", ") + row.route;
  if (!detail.empty()) desc += " (" + detail + ")";
  if (row.type == OptionType::flag) {
    // A flag takes no value: given, it sets the option (false for a negated one).
    auto* o = cmd->add_flag_callback(
        row.cli, [&row, &request] { row.store(request, OptionValue(!row.cli_negated)); }, desc);
    return o;
  }
  auto* o = cmd->add_option_function<std::string>(
      row.cli, [](const std::string&) {}, desc);
  o->each([&row, &request](const std::string& text) {
    as_usage_error([&] { set_option(request, row, text, row.cli, OptionEntry::cli); });
  });
  o->default_str(row.default_value);
  if (row.type == OptionType::integer)
    o->type_name("INT in [" + std::to_string(row.min_int) + ", " + std::to_string(row.max_int) +
                 "]");
  else if (row.type == OptionType::real)
    o->type_name("REAL");
  else
    o->type_name("TEXT");
  return o;
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
  as_usage_error([&] {
    return check_option(option_info("threads"), static_cast<std::int64_t>(threads), "--threads");
  });
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
