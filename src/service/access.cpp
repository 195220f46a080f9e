#include "service/access.hpp"

#include <atomic>

#include "service/common.hpp"
#include "service/rpc.hpp"

namespace dcalign::service::rpc {

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

Status Access::authenticate(ServerContext* ctx, Caller* c) {
  const auto& md = ctx->client_metadata();
  const auto it = md.find("authorization");
  if (it == md.end())
    return error(StatusCode::UNAUTHENTICATED,
                 "no token: send the metadata 'authorization: Bearer <token>'");
  const std::string value(it->second.data(), it->second.size());
  const std::string prefix = "Bearer ";
  if (value.size() < prefix.size() + 16 || value.size() > prefix.size() + 256 ||
      value.compare(0, prefix.size(), prefix) != 0)
    return error(StatusCode::UNAUTHENTICATED,
                 "malformed authorization: expected 'Bearer ' and a token of 16 to 256 "
                 "characters");
  const std::string token = value.substr(prefix.size());
  for (char ch : token)
    if (ch <= ' ' || ch > '~')
      return error(StatusCode::UNAUTHENTICATED,
                   "malformed token: expected printable ASCII characters without spaces");
  const std::string hash = sha256_hex(token);
  if (equal_constant_time(hash, s_.analyst_token_hash())) {
    c->analyst = true;
    return Status::OK;
  }
  if (auto p = s_.store->find_token(hash)) {
    c->who = *p;
    return Status::OK;
  }
  if (s_.store->token_revoked(hash))
    return error(StatusCode::UNAUTHENTICATED,
                 "the token was revoked: ask the analyst for the new one");
  return error(StatusCode::UNAUTHENTICATED, "unknown token");
}

Status Access::check_id(const std::string& id) {
  if (!is_collaboration_id(id))
    return error(StatusCode::INVALID_ARGUMENT,
                 "collaboration_id is not a collaboration id: expected 'c' and 32 hex digits");
  return Status::OK;
}

Status Access::analyst(ServerContext* ctx, Caller* c) {
  if (auto st = authenticate(ctx, c); !st.ok()) return st;
  if (!c->analyst) return error(StatusCode::PERMISSION_DENIED, "only the analyst may call this");
  return Status::OK;
}

Status Access::found(const std::string& id, v1::CollaborationSpec* spec) {
  if (!s_.load_spec(id, spec)) return error(StatusCode::NOT_FOUND, "no collaboration " + id);
  return Status::OK;
}

Status Access::analyst_on(ServerContext* ctx, const std::string& id, Caller* c,
                          v1::CollaborationSpec* spec) {
  if (auto st = analyst(ctx, c); !st.ok()) return st;
  if (auto st = check_id(id); !st.ok()) return st;
  return found(id, spec);
}

Status Access::participant_of(ServerContext* ctx, const std::string& id, Caller* c,
                              v1::CollaborationSpec* spec) {
  if (auto st = authenticate(ctx, c); !st.ok()) return st;
  if (c->analyst)
    return error(StatusCode::PERMISSION_DENIED,
                 "only a participant may call this (the analyst has no access to releases)");
  if (auto st = check_id(id); !st.ok()) return st;
  if (id != c->who.collaboration)
    return error(StatusCode::PERMISSION_DENIED, "this token belongs to another collaboration");
  return found(id, spec);
}

Status Access::member_of(ServerContext* ctx, const std::string& id, Caller* c,
                         v1::CollaborationSpec* spec) {
  if (auto st = authenticate(ctx, c); !st.ok()) return st;
  if (auto st = check_id(id); !st.ok()) return st;
  if (!c->analyst && id != c->who.collaboration)
    return error(StatusCode::PERMISSION_DENIED, "this token belongs to another collaboration");
  return found(id, spec);
}

Status status_of(const char* rpc, const std::exception& e) {
  if (dynamic_cast<const InvalidInput*>(&e))
    return error(StatusCode::INVALID_ARGUMENT, redact_paths(e.what()));
  if (dynamic_cast<const GoneError*>(&e)) return error(StatusCode::NOT_FOUND, e.what());
  static std::atomic<unsigned long> incidents{0};
  const unsigned long incident = ++incidents;
  log_event("error", "rpc_failed", {{"rpc", rpc}, {"incident", incident}, {"error", e.what()}});
  if (out_of_space(e))
    return error(StatusCode::RESOURCE_EXHAUSTED,
                 std::string(rpc) +
                     ": the server is out of disk space: retry once the operator has freed "
                     "space (incident " +
                     std::to_string(incident) + " in the server's log)");
  return error(StatusCode::INTERNAL,
               std::string(rpc) + " failed on the server: " + redact_paths(e.what()) +
                   " (incident " + std::to_string(incident) + " in the server's log)");
}

}  // namespace dcalign::service::rpc
