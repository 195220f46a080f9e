#include "service/upload_rules.hpp"

#include <algorithm>

#include "service/state.hpp"

namespace dcalign::service {
namespace {

constexpr int kInvalidArgument = 3;     // grpc::StatusCode::INVALID_ARGUMENT
constexpr int kFailedPrecondition = 9;  // grpc::StatusCode::FAILED_PRECONDITION

Refusal invalid(const std::string& message) { return Refusal{kInvalidArgument, message}; }

bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char ch) {
           return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
         });
}

}  // namespace

std::optional<Refusal> check_part(const v1::CollaborationSpec& spec, int part) {
  if (part != v1::PART_ANCHOR && part != v1::PART_DATA && part != v1::PART_LABELS)
    return invalid("part " + std::to_string(part) +
                   " is not a part: expected anchor, data or labels");
  if (!needs_part(spec, static_cast<v1::Part>(part)))
    return invalid(std::string("this collaboration takes no ") + part_name(part) +
                   " (it trains no model)");
  return std::nullopt;
}

std::optional<Refusal> check_header(const v1::CollaborationSpec& spec, const v1::UploadHeader& h,
                                    std::uint64_t max_part_bytes) {
  if (auto r = check_part(spec, h.part())) return r;
  const std::string what = part_name(h.part());
  const std::uint64_t want_cols = h.part() == v1::PART_LABELS ? 1 : spec.dim();
  if (h.part() == v1::PART_ANCHOR && h.rows() != spec.anchor().rows())
    return invalid("the anchor has " + std::to_string(h.rows()) + " rows: expected the anchor's " +
                   std::to_string(spec.anchor().rows()));
  if (h.part() != v1::PART_ANCHOR && (h.rows() < 1 || h.rows() > spec.max_rows()))
    return invalid("the " + what + " has " + std::to_string(h.rows()) +
                   " rows: expected 1 to the declared bound " + std::to_string(spec.max_rows()));
  if (h.cols() != want_cols)
    return invalid("the " + what + " has " + std::to_string(h.cols()) + " columns: expected " +
                   std::to_string(want_cols));
  // rows <= max(anchor rows, max_rows) <= 1e8 and cols <= 4096 (check_spec): no overflow.
  const std::uint64_t total = h.rows() * h.cols() * sizeof(double);
  if (h.total_bytes() != total)
    return invalid("total_bytes " + std::to_string(h.total_bytes()) + " does not match " +
                   std::to_string(h.rows()) + " x " + std::to_string(h.cols()) +
                   " float64 values: expected " + std::to_string(total));
  if (total > max_part_bytes)
    return invalid("the " + what + " of " + std::to_string(total) +
                   " bytes exceeds the server's part limit of " + std::to_string(max_part_bytes));
  if (!is_sha256_hex(h.sha256()))
    return invalid("sha256 is not a SHA-256: expected 64 lower-case hex digits");
  return std::nullopt;
}

std::optional<Refusal> check_chunk(const v1::UploadChunk& chunk, std::uint64_t committed,
                                   std::uint64_t total, std::uint64_t max_chunk) {
  const std::uint64_t size = chunk.data().size();
  if (chunk.offset() != committed)
    return Refusal{kFailedPrecondition, "a chunk at offset " + std::to_string(chunk.offset()) +
                                            ": expected the acknowledged offset " +
                                            std::to_string(committed)};
  if (size == 0 || size > max_chunk)
    return invalid("a chunk of " + std::to_string(size) + " bytes: expected 1 to " +
                   std::to_string(max_chunk));
  if (size > total - committed)
    return invalid("a chunk ending at byte " + std::to_string(committed + size) +
                   ", past the declared total of " + std::to_string(total));
  return std::nullopt;
}

}  // namespace dcalign::service
