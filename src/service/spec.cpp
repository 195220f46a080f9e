// Collaboration specs: what a collaboration may ask for, and what it runs.
#include <set>

#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"
#include "dcalign/options.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/user.hpp"
#include "service/common.hpp"
#include "service/state.hpp"
#include "service/train.hpp"

namespace dcalign::service {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw InvalidInput(message);
}

std::string range(std::uint64_t lo, std::uint64_t hi) {
  return "expected " + std::to_string(lo) + " to " + std::to_string(hi);
}

}  // namespace

const char* part_name(int part) {
  switch (part) {
    case v1::PART_ANCHOR:
      return "anchor";
    case v1::PART_DATA:
      return "data";
    case v1::PART_LABELS:
      return "labels";
    default:
      return "unknown";
  }
}

bool needs_part(const v1::CollaborationSpec& spec, v1::Part part) {
  if (part == v1::PART_ANCHOR) return true;
  return (part == v1::PART_DATA || part == v1::PART_LABELS) && spec.model() != "none";
}

void check_spec(const v1::CollaborationSpec& spec, std::uint64_t part_limit) {
  check_name("spec.name", spec.name());
  (void)parse_method(spec.method());
  const std::uint64_t l = spec.dim();
  require(l >= 1 && l <= SpecLimits::kMaxDim,
          "spec.dim " + std::to_string(l) + " is out of range: " + range(1, SpecLimits::kMaxDim));
  const auto& a = spec.anchor();
  (void)parse_anchor_kind(a.kind());
  require(a.rows() >= l && a.rows() <= SpecLimits::kMaxAnchorRows,
          "spec.anchor.rows " + std::to_string(a.rows()) +
              " is out of range: " + range(l, SpecLimits::kMaxAnchorRows) + " (at least dim)");
  require(a.features() >= l && a.features() <= SpecLimits::kMaxFeatures,
          "spec.anchor.features " + std::to_string(a.features()) +
              " is out of range: " + range(l, SpecLimits::kMaxFeatures) + " (at least dim)");
  const int c = spec.participants_size();
  require(c >= 1 && c <= SpecLimits::kMaxParticipants,
          "spec.participants has " + std::to_string(c) + " names: expected 1 to " +
              std::to_string(SpecLimits::kMaxParticipants));
  std::set<std::string> names;
  for (const auto& p : spec.participants()) {
    check_name("participant", p);
    require(names.insert(p).second, "participant '" + p + "' is named twice in spec.participants");
  }
  check_model_spec(spec);
  require(spec.max_rows() <= SpecLimits::kMaxRows,
          "spec.max_rows " + std::to_string(spec.max_rows()) +
              " is out of range: " + range(0, SpecLimits::kMaxRows));
  require(a.rows() * l * 8 <= part_limit && spec.max_rows() * l * 8 <= part_limit,
          "the spec's largest part (" + std::to_string(std::max(a.rows(), spec.max_rows())) +
              " x " + std::to_string(l) + " float64) exceeds the server's part limit of " +
              std::to_string(part_limit) + " bytes");
  if (spec.distributed().ranks() != 0) {
    const auto& d = spec.distributed();
    require(d.ranks() >= 2 && d.ranks() <= SpecLimits::kMaxRanks,
            "spec.distributed.ranks " + std::to_string(d.ranks()) +
                " is out of range: expected 0 (one process) or 2 to " +
                std::to_string(SpecLimits::kMaxRanks));
    require(static_cast<int>(d.ranks()) <= c,
            "spec.distributed.ranks " + std::to_string(d.ranks()) + " exceeds the " +
                std::to_string(c) + " participants: every rank needs at least one");
    if (!d.hostfile().empty()) check_name("spec.distributed.hostfile", d.hostfile());
  } else {
    require(spec.distributed().hostfile().empty(),
            "spec.distributed.hostfile is set but spec.distributed.ranks is 0");
  }
  // The options map: the schema's spec keys (dcalign/options.hpp), each checked by its row and
  // refused when the collaboration's method does not use it.
  (void)align_request(spec);
}

AlignRequest align_request(const v1::CollaborationSpec& spec) {
  AlignRequest r;
  r.align.method = parse_method(spec.method());
  // The seed through its schema row, which also derives the sketch's seed from it, as at every
  // other entry point.
  set_option(r, option_info("seed"), std::uint64_t{spec.seed()}, "spec.seed", OptionEntry::service);
  for (const auto& [key, value] : spec.options()) {
    const std::string where = "spec.options." + key;
    const OptionInfo* row = find_option(OptionEntry::service, key, r.align.method);
    if (!row) {
      std::string keys;  // the schema's spec keys, for the message
      for (const auto& o : option_schema())
        if (!o.spec.empty()) keys += (keys.empty() ? "" : ", ") + o.spec;
      throw InvalidInput("spec.options has the unknown key '" + shown_text(key) +
                         "': expected one of: " + keys);
    }
    set_option(r, *row, value, where, OptionEntry::service);
    check_option_used(*row, r.align.method, where);
  }
  return r;
}

AlignOptions align_options(const v1::CollaborationSpec& spec, bool* float32) {
  const AlignRequest r = align_request(spec);
  *float32 = r.float32;
  return r.align;
}

}  // namespace dcalign::service
