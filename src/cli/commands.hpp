#pragma once
// Subcommands of the dcalign CLI. Each add_* registers its options and a callback that runs
// the command; errors propagate as dcalign::Error to main(), which reports them.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>

#include "dcalign/error.hpp"
#include "dcalign/options.hpp"

namespace dcalign::cli {

struct AlignArgs {
  std::string method = "odc";
  std::string anchors, out, report, target_out, target_in, rotation_in;
  std::string model_out;  ///< --model-out: save the fitted Aligner here (dcalign enroll)
  /// Every schema option (dcalign/options.hpp), set as the command line gives them.
  AlignRequest request;
};
void add_align_command(CLI::App& app, AlignArgs& args);

/// A command line that asks for something meaningless (an option out of its range, an option
/// the chosen method ignores): run_app prints "dcalign: error: ..." and exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs `f` (a check of the option schema or the library) and returns what it returns; its
/// InvalidInput becomes a UsageError with the same message (status 2).
template <typename F>
auto as_usage_error(F&& f) {
  try {
    return f();
  } catch (const InvalidInput& e) {
    throw UsageError(e.what());
  }
}

/// Throws UsageError "OPT VALUE is out of range: expected EXPECTED", the one wording of every
/// command's range checks.
[[noreturn]] void out_of_range(const std::string& opt, const std::string& value,
                               const std::string& expected);

// ---- How every command registers its options (docs/reference/errors.md, "Usage errors"). A value
// is parsed strictly when the option is given: an integer is a whole decimal number within its
// documented bounds, a real a decimal number that does not overflow, a choice one of its listed
// names and a path a non-empty string. Anything else is a UsageError (status 2) naming the option,
// the value (shortened when long) and what was expected; nothing is ever clamped or wrapped.

/// An integer option in [lo, hi]; `var` keeps its default unless the option is given.
CLI::Option* add_integer(CLI::App* cmd, const std::string& names, long long& var, long long lo,
                         long long hi, const std::string& desc);
CLI::Option* add_integer(CLI::App* cmd, const std::string& names, int& var, long long lo,
                         long long hi, const std::string& desc);
CLI::Option* add_integer(CLI::App* cmd, const std::string& names, std::int64_t& var, long long lo,
                         long long hi, const std::string& desc);
/// An unsigned option (a seed): 0 to 2^64 - 1, no sign.
CLI::Option* add_unsigned(CLI::App* cmd, const std::string& names, std::uint64_t& var,
                          const std::string& desc);
/// A real option: a decimal number that does not overflow; range checks (finiteness included),
/// which depend on the option, are the command's.
CLI::Option* add_real(CLI::App* cmd, const std::string& names, double& var,
                      const std::string& desc);
/// One of a set of names, checked by `parse` (which throws dcalign::Error for an unknown one).
CLI::Option* add_choice(CLI::App* cmd, const std::string& names, std::string& var,
                        const std::string& desc,
                        const std::function<void(const std::string&)>& parse);
/// The alignment options that `align` and `align-ragged` share, each checked by the library's
/// parser: --right (Imakura's R: identity | uniform; a supplied R is not an option),
/// --precision (float64 | float32, with the aliases double and float), --svd (gram | exact |
/// randomized) and --kawakami-form (qr-svd | eigen).
CLI::Option* add_right_factor(CLI::App* cmd, std::string& var);
CLI::Option* add_precision(CLI::App* cmd, std::string& var);
CLI::Option* add_svd_algorithm(CLI::App* cmd, std::string& var, const std::string& desc);
CLI::Option* add_kawakami_form(CLI::App* cmd, std::string& var);
/// Registers the schema's row `o` on `cmd` under its command-line spelling, with the schema's
/// help, default and check; a given value is stored in `request`. A bad value is a UsageError
/// with the schema's message.
CLI::Option* add_schema_option(CLI::App* cmd, const OptionInfo& o, AlignRequest& request);
/// float32 for "float32" or "float", else float64 (after add_precision's check).
bool is_float32(const std::string& precision);
/// A file or directory path: an empty one is a usage error, never "not given".
CLI::Option* add_path(CLI::App* cmd, const std::string& names, std::string& var,
                      const std::string& desc);
/// A value as shown in messages: at most 64 characters, longer ones cut with their length.
std::string shown(const std::string& value);

/// The one rule for options a run would not use: throws UsageError "OPT is not used USE"
/// (e.g. "--svd is not used by method odc (only by ...)") when the user gave `opt` and `used`
/// is false. Experiment keys follow the same rule (experiment::Config).
void refuse_unused(const CLI::App& cmd, const std::string& opt, bool used, const std::string& why);

/// Throws UsageError unless 0 <= threads <= max_threads() (--threads of align and enroll).
void check_threads(long long threads);
/// CLI11 validator of --device values (cpu, cuda, gpu; any case): others are usage errors.
CLI::Validator device_names();

/// The largest --threads accepted: 4 x std::thread::hardware_concurrency() (at least 4).
long long max_threads();

struct DemoArgs {
  std::uint64_t seed = 1;
  long long users = 5, samples = 200, features = 64, dim = 8, anchor_rows = 500;
  std::string device = "cpu";
};
void add_demo_command(CLI::App& app, DemoArgs& args);

/// `dcalign enroll`: aligns later users against a model saved by `align --model-out`.
void add_enroll_command(CLI::App& app);

/// `dcalign comm`: paper 001's communication model (bytes, break-even rounds, transfer times).
void add_comm_command(CLI::App& app);

/// `dcalign options`: the option schema as a Markdown reference or JSON.
void add_options_command(CLI::App& app);

/// `dcalign align-ragged`: users with different latent dimensions (imakura, kawakami).
void add_ragged_command(CLI::App& app);

/// `dcalign client` (dcalign-client, which links gRPC): the analyst's and participants' calls to
/// dcalign-server (src/service).
inline constexpr const char* kClientDescription =
    "Talk to a dcalign-server (analyst or participant)";
void add_client_command(CLI::App& app);

/// Commands contributed by other layers (experiments, benchmarks) when they are built.
void add_extra_commands(CLI::App& app);
/// Runs a command that lives in an executable of its own (`dcalign experiment` and `dcalign
/// predict` in dcalign-experiment, `dcalign client` in dcalign-client) when argv names one: true,
/// with `status` set, if it could not be started (on success the process is replaced); false for
/// every other command.
bool forward_extra_command(int argc, char** argv, int& status);

/// A report's JSON (report.to_json()) into `tmp`, the staged file of --report `shown`; IoError
/// names `shown` when it cannot be written.
template <typename Report>
void write_report(const std::string& tmp, const std::string& shown, const Report& report) {
  std::ofstream f(tmp);
  if (!f) throw IoError("cannot write the report to '" + shown + "'");
  f << report.to_json() << "\n";
  f.close();
  if (!f) throw IoError("writing the report to '" + shown + "' failed");
}

inline constexpr const char* kExperimentDescription =
    "Run a Data Collaboration experiment (TOML file)";
void add_experiment_command(CLI::App& app);

/// `dcalign predict` (dcalign-experiment, which links the learning layer): a user's h(Y F G).
inline constexpr const char* kPredictDescription =
    "Predict with a saved model on your own data: h(Y F G)";
void add_predict_command(CLI::App& app);

/// Parses argv with `app` and runs the chosen command. Errors print "dcalign: error: ..." and
/// give status 1; usage errors (CLI11's and UsageError) give status 2.
int run_app(CLI::App& app, int argc, char** argv);

}  // namespace dcalign::cli
