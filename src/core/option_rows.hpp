#pragma once
// The builder of the schema's rows (src/core/options.cpp): one expression per option.
#include <string>
#include <utility>
#include <vector>

#include "dcalign/options.hpp"

namespace dcalign::core {

struct Row {
  OptionInfo info;

  static Row make(std::string name, std::string cli, OptionType type, std::string def,
                  std::string unit, std::string help) {
    Row r;
    r.info.python = name;
    r.info.name = std::move(name);
    r.info.cli = std::move(cli);
    r.info.type = type;
    r.info.default_value = std::move(def);
    r.info.unit = std::move(unit);
    r.info.help = std::move(help);
    return r;
  }
  static Row integer(std::string name, std::string cli, std::int64_t lo, std::int64_t hi,
                     std::string def, std::string unit, std::string help) {
    Row r = make(std::move(name), std::move(cli), OptionType::integer, std::move(def),
                 std::move(unit), std::move(help));
    r.info.min_int = lo;
    r.info.max_int = static_cast<std::uint64_t>(hi);
    return r;
  }
  /// 0 to 2^64 - 1 (a seed).
  static Row unsigned_integer(std::string name, std::string cli, std::string def, std::string unit,
                              std::string help) {
    Row r = make(std::move(name), std::move(cli), OptionType::integer, std::move(def),
                 std::move(unit), std::move(help));
    r.info.max_int = ~std::uint64_t{0};
    return r;
  }
  /// A finite real above (min_open) or at least `lo`.
  static Row real(std::string name, std::string cli, double lo, bool open, std::string def,
                  std::string unit, std::string help) {
    Row r = make(std::move(name), std::move(cli), OptionType::real, std::move(def), std::move(unit),
                 std::move(help));
    r.info.min_real = lo;
    r.info.min_open = open;
    return r;
  }
  static Row choice(std::string name, std::string cli, std::vector<std::string> choices,
                    std::string def, std::string help) {
    Row r = make(std::move(name), std::move(cli), OptionType::choice, std::move(def), "",
                 std::move(help));
    r.info.choices = std::move(choices);
    return r;
  }
  static Row flag(std::string name, std::string cli, std::string def, std::string help) {
    return make(std::move(name), std::move(cli), OptionType::flag, std::move(def), "",
                std::move(help));
  }

  Row& for_methods(std::vector<Method> m) {
    info.methods = std::move(m);
    return *this;
  }
  Row& when(std::string route) {
    info.route = std::move(route);
    return *this;
  }
  /// The experiment-file, spec and model-file keys (empty: not settable there).
  Row& keys(std::string toml, std::string spec, std::string model) {
    info.toml = std::move(toml);
    info.spec = std::move(spec);
    info.model = std::move(model);
    return *this;
  }
  /// Not a Python keyword (the array's dtype gives the precision).
  Row& not_python() {
    info.python.clear();
    return *this;
  }
  Row& negated() {
    info.cli_negated = true;
    return *this;
  }
  Row& store(void (*f)(AlignRequest&, const OptionValue&)) {
    info.store = f;
    return *this;
  }
  Row& load(OptionValue (*f)(const AlignRequest&)) {
    info.load = f;
    return *this;
  }
  operator OptionInfo() const { return info; }  // NOLINT: a finished row is an OptionInfo
};

}  // namespace dcalign::core
