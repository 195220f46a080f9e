// Checking, storing and showing the schema's values (dcalign/options.hpp): the one wording of
// every option message, whichever entry point the value came through.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <type_traits>

#include "core/methods.hpp"
#include "dcalign/options.hpp"

namespace dcalign {
namespace {

[[noreturn]] void out_of_range(const std::string& where, const std::string& value,
                               const std::string& expected) {
  throw InvalidInput(where + " " + value + " is out of range: expected " + expected);
}

const char* type_name(const OptionValue& v) {
  switch (v.index()) {
    case 0:
      return "a boolean";
    case 1:
    case 2:
      return "an integer";
    case 3:
      return "a real number";
    default:
      return "a string";
  }
}

const char* wanted(OptionType t) {
  switch (t) {
    case OptionType::integer:
      return "an integer";
    case OptionType::real:
      return "a number";
    case OptionType::choice:
      return "a string";
    case OptionType::flag:
      return "true or false";
  }
  return "?";
}

[[noreturn]] void wrong_type(const OptionInfo& o, const OptionValue& v, const std::string& where) {
  const std::string shown = shown_text(to_string(v));
  throw OptionTypeError(where + " is " + type_name(v) + " (" +
                        (std::holds_alternative<std::string>(v) ? "'" + shown + "'" : shown) +
                        "): expected " + wanted(o.type) + ", " + o.expected());
}

OptionValue check_integer(const OptionInfo& o, const OptionValue& v, const std::string& where) {
  const bool is_unsigned = o.min_int == 0 && o.max_int == ~std::uint64_t{0};
  const auto range = [&](const std::string& shown) { out_of_range(where, shown, o.expected()); };
  if (const auto* text = std::get_if<std::string>(&v)) {
    if (is_unsigned) return parse_integer_text<std::uint64_t>(where, *text, 0, o.max_int);
    return parse_integer_text<std::int64_t>(where, *text, o.min_int,
                                            static_cast<std::int64_t>(o.max_int));
  }
  if (const auto* d = std::get_if<double>(&v)) {
    // A real with an integral value (2.0 from JSON or Python) is that integer; 2.5 is not.
    if (std::isfinite(*d) && std::trunc(*d) == *d && std::abs(*d) < 9.0e15)
      return check_integer(o, OptionValue(static_cast<std::int64_t>(*d)), where);
    throw InvalidInput(where + " '" + to_string(v) +
                       "' is not an integer: expected a whole decimal number from " + o.expected());
  }
  if (const auto* u = std::get_if<std::uint64_t>(&v)) {
    if (*u > o.max_int) range(std::to_string(*u));
    if (is_unsigned) return *u;
    return static_cast<std::int64_t>(*u);
  }
  if (const auto* i = std::get_if<std::int64_t>(&v)) {
    if (*i < o.min_int || (*i >= 0 && static_cast<std::uint64_t>(*i) > o.max_int))
      range(std::to_string(*i));
    if (is_unsigned) return static_cast<std::uint64_t>(*i);
    return *i;
  }
  wrong_type(o, v, where);
}

OptionValue check_real(const OptionInfo& o, const OptionValue& v, const std::string& where) {
  double x = 0;
  std::string shown;
  if (const auto* text = std::get_if<std::string>(&v)) {
    x = parse_real_text(where, *text);
    shown = shown_text(*text);
  } else if (const auto* d = std::get_if<double>(&v)) {
    x = *d;
  } else if (const auto* i = std::get_if<std::int64_t>(&v)) {
    x = static_cast<double>(*i);
  } else if (const auto* u = std::get_if<std::uint64_t>(&v)) {
    x = static_cast<double>(*u);
  } else {
    wrong_type(o, v, where);
  }
  if (shown.empty()) shown = to_string(OptionValue(x));
  if (!std::isfinite(x) || x < o.min_real || (o.min_open && x == o.min_real))
    out_of_range(where, shown, o.expected());
  return x;
}

OptionValue check_choice(const OptionInfo& o, const OptionValue& v, const std::string& where) {
  const auto* text = std::get_if<std::string>(&v);
  if (!text) wrong_type(o, v, where);
  // The parsers know the aliases ("randomised", "gpu", "double"); the stored form is canonical.
  // A name they do not know, or one this option does not offer (a "supplied" factor is given
  // as a matrix), gets the option's own vocabulary.
  AlignRequest scratch;
  try {
    o.store(scratch, *text);
  } catch (const Error&) {
    throw InvalidInput(where + " '" + shown_text(*text) + "' is unknown: expected " + o.expected());
  }
  OptionValue canonical = o.load(scratch);
  for (const auto& c : o.choices)
    if (c == std::get<std::string>(canonical)) return canonical;
  throw InvalidInput(where + " '" + shown_text(*text) + "' is unknown: expected " + o.expected());
}

OptionValue check_flag(const OptionInfo& o, const OptionValue& v, const std::string& where) {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  if (const auto* text = std::get_if<std::string>(&v)) {
    if (*text == "true" || *text == "1") return true;
    if (*text == "false" || *text == "0") return false;
    throw InvalidInput(where + " '" + shown_text(*text) + "' is not a boolean: expected " +
                       o.expected());
  }
  wrong_type(o, v, where);
}

std::string shortest(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

}  // namespace

const std::string& OptionInfo::key(OptionEntry e) const {
  switch (e) {
    case OptionEntry::cli:
      return cli;
    case OptionEntry::python:
      return python;
    case OptionEntry::toml:
      return toml;
    case OptionEntry::service:
      return spec;
    case OptionEntry::model_file:
      return model;
  }
  return name;
}

std::string OptionInfo::expected() const {
  switch (type) {
    case OptionType::integer:
      if (max_int == ~std::uint64_t{0}) return "0 to " + std::to_string(max_int);
      return std::to_string(min_int) + " to " + std::to_string(max_int);
    case OptionType::real:
      return "a finite number " + std::string(min_open ? "> " : ">= ") + shortest(min_real);
    case OptionType::choice: {
      std::string s = "one of: ";
      for (std::size_t k = 0; k < choices.size(); ++k) s += (k ? ", " : "") + choices[k];
      return s;
    }
    case OptionType::flag:
      return "true or false";
  }
  return "?";
}

bool OptionInfo::used_by(Method m) const {
  if (methods.empty()) return true;
  for (Method x : methods)
    if (x == m) return true;
  return false;
}

std::string OptionInfo::methods_text() const {
  if (methods.empty()) return "every method";
  std::vector<std::string> names;
  for (Method m : methods) names.push_back(to_string(m));
  return core::list_in_words(names);
}

OptionValue check_option(const OptionInfo& o, const OptionValue& value, const std::string& where,
                         OptionEntry entry) {
  const bool typed = entry == OptionEntry::python || entry == OptionEntry::toml ||
                     entry == OptionEntry::model_file;
  if (typed && o.type != OptionType::choice && std::holds_alternative<std::string>(value))
    wrong_type(o, value, where);
  switch (o.type) {
    case OptionType::integer:
      return check_integer(o, value, where);
    case OptionType::real:
      return check_real(o, value, where);
    case OptionType::choice:
      return check_choice(o, value, where);
    case OptionType::flag:
      return check_flag(o, value, where);
  }
  return value;
}

void set_option(AlignRequest& request, const OptionInfo& o, const OptionValue& value,
                const std::string& where, OptionEntry entry) {
  // A model file records a matrix-given factor as "supplied" (its matrix is stored beside).
  if (entry == OptionEntry::model_file && o.type == OptionType::choice) {
    if (const auto* text = std::get_if<std::string>(&value); text && *text == "supplied") {
      try {
        o.store(request, *text);
        return;
      } catch (const Error&) {
        // not a factor option: checked below like any other name
      }
    }
  }
  o.store(request, check_option(o, value, where, entry));
}

OptionValue get_option(const AlignRequest& request, const OptionInfo& o) { return o.load(request); }

std::string to_string(const OptionValue& v) {
  switch (v.index()) {
    case 0:
      return std::get<bool>(v) ? "true" : "false";
    case 1:
      return std::to_string(std::get<std::int64_t>(v));
    case 2:
      return std::to_string(std::get<std::uint64_t>(v));
    case 3:
      return shortest(std::get<double>(v));
    default:
      return std::get<std::string>(v);
  }
}

void check_align_options(const AlignOptions& opts) {
  // The rows read scalars only: copy those, not the supplied matrices (a target can be a x l).
  AlignRequest request;
  AlignOptions& a = request.align;
  a.method = opts.method;
  a.seed = opts.seed;
  a.reference_user = opts.reference_user;
  a.svd = opts.svd;
  a.gopp = opts.gopp;
  a.rdp = opts.rdp;
  for (const auto& o : option_schema()) {
    // Choices are enumerations here, valid by their type (a "supplied" factor included).
    if (!o.used_by(opts.method) || o.key(OptionEntry::model_file).empty() ||
        o.type == OptionType::choice)
      continue;
    (void)check_option(o, o.load(request), o.name);
  }
}

void check_option_used(const OptionInfo& o, Method m, const std::string& where) {
  if (o.used_by(m)) return;
  throw InvalidInput(where + " is not used by method " + to_string(m) + " (only by " +
                     o.methods_text() + "); remove it or choose that method");
}

template <typename I>
I parse_integer_text(const std::string& where, const std::string& text, I lo, I hi) {
  const auto range = [&] {
    out_of_range(where, shown_text(text), std::to_string(lo) + " to " + std::to_string(hi));
  };
  if (text.empty()) throw InvalidInput(where + " needs a value: expected an integer");
  const char* first = text.data();
  const char* last = text.data() + text.size();
  // "-0" aside, a negative value is out of the range of an unsigned option.
  if (std::is_unsigned_v<I> && *first == '-') range();
  I v{};
  const auto [end, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range) range();
  if (ec != std::errc() || end != last)
    throw InvalidInput(where + " '" + shown_text(text) +
                       "' is not an integer: expected a whole decimal number from " +
                       std::to_string(lo) + " to " + std::to_string(hi));
  if (v < lo || v > hi) range();
  return v;
}
template int parse_integer_text<int>(const std::string&, const std::string&, int, int);
template long parse_integer_text<long>(const std::string&, const std::string&, long, long);
template long long parse_integer_text<long long>(const std::string&, const std::string&, long long,
                                                 long long);
template unsigned long parse_integer_text<unsigned long>(const std::string&, const std::string&,
                                                         unsigned long, unsigned long);
template unsigned long long parse_integer_text<unsigned long long>(const std::string&,
                                                                   const std::string&,
                                                                   unsigned long long,
                                                                   unsigned long long);

double parse_real_text(const std::string& where, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() ||
      std::isspace(static_cast<unsigned char>(text.front())))
    throw InvalidInput(where + " '" + shown_text(text) +
                       "' is not a number: expected a finite decimal number");
  // An overflowing literal (1e999) is refused here; "nan" and "inf" written as such reach the
  // option's range check, which names its range.
  if (errno == ERANGE && std::abs(v) > 1)
    out_of_range(where, shown_text(text), "a finite number (at most 1.8e308 in magnitude)");
  return v;
}

std::string shown_text(const std::string& value) {
  constexpr std::size_t kMax = 64;
  if (value.size() <= kMax) return value;
  return value.substr(0, kMax) + "... (" + std::to_string(value.size()) + " characters)";
}

}  // namespace dcalign
