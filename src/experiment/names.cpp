// Method names, FedAvg configuration names and row holders: the parts of the runner's vocabulary
// that the configuration parser needs, kept free of the data and learning layers (the fuzz
// target tests/fuzz/fuzz_toml compiles the parser with this file alone).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/error.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment {

const std::set<std::string>& align_method_names() {
  static const std::set<std::string> names = [] {  // the library's method table
    const std::vector<std::string> all = method_names();
    return std::set<std::string>(all.begin(), all.end());
  }();
  return names;
}

MethodName split_method(const std::string& method) {
  const auto colon = method.find(':');
  if (colon == std::string::npos) return {method, ""};
  return {method.substr(0, colon), method.substr(colon + 1)};
}

bool is_align_method(const std::string& method) {
  const MethodName m = split_method(method);
  if (!align_method_names().count(m.base)) return false;
  if (m.variant.empty()) return m.base == method;
  if (m.base == "odc") return m.variant == "haar" || m.variant == "identity";
  if (m.base == "imakura") return m.variant == "identity" || m.variant == "uniform";
  return false;
}

index_t row_holders(const Config& c) {
  return c.partition == "vertical-joined" ? c.users / 2 : c.users;
}

std::pair<int, int> parse_fedavg_configuration(const std::string& name) {
  // <E>E<B>B: two runs of digits, each ending in its letter.
  const auto bad = [&name](const std::string& why) {
    return InvalidInput("FedAvg configuration \"" + name + "\" " + why +
                        "; expected <E>E<B>B with E local epochs and batch size B, positive "
                        "integers below 10^6, e.g. \"1E32B\"");
  };
  const auto e = name.find('E');
  if (e == std::string::npos || name.size() < 4 || name.back() != 'B') throw bad("is malformed");
  const std::string epochs = name.substr(0, e), batch = name.substr(e + 1, name.size() - e - 2);
  for (const auto* part : {&epochs, &batch}) {
    if (part->empty() || part->size() > 6 ||
        !std::all_of(part->begin(), part->end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      throw bad("is malformed");
  }
  const int E = std::stoi(epochs), B = std::stoi(batch);
  if (E < 1 || B < 1) throw bad("has a zero count");
  return {E, B};
}

}  // namespace dcalign::experiment
