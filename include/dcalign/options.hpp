#pragma once
// The option schema: every alignment option defined once, with its name at each entry point
// (the `dcalign align` command line, the Python keyword arguments, experiment files, the
// service's collaboration spec and the model file), its type, range or vocabulary, default,
// unit, help text and the methods that use it. Every entry point reads and checks options
// through it, so one wrong value gets one message wherever it is given:
//
//   --gopp-tolerance -1 is out of range: expected a finite number >= 0        (command line)
//   gopp_tolerance -1 is out of range: expected a finite number >= 0          (Python, TOML, spec)
//   options.tolerance -1 is out of range: expected a finite number >= 0       (model file)
//
// The entry points put their own context in front (the file, the spec), never a different
// wording. Adding an option: one row in src/core/options.cpp plus its use
// (docs/development/extending.md).
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"

namespace dcalign {

/// A value of the wrong type for its option (a string where a number belongs). Python raises
/// TypeError for it; everywhere else it is an InvalidInput like any other bad value.
class OptionTypeError : public InvalidInput {
 public:
  using InvalidInput::InvalidInput;
};

/// A value as an entry point received it: text (a command line, a spec's string map) or a
/// typed value (TOML, JSON, Python).
using OptionValue = std::variant<bool, std::int64_t, std::uint64_t, double, std::string>;

enum class OptionType { integer, real, choice, flag };

/// The places an option can be given.
enum class OptionEntry { cli, python, toml, service, model_file };

/// Everything an alignment request sets: the method's options and where and in which precision
/// it runs. Entry points fill one of these through set_option.
struct AlignRequest {
  AlignOptions align;
  Device device = Device::cpu;
  bool float32 = false;
  int threads = 0;  ///< CPU threads over users; 0: all
};

struct OptionInfo {
  std::string name;    ///< the canonical key (the library's own messages use it)
  std::string cli;     ///< `dcalign align`'s long option ("--gopp-tolerance")
  std::string python;  ///< the Python keyword (the name); empty: not a keyword (precision)
  std::string toml;    ///< experiment-file key; empty: not settable there
  std::string spec;    ///< collaboration spec options key; empty: not settable there
  std::string model;   ///< key in a model file ("tolerance", "svd.oversampling"); empty: not kept
  OptionType type = OptionType::real;
  std::int64_t min_int = 0;   ///< integers: inclusive bounds (seed: max_uint is used instead)
  std::uint64_t max_int = 0;  ///< integers: inclusive upper bound
  double min_real = 0;        ///< reals: lower bound (inclusive unless min_open); finite
  bool min_open = false;
  std::vector<std::string> choices;  ///< choices: the canonical names (aliases are the parser's)
  std::string default_value;         ///< as text, as --help shows it
  std::string unit;                  ///< "" for dimensionless values
  std::string help;                  ///< one line
  std::vector<Method> methods;       ///< the methods that use it; empty: every method
  /// A further condition on its use, as a sentence fragment ("with svd = randomized"); empty:
  /// none. Checked by the entry points that refuse unused options.
  std::string route;
  bool cli_negated = false;  ///< the command line's flag sets false (--no-evaluate)
  /// How set_option and get_option reach the value in an AlignRequest.
  void (*store)(AlignRequest&, const OptionValue&) = nullptr;
  OptionValue (*load)(const AlignRequest&) = nullptr;

  /// The key at an entry point (empty when the option cannot be given there).
  const std::string& key(OptionEntry e) const;
  /// What a value must be: "0 to 10000", "a finite number >= 0", "one of: gram, exact, ...".
  std::string expected() const;
  bool used_by(Method m) const;
  /// "odc, gopp" (every method: "every method").
  std::string methods_text() const;
};

/// The schema, in the order of `dcalign align --help`.
const std::vector<OptionInfo>& option_schema();
/// The row whose key at `entry` is `key`, nullptr when none. Model-file keys can be shared by
/// two methods' options (gopp's and rdp's max_iterations): `method` chooses between them.
const OptionInfo* find_option(OptionEntry entry, const std::string& key,
                              Method method = Method::odc);
/// The row named `name` (its canonical key); throws std::logic_error for an unknown name.
const OptionInfo& option_info(const std::string& name);

/// Checks `value` against the row (type, range, vocabulary) and returns it normalised: an
/// integer as std::int64_t (std::uint64_t for the seed), a real as double, a choice as its
/// canonical name, a flag as bool. Text is parsed strictly (a whole decimal integer, a decimal
/// real, true/false for flags). `where` is the key as the caller spells it; the message is
/// "<where> <value> is out of range: expected <expected>" or a sibling wording.
/// `entry` says whether text is parsed (the command line and specs carry text) or is a value of
/// the wrong type for a number or flag (Python, TOML and JSON have types).
OptionValue check_option(const OptionInfo& o, const OptionValue& value, const std::string& where,
                         OptionEntry entry = OptionEntry::cli);
/// check_option, then stores the value in `request`. `entry` is where it was given (a model file
/// may hold "supplied" for a target rotation; the others give that matrix instead).
void set_option(AlignRequest& request, const OptionInfo& o, const OptionValue& value,
                const std::string& where, OptionEntry entry);
/// The row's value in `request`, normalised as check_option returns it.
OptionValue get_option(const AlignRequest& request, const OptionInfo& o);
/// A value as messages and --help show it: integers in decimal, reals in their shortest exact
/// form ("1e-10", "nan"), strings as they are, flags as true/false.
std::string to_string(const OptionValue& v);

/// The library's own check of options set in code (align() runs it): every option the method
/// uses, against the schema, named by its canonical key.
void check_align_options(const AlignOptions& opts);

/// Throws InvalidInput "<where> is not used by method M (only by ...)" when the row does not
/// apply to `m` (the one rule of the command line, experiment files and specs).
void check_option_used(const OptionInfo& o, Method m, const std::string& where);

/// A whole decimal number in [lo, hi] from text (no sign for unsigned types, no spaces, no
/// fraction), with the schema's wording; for the command line's other integer options too.
template <typename I>
I parse_integer_text(const std::string& where, const std::string& text, I lo, I hi);
/// A decimal real from text that does not overflow; "nan" and "inf" are returned for the range
/// check to name.
double parse_real_text(const std::string& where, const std::string& text);
/// A value as messages show it: at most 64 characters, longer ones cut with their length.
std::string shown_text(const std::string& value);

/// The schema as a Markdown reference page (one table per entry point and one section per
/// option) or as JSON (for tools and documentation generators).
std::string option_reference_markdown();
std::string option_schema_json();

}  // namespace dcalign
