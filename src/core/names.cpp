// String names of enumerations, shared by the CLI, configs and reports.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "core/methods.hpp"
#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/user.hpp"

namespace dcalign {
namespace {

std::string normalise(std::string s) {
  std::string out;
  for (char ch : s) {
    if (ch == '-' || ch == '_' || ch == ' ') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  }
  return out;
}

[[noreturn]] void unknown(const char* what, const std::string& name, const char* expected) {
  throw InvalidInput(std::string("unknown ") + what + " '" + name +
                     "'; expected one of: " + expected);
}

}  // namespace

std::string to_string(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }
Device parse_device(const std::string& name) {
  const auto n = normalise(name);
  if (n == "cpu") return Device::cpu;
  if (n == "cuda" || n == "gpu") return Device::cuda;
  unknown("device", name, "cpu, cuda");
}

std::string to_string(SvdAlgorithm a) {
  switch (a) {
    case SvdAlgorithm::exact:
      return "exact";
    case SvdAlgorithm::randomized:
      return "randomized";
    case SvdAlgorithm::gram:
      return "gram";
  }
  return "?";
}
SvdAlgorithm parse_svd_algorithm(const std::string& name) {
  const auto n = normalise(name);
  if (n == "exact") return SvdAlgorithm::exact;
  if (n == "randomized" || n == "randomised") return SvdAlgorithm::randomized;
  if (n == "gram") return SvdAlgorithm::gram;
  unknown("svd algorithm", name, "exact, randomized, gram");
}

std::string to_string(PolarMethod m) {
  switch (m) {
    case PolarMethod::automatic:
      return "auto";
    case PolarMethod::svd:
      return "svd";
    case PolarMethod::iterative:
      return "iterative";
  }
  return "auto";
}
PolarMethod parse_polar_method(const std::string& name) {
  const auto n = normalise(name);
  if (n == "auto" || n == "automatic") return PolarMethod::automatic;
  if (n == "svd") return PolarMethod::svd;
  if (n == "iterative" || n == "newton") return PolarMethod::iterative;
  unknown("polar method", name, "auto, svd, iterative");
}

std::string to_string(Method m) { return core::method_info(m).name; }
Method parse_method(const std::string& name) {
  const auto n = normalise(name);
  for (const auto& info : core::method_table()) {
    if (n == normalise(info.name)) return info.method;
    for (const auto& alias : info.aliases)
      if (n == alias) return info.method;
  }
  std::string expected;
  for (const auto& m : method_names()) expected += (expected.empty() ? "" : ", ") + m;
  unknown("alignment method", name, expected.c_str());
}
std::vector<std::string> method_names() {
  std::vector<std::string> names;
  for (const auto& info : core::method_table()) names.emplace_back(info.name);
  return names;
}

std::string to_string(TargetRotation r) {
  return r == TargetRotation::haar       ? "haar"
         : r == TargetRotation::identity ? "identity"
                                         : "supplied";
}
std::string to_string(RightFactor r) {
  return r == RightFactor::identity  ? "identity"
         : r == RightFactor::uniform ? "uniform"
                                     : "supplied";
}
std::string to_string(KawakamiForm f) { return f == KawakamiForm::qr_svd ? "qr-svd" : "eigen"; }
std::string to_string(GoppInit i) { return i == GoppInit::spectral ? "spectral" : "odc"; }

TargetRotation parse_target_rotation(const std::string& name) {
  const auto n = normalise(name);
  if (n == "haar" || n == "random") return TargetRotation::haar;
  if (n == "identity") return TargetRotation::identity;
  if (n == "supplied") return TargetRotation::supplied;
  unknown("target rotation", name, "haar, identity, supplied");
}
RightFactor parse_right_factor(const std::string& name) {
  const auto n = normalise(name);
  if (n == "identity") return RightFactor::identity;
  if (n == "uniform" || n == "random") return RightFactor::uniform;
  if (n == "supplied") return RightFactor::supplied;
  unknown("right factor", name, "identity, uniform, supplied");
}
KawakamiForm parse_kawakami_form(const std::string& name) {
  const auto n = normalise(name);
  if (n == "qrsvd" || n == "qr") return KawakamiForm::qr_svd;
  if (n == "eigen" || n == "gep") return KawakamiForm::eigen;
  unknown("Kawakami-DC form", name, "qr-svd, eigen");
}
GoppInit parse_gopp_init(const std::string& name) {
  const auto n = normalise(name);
  if (n == "spectral" || n == "u") return GoppInit::spectral;
  if (n == "odc") return GoppInit::odc;
  unknown("GOPP start", name, "spectral, odc");
}

AnchorKind parse_anchor_kind(const std::string& name) {
  const auto n = normalise(name);
  if (n == "uniform") return AnchorKind::uniform;
  if (n == "normal" || n == "gaussian") return AnchorKind::normal;
  unknown("anchor kind", name, "uniform, normal");
}
std::string to_string(AnchorKind k) { return k == AnchorKind::uniform ? "uniform" : "normal"; }

SpanCondition parse_condition(const std::string& name) {
  const auto n = normalise(name);
  if (n == "samespanorth") return SpanCondition::same_span_orth;
  if (n == "samespan") return SpanCondition::same_span;
  if (n == "diffspanorth") return SpanCondition::diff_span_orth;
  if (n == "diffspan") return SpanCondition::diff_span;
  unknown("secret-basis condition", name, "SameSpan-Orth, SameSpan, DiffSpan-Orth, DiffSpan");
}
std::string to_string(SpanCondition c) {
  switch (c) {
    case SpanCondition::same_span_orth:
      return "SameSpan-Orth";
    case SpanCondition::same_span:
      return "SameSpan";
    case SpanCondition::diff_span_orth:
      return "DiffSpan-Orth";
    case SpanCondition::diff_span:
      return "DiffSpan";
  }
  return "?";
}
bool shares_span(SpanCondition c) {
  return c == SpanCondition::same_span_orth || c == SpanCondition::same_span;
}
bool orthonormal_mixing(SpanCondition c) {
  return c == SpanCondition::same_span_orth || c == SpanCondition::diff_span_orth;
}

}  // namespace dcalign
