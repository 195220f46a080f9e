// The schema as documentation: a Markdown reference page (`dcalign options --format markdown`,
// the documentation site's option reference) and JSON for tools.
#include <sstream>

#include <nlohmann/json.hpp>

#include "dcalign/options.hpp"

namespace dcalign {
namespace {

const char* type_word(OptionType t) {
  switch (t) {
    case OptionType::integer:
      return "integer";
    case OptionType::real:
      return "real";
    case OptionType::choice:
      return "choice";
    case OptionType::flag:
      return "flag";
  }
  return "?";
}

std::string code_or_dash(const std::string& key) { return key.empty() ? "-" : "`" + key + "`"; }

}  // namespace

std::string option_reference_markdown() {
  std::ostringstream os;
  os << "# Alignment options\n\n"
     << "Generated from the option schema (`src/core/options.cpp`): `dcalign options --format "
        "markdown`.\nEach option has one name per entry point; `-` means it cannot be given "
        "there.\nA wrong value gets the same message at every entry point.\n\n"
     << "| option | command line | Python | experiment file | service spec | model file | "
        "type | values | default | used by |\n"
     << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const auto& o : option_schema()) {
    os << "| " << o.name << " | " << code_or_dash(o.cli) << " | " << code_or_dash(o.python) << " | "
       << code_or_dash(o.toml) << " | " << code_or_dash(o.spec) << " | " << code_or_dash(o.model)
       << " | " << type_word(o.type) << " | " << o.expected() << " | " << o.default_value
       << (o.unit.empty() ? "" : " " + o.unit) << " | " << o.methods_text()
       << (o.route.empty() ? "" : " (" + o.route + ")") << " |\n";
  }
  os << "\n";
  for (const auto& o : option_schema()) {
    os << "## " << o.name << "\n\n" << o.help << ".\n\n";
    os << "- values: " << o.expected() << "; default " << o.default_value
       << (o.unit.empty() ? "" : " " + o.unit) << "\n";
    os << "- used by: " << o.methods_text() << (o.route.empty() ? "" : ", " + o.route) << "\n";
    if (o.cli_negated) os << "- command line: `" << o.cli << "` sets it to false\n";
    os << "\n";
  }
  return os.str();
}

std::string option_schema_json() {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const auto& o : option_schema()) {
    nlohmann::ordered_json j;
    j["name"] = o.name;
    j["cli"] = o.cli;
    j["python"] = o.python;
    j["toml"] = o.toml;
    j["spec"] = o.spec;
    j["model"] = o.model;
    j["type"] = type_word(o.type);
    j["expected"] = o.expected();
    if (o.type == OptionType::choice) j["choices"] = o.choices;
    j["default"] = o.default_value;
    j["unit"] = o.unit;
    j["help"] = o.help;
    nlohmann::ordered_json methods = nlohmann::ordered_json::array();
    for (Method m : o.methods) methods.push_back(to_string(m));
    j["methods"] = methods;
    j["route"] = o.route;
    j["cli_negated"] = o.cli_negated;
    all.push_back(j);
  }
  return all.dump(2) + "\n";
}

}  // namespace dcalign
