#pragma once
// Who may call what on dcalign-server (docs/reference/service-api.md, the table of RPCs): the
// bearer token is authenticated first (UNAUTHENTICATED: none, malformed, unknown or revoked),
// then the caller's role and collaboration are checked (PERMISSION_DENIED), then the id
// (INVALID_ARGUMENT) and the collaboration's existence (NOT_FOUND). Internal to src/service.
#include <grpcpp/grpcpp.h>

#include <string>

#include "service/state.hpp"

namespace dcalign::service::rpc {

inline grpc::Status error(grpc::StatusCode code, const std::string& message) {
  return grpc::Status(code, message);
}

/// The authenticated caller: the analyst, or a participant of one collaboration.
struct Caller {
  bool analyst = false;
  Principal who;  ///< a participant's collaboration and name
};

class Access {
 public:
  explicit Access(State& s) : s_(s) {}
  /// Any valid token.
  grpc::Status authenticate(grpc::ServerContext* ctx, Caller* c);
  /// The analyst's token.
  grpc::Status analyst(grpc::ServerContext* ctx, Caller* c);
  /// The analyst's token and an existing collaboration `id` (its spec into `spec`).
  grpc::Status analyst_on(grpc::ServerContext* ctx, const std::string& id, Caller* c,
                          v1::CollaborationSpec* spec);
  /// A participant's token of the collaboration `id`.
  grpc::Status participant_of(grpc::ServerContext* ctx, const std::string& id, Caller* c,
                              v1::CollaborationSpec* spec);
  /// The analyst's token or a participant's of the collaboration `id`.
  grpc::Status member_of(grpc::ServerContext* ctx, const std::string& id, Caller* c,
                         v1::CollaborationSpec* spec);

 private:
  grpc::Status check_id(const std::string& id);
  grpc::Status found(const std::string& id, v1::CollaborationSpec* spec);
  State& s_;
};

}  // namespace dcalign::service::rpc
