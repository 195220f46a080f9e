#pragma once
// The rules an upload keeps, apart from the stream that carries it, so that the RPC handler
// (transfer.cpp) and the fuzz target (tests/fuzz/fuzz_upload.cpp) apply the same ones.
#include <cstdint>
#include <optional>
#include <string>

#include "dcalign/service/v1/analyst.pb.h"

namespace dcalign::service {

/// Why a message is refused: a gRPC status code (grpc::StatusCode's value) and the message.
struct Refusal {
  int code = 0;
  std::string message;
};

/// The header against the collaboration: a part it takes, the declared shape within its
/// bounds, total_bytes = rows x cols x 8 within `max_part_bytes`, a well-formed SHA-256.
std::optional<Refusal> check_header(const v1::CollaborationSpec& spec, const v1::UploadHeader& h,
                                    std::uint64_t max_part_bytes);
/// A chunk after `committed` of `total` acknowledged bytes: at that offset, 1 to `max_chunk`
/// bytes, not past the total.
std::optional<Refusal> check_chunk(const v1::UploadChunk& chunk, std::uint64_t committed,
                                   std::uint64_t total, std::uint64_t max_chunk);
/// The part's refusal when the collaboration does not take it (or it is not a part).
std::optional<Refusal> check_part(const v1::CollaborationSpec& spec, int part);

}  // namespace dcalign::service
