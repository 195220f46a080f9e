// Fuzzes the analyst service's request parsing and upload assembly (src/service/upload_rules.hpp,
// spec.cpp): the input's first byte chooses
//   odd:  the rest is a serialised CreateCollaborationRequest, parsed and checked (check_spec,
//         align_options): a spec is accepted or refused with InvalidInput, nothing else;
//   even: the rest is a sequence of serialised UploadRequests, each preceded by its length (one
//         byte), assembled as the Upload RPC does against a fixed collaboration: a header first,
//         then chunks. Invariants: the assembled bytes never pass the declared total or the part
//         limit, every refusal is INVALID_ARGUMENT or FAILED_PRECONDITION with a message, and an
//         upload that reaches its total is accepted only with the declared SHA-256.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "dcalign/error.hpp"
#include "service/common.hpp"
#include "service/state.hpp"
#include "service/upload_rules.hpp"

namespace {

using namespace dcalign::service;

constexpr std::uint64_t kPartLimit = 4096;
constexpr std::uint64_t kMaxChunk = 64;

v1::CollaborationSpec fixed_spec() {
  v1::CollaborationSpec s;
  s.set_name("fuzz");
  s.set_method("odc");
  s.set_dim(2);
  s.mutable_anchor()->set_kind("uniform");
  s.mutable_anchor()->set_rows(8);
  s.mutable_anchor()->set_features(4);
  s.add_participants("p0");
  s.set_model("none");
  s.set_max_rows(16);
  return s;
}

void check_refusal(const Refusal& r) {
  if ((r.code != 3 && r.code != 9) || r.message.empty()) std::abort();
}

void fuzz_spec(const std::uint8_t* data, std::size_t size) {
  v1::CreateCollaborationRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return;
  try {
    check_spec(req.spec(), kPartLimit);
    bool float32 = false;
    (void)align_options(req.spec(), &float32);
  } catch (const dcalign::InvalidInput& e) {
    if (std::string(e.what()).empty()) std::abort();
  }
}

void fuzz_upload(const std::uint8_t* data, std::size_t size) {
  static const v1::CollaborationSpec spec = fixed_spec();
  bool have_header = false;
  std::uint64_t total = 0;
  std::string declared_sha, assembled;
  std::size_t at = 0;
  while (at < size) {
    const std::size_t len = data[at++];
    if (len > size - at) return;
    v1::UploadRequest msg;
    const bool parsed = msg.ParseFromArray(data + at, static_cast<int>(len));
    at += len;
    if (!parsed) return;
    if (!have_header) {
      if (!msg.has_header()) return;  // the handler refuses a first message that is no header
      if (auto r = check_header(spec, msg.header(), kPartLimit)) return check_refusal(*r);
      total = msg.header().total_bytes();
      if (total > kPartLimit) std::abort();
      declared_sha = msg.header().sha256();
      have_header = true;
      continue;
    }
    if (!msg.has_chunk()) return;
    if (auto r = check_chunk(msg.chunk(), assembled.size(), total, kMaxChunk))
      return check_refusal(*r);
    assembled += msg.chunk().data();
    if (assembled.size() > total) std::abort();
    if (assembled.size() == total) {
      // The handler accepts the part only when the checksum matches; either way it stops here.
      (void)(sha256_hex(assembled) == declared_sha);
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1)
    fuzz_spec(data + 1, size - 1);
  else
    fuzz_upload(data + 1, size - 1);
  return 0;
}
