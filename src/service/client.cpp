#include "service/client.hpp"

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include <grpc/support/log.h>

#include <cstdlib>
#include <iostream>

#include "core/model_file.hpp"
#include "grpc/health/v1/health.grpc.pb.h"
#include "io/staged_outputs.hpp"
#include "service/common.hpp"

namespace dcalign::service {
namespace {

void check(const grpc::Status& st, const char* rpc) {
  if (!st.ok())
    throw RpcError(st.error_code(), std::string(rpc) + ": " + status_name(st.error_code()) + ": " +
                                        st.error_message());
}

}  // namespace

std::string status_name(grpc::StatusCode code) {
  static const std::map<grpc::StatusCode, const char*> names = {
      {grpc::OK, "OK"},
      {grpc::CANCELLED, "CANCELLED"},
      {grpc::UNKNOWN, "UNKNOWN"},
      {grpc::INVALID_ARGUMENT, "INVALID_ARGUMENT"},
      {grpc::DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
      {grpc::NOT_FOUND, "NOT_FOUND"},
      {grpc::ALREADY_EXISTS, "ALREADY_EXISTS"},
      {grpc::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {grpc::UNAUTHENTICATED, "UNAUTHENTICATED"},
      {grpc::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
      {grpc::FAILED_PRECONDITION, "FAILED_PRECONDITION"},
      {grpc::ABORTED, "ABORTED"},
      {grpc::OUT_OF_RANGE, "OUT_OF_RANGE"},
      {grpc::UNIMPLEMENTED, "UNIMPLEMENTED"},
      {grpc::INTERNAL, "INTERNAL"},
      {grpc::UNAVAILABLE, "UNAVAILABLE"},
      {grpc::DATA_LOSS, "DATA_LOSS"}};
  const auto it = names.find(code);
  return it == names.end() ? "status " + std::to_string(static_cast<int>(code)) : it->second;
}

std::string matrix_bytes(const Matrix<double>& m) {
  return std::string(reinterpret_cast<const char*>(m.data()), m.size() * sizeof(double));
}

Client::Client(ClientOptions opts) : opts_(std::move(opts)) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (opts_.insecure) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    if (!opts_.ca_cert_file.empty())
      ssl.pem_root_certs = read_small_file(opts_.ca_cert_file, "CA certificate");
    creds = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  if (!opts_.server_name.empty()) args.SetSslTargetNameOverride(opts_.server_name);
  args.SetMaxReceiveMessageSize(static_cast<int>(2 * opts_.chunk_bytes + 4096));
  channel_ = grpc::CreateCustomChannel(opts_.target, creds, args);
  stub_ = v1::Analyst::NewStub(channel_);
}

void Client::prepare(grpc::ClientContext& ctx) const {
  ctx.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<long long>(opts_.deadline_seconds * 1000)));
  if (!opts_.token.empty()) ctx.AddMetadata("authorization", "Bearer " + opts_.token);
}

namespace {
// A call that acts once on the server, retried with its request id while the network fails: the
// server answers a repeated id with the first answer (analyst.proto, request_id).
template <typename Call>
void retried(const char* rpc, Call&& call) {
  constexpr int kTries = 3;
  for (int attempt = 1;; ++attempt) {
    const grpc::Status st = call();
    const bool transient = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (st.ok() || !transient || attempt == kTries) return check(st, rpc);
    std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
  }
}
}  // namespace

v1::CreateCollaborationResponse Client::create(const v1::CollaborationSpec& spec,
                                               const std::string& request_id) {
  v1::CreateCollaborationRequest req;
  *req.mutable_spec() = spec;
  req.set_request_id(request_id.empty() ? new_request_id() : request_id);
  v1::CreateCollaborationResponse resp;
  retried("CreateCollaboration", [&] {
    grpc::ClientContext ctx;
    prepare(ctx);
    return stub_->CreateCollaboration(&ctx, req, &resp);
  });
  return resp;
}

v1::ParticipantToken Client::reissue(const std::string& id, const std::string& participant,
                                     const std::string& request_id) {
  v1::ReissueTokenRequest req;
  req.set_collaboration_id(id);
  req.set_participant(participant);
  req.set_request_id(request_id.empty() ? new_request_id() : request_id);
  v1::ReissueTokenResponse resp;
  retried("ReissueToken", [&] {
    grpc::ClientContext ctx;
    prepare(ctx);
    return stub_->ReissueToken(&ctx, req, &resp);
  });
  return resp.token();
}

v1::ParticipantToken Client::add_participant(const std::string& id, const std::string& participant,
                                             const std::string& request_id) {
  v1::AddParticipantRequest req;
  req.set_collaboration_id(id);
  req.set_participant(participant);
  req.set_request_id(request_id.empty() ? new_request_id() : request_id);
  v1::AddParticipantResponse resp;
  retried("AddParticipant", [&] {
    grpc::ClientContext ctx;
    prepare(ctx);
    return stub_->AddParticipant(&ctx, req, &resp);
  });
  return resp.token();
}

std::string Client::run(const std::string& id) {
  grpc::ClientContext ctx;
  prepare(ctx);
  v1::RunRequest req;
  req.set_collaboration_id(id);
  v1::RunResponse resp;
  check(stub_->Run(&ctx, req, &resp), "Run");
  return resp.state();
}

void Client::delete_collaboration(const std::string& id) {
  grpc::ClientContext ctx;
  prepare(ctx);
  v1::DeleteCollaborationRequest req;
  req.set_collaboration_id(id);
  v1::DeleteCollaborationResponse resp;
  check(stub_->DeleteCollaboration(&ctx, req, &resp), "DeleteCollaboration");
}

v1::GetStatusResponse Client::status(const std::string& id) {
  grpc::ClientContext ctx;
  prepare(ctx);
  v1::GetStatusRequest req;
  req.set_collaboration_id(id);
  v1::GetStatusResponse resp;
  check(stub_->GetStatus(&ctx, req, &resp), "GetStatus");
  return resp;
}

v1::GetUploadOffsetResponse Client::upload_offset(const std::string& id, v1::Part part) {
  grpc::ClientContext ctx;
  prepare(ctx);
  v1::GetUploadOffsetRequest req;
  req.set_collaboration_id(id);
  req.set_part(part);
  v1::GetUploadOffsetResponse resp;
  check(stub_->GetUploadOffset(&ctx, req, &resp), "GetUploadOffset");
  return resp;
}

void Client::upload(const std::string& id, v1::Part part, const Matrix<double>& m,
                    int stop_after_chunks) {
  // A part whose previous stream the server still holds (a client that reconnects at once after
  // a disconnect, before the server has noticed it) is refused with ABORTED "... in progress":
  // tried again every 100 ms for up to 5 s.
  constexpr int kBusyRetries = 50;
  const std::string bytes = matrix_bytes(m);
  v1::UploadRequest req;
  auto* h = req.mutable_header();
  h->set_collaboration_id(id);
  h->set_part(part);
  h->set_rows(static_cast<std::uint64_t>(m.rows()));
  h->set_cols(static_cast<std::uint64_t>(m.cols()));
  h->set_total_bytes(bytes.size());
  h->set_sha256(sha256_hex(bytes));
  for (int attempt = 0;; ++attempt) {
    grpc::ClientContext ctx;
    prepare(ctx);
    auto stream = stub_->Upload(&ctx);
    v1::UploadAck ack;
    // The first ack says where the server stands: resume from there.
    if (!stream->Write(req) || !stream->Read(&ack)) {
      stream->WritesDone();
      const grpc::Status st = stream->Finish();
      if (st.error_code() == grpc::StatusCode::ABORTED &&
          st.error_message().find("in progress") != std::string::npos && attempt < kBusyRetries) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      check(st, "Upload");
      throw RpcError(grpc::StatusCode::UNKNOWN, "Upload: the server closed the stream");
    }
    std::uint64_t offset = ack.committed();
    int chunks = 0;
    while (!ack.complete() && offset < bytes.size()) {
      if (stop_after_chunks > 0 && chunks == stop_after_chunks) break;
      const std::uint64_t n = std::min<std::uint64_t>(opts_.chunk_bytes, bytes.size() - offset);
      v1::UploadRequest c;
      c.mutable_chunk()->set_offset(offset);
      c.mutable_chunk()->set_data(bytes.data() + offset, n);
      if (!stream->Write(c) || !stream->Read(&ack)) break;
      offset = ack.committed();
      ++chunks;
    }
    stream->WritesDone();
    const grpc::Status st = stream->Finish();
    if (stop_after_chunks > 0 && chunks == stop_after_chunks && !st.ok() &&
        st.error_code() == grpc::StatusCode::ABORTED)
      return;  // the deliberate disconnect
    check(st, "Upload");
    return;
  }
}

void Client::delete_release(const std::string& id) {
  grpc::ClientContext ctx;
  prepare(ctx);
  v1::DeleteReleaseRequest req;
  req.set_collaboration_id(id);
  v1::DeleteReleaseResponse resp;
  check(stub_->DeleteRelease(&ctx, req, &resp), "DeleteRelease");
}

void Client::fetch(const std::string& id, const std::string& out) {
  namespace fs = std::filesystem;
  const fs::path dest = fs::absolute(out);
  const fs::path parent = dest.parent_path();
  if (!fs::is_directory(parent))
    throw InvalidInput("the output's parent directory " + parent.string() + " does not exist");
  // Before the call: only a new name, an empty directory or an earlier fetch is replaced.
  io::check_replaceable_directory(dest.string(), "the fetch's output");
  grpc::ClientContext ctx;
  prepare(ctx);
  v1::FetchRequest req;
  req.set_collaboration_id(id);
  auto reader = stub_->Fetch(&ctx, req);
  const fs::path tmp = model_file::sibling(parent, dest.filename(), "fetch");
  if (!fs::create_directory(tmp))
    throw IoError("cannot create the temporary directory " + tmp.string());
  io::register_temporary(tmp.string(), true);  // a signal removes it too
  try {
    std::ofstream file;
    std::string name, want_sum;
    std::uint64_t want_size = 0, have = 0;
    std::unique_ptr<Sha256> sum;
    const auto close_file = [&] {
      if (name.empty()) return;
      file.close();
      if (!file || have != want_size || sum->hex() != want_sum)
        throw RpcError(grpc::StatusCode::DATA_LOSS, "Fetch: " + name + " arrived corrupt");
      name.clear();
    };
    v1::FetchChunk chunk;
    while (reader->Read(&chunk)) {
      if (chunk.file() != name) {
        close_file();
        name = chunk.file();
        const fs::path rel = fs::path(name).lexically_normal();
        if (name.empty() || rel.is_absolute() || name.find("..") != std::string::npos ||
            rel.filename() == io::kWrittenMarker || fs::exists(tmp / rel))
          throw RpcError(grpc::StatusCode::DATA_LOSS,
                         "Fetch: the server sent the file name '" + name + "': refused");
        fs::create_directories((tmp / rel).parent_path());
        file.open(tmp / rel, std::ios::binary | std::ios::trunc);
        if (!file) throw IoError("cannot create " + (tmp / rel).string());
        want_size = chunk.file_size();
        want_sum = chunk.sha256();
        have = 0;
        sum = std::make_unique<Sha256>();
      }
      if (chunk.offset() != have || have + chunk.data().size() > want_size)
        throw RpcError(grpc::StatusCode::DATA_LOSS,
                       "Fetch: a chunk of " + name + " out of order or past its size");
      file.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
      sum->update(chunk.data().data(), chunk.data().size());
      have += chunk.data().size();
    }
    close_file();
    check(reader->Finish(), "Fetch");
    if (!fs::exists(tmp / "G.npy"))
      throw RpcError(grpc::StatusCode::DATA_LOSS, "Fetch: the result has no G.npy");
    io::mark_written_directory(tmp.string(), nlohmann::json{{"collaboration", id}}.dump());
    // Checked again: a file put into the old result meanwhile keeps it from being replaced.
    io::check_replaceable_directory(dest.string(), "the fetch's output");
    const std::string old = io::swap_into_place(tmp.string(), dest.string());
    io::forget_temporary(tmp.string());
    model_file::fsync_path(parent, true);
    if (!old.empty() && !io::remove_written_directory(old))
      std::cerr << "dcalign client: note: the previous result was replaced; a file added to it "
                   "meanwhile is kept in "
                << old << "\n";
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    io::forget_temporary(tmp.string());
    throw;
  }
}

void quiet_grpc_logs() {
  // gRPC prints its own error lines (E1128 ... Handshake failed) before the client's message,
  // which says the same for the user. DCALIGN_GRPC_LOG=1 keeps them, for debugging.
  const char* keep = std::getenv("DCALIGN_GRPC_LOG");
  if (keep != nullptr && std::string(keep) == "1") return;
  gpr_set_log_function([](gpr_log_func_args*) {});
}

std::string new_request_id() {
  // 24 characters of [A-Za-z0-9_-] from OpenSSL's randomness (new_token's alphabet).
  return new_token().substr(4, 24);
}

bool Client::healthy() {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  prepare(ctx);
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  const grpc::Status st = stub->Check(&ctx, req, &resp);
  return st.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

}  // namespace dcalign::service
