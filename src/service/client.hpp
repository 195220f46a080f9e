#pragma once
// A C++ client of dcalign-server (`dcalign client` and the tests use it). Every call has a
// deadline; a failed call throws RpcError with the server's status code and message.
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "dcalign/matrix.hpp"
#include "dcalign/service/v1/analyst.grpc.pb.h"

namespace dcalign::service {

struct RpcError : Error {
  RpcError(grpc::StatusCode c, const std::string& what) : Error(what), code(c) {}
  grpc::StatusCode code;
};

/// The name of a gRPC status code ("PERMISSION_DENIED").
std::string status_name(grpc::StatusCode code);

struct ClientOptions {
  std::string target;        ///< host:port
  std::string token;         ///< the analyst's or a participant's token; empty sends none
  std::string ca_cert_file;  ///< PEM roots that signed the server's certificate
  std::string server_name;   ///< overrides the name checked against the certificate
  bool insecure = false;     ///< plaintext (a server started with --insecure-localhost)
  double deadline_seconds = 60;
  std::uint64_t chunk_bytes = 1u << 20;
};

class Client {
 public:
  explicit Client(ClientOptions opts);

  /// `request_id` (new_request_id() when empty) makes the call safe to repeat: the server
  /// answers the same id and request within 10 minutes with the first answer, tokens included.
  /// A network failure is retried up to 3 times with the same id.
  v1::CreateCollaborationResponse create(const v1::CollaborationSpec& spec,
                                         const std::string& request_id = "");
  v1::ParticipantToken reissue(const std::string& id, const std::string& participant,
                               const std::string& request_id = "");
  /// Adds a participant who joins after the run (its token; it uploads its anchor only).
  v1::ParticipantToken add_participant(const std::string& id, const std::string& participant,
                                       const std::string& request_id = "");
  std::string run(const std::string& id);
  void delete_collaboration(const std::string& id);
  v1::GetStatusResponse status(const std::string& id);
  v1::GetUploadOffsetResponse upload_offset(const std::string& id, v1::Part part);

  /// Uploads `m` (column-major float64) as `part`, resuming from the server's acknowledged
  /// offset; `stop_after_chunks` > 0 ends the stream early (the tests' disconnect).
  void upload(const std::string& id, v1::Part part, const Matrix<double>& m,
              int stop_after_chunks = 0);
  void delete_release(const std::string& id);
  /// Writes the caller's results (G.npy, report.json, ...) into the directory `out`; every
  /// file's size and SHA-256 are checked. `out` must be new, empty, or an earlier fetch's result
  /// (io::check_replaceable_directory: checked before the call); the new directory carries the
  /// marker io::kWrittenMarker and replaces the old one atomically, and the old one is removed
  /// through its marker only. On any failure or signal, nothing of the fetch stays.
  void fetch(const std::string& id, const std::string& out);
  /// The gRPC health protocol's answer for the whole server: SERVING is true.
  bool healthy();

  const ClientOptions& options() const { return opts_; }

 private:
  void prepare(grpc::ClientContext& ctx) const;
  ClientOptions opts_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Analyst::Stub> stub_;
};

/// A new request id: 24 random characters of [A-Za-z0-9_-].
std::string new_request_id();
/// Silences gRPC's own log lines in a client process (DCALIGN_GRPC_LOG=1 keeps them).
void quiet_grpc_logs();

/// Raw column-major float64 bytes of `m` (the wire format of an upload).
std::string matrix_bytes(const Matrix<double>& m);

}  // namespace dcalign::service
