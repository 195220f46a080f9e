// Hardening of dcalign-server against hostile callers and careless operators, in this process:
// stream deadlines and limits that keep every other caller served, one server per data
// directory, no start on a database that does not know the data beside it, orphans removed only
// with proof, what a participant may see of the others, caller-facing messages without server
// paths, and request ids that make the calls with secrets retryable.
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "dcalign/error.hpp"
#include "service/common.hpp"
#include "service/rpc.hpp"
#include "service_fixture.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

std::unique_ptr<v1::Analyst::Stub> raw_stub(int port) {
  return v1::Analyst::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

void authorize(grpc::ClientContext& ctx, const std::string& token, double seconds = 20) {
  ctx.AddMetadata("authorization", "Bearer " + token);
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
}

v1::UploadRequest header_of(const std::string& id, const Matrix<double>& m) {
  const std::string bytes = matrix_bytes(m);
  v1::UploadRequest req;
  auto* h = req.mutable_header();
  h->set_collaboration_id(id);
  h->set_part(v1::PART_ANCHOR);
  h->set_rows(static_cast<std::uint64_t>(m.rows()));
  h->set_cols(static_cast<std::uint64_t>(m.cols()));
  h->set_total_bytes(bytes.size());
  h->set_sha256(sha256_hex(bytes));
  return req;
}

// An upload stream that has sent its header and the first 1000 bytes of `m`, both acknowledged.
using UploadStream = grpc::ClientReaderWriter<v1::UploadRequest, v1::UploadAck>;
std::unique_ptr<UploadStream> upload_first_chunk(v1::Analyst::Stub& stub, grpc::ClientContext& ctx,
                                                 const std::string& id, const Matrix<double>& m) {
  auto stream = stub.Upload(&ctx);
  v1::UploadAck ack;
  v1::UploadRequest chunk;
  chunk.mutable_chunk()->set_offset(0);
  chunk.mutable_chunk()->set_data(matrix_bytes(m).substr(0, 1000));
  EXPECT_TRUE(stream->Write(header_of(id, m)) && stream->Read(&ack));
  EXPECT_TRUE(stream->Write(chunk) && stream->Read(&ack));
  EXPECT_EQ(ack.committed(), 1000u);
  return stream;
}

TEST(ServiceStreams, AnUploadWithoutAHeaderIsEndedAtTheFirstMessageDeadline) {
  TempDir dir;
  auto o = test_options(dir.path / "data");
  o.first_message_seconds = 0.5;
  LiveServer server(o);
  const auto r = client_for(server.port(), kAnalystToken).create(small_spec(1));
  auto stub = raw_stub(server.port());
  grpc::ClientContext ctx;
  authorize(ctx, r.tokens(0).token());
  const auto started = std::chrono::steady_clock::now();
  auto stream = stub->Upload(&ctx);
  v1::UploadAck ack;
  EXPECT_FALSE(stream->Read(&ack));  // the server ends the stream; the client sent nothing
  const grpc::Status st = stream->Finish();
  // Cancelled by the server (its log says why), long before the client's own 20 s deadline.
  EXPECT_EQ(st.error_code(), StatusCode::CANCELLED) << st.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  // Its place among the streams is free again.
  auto p = client_for(server.port(), r.tokens(0).token());
  p.upload(r.collaboration_id(), v1::PART_ANCHOR, random_matrix(40, 4, 1));
}

TEST(ServiceStreams, ASilentUploadIsEndedAtTheIdleTimeoutAndResumes) {
  TempDir dir;
  auto o = test_options(dir.path / "data");
  o.idle_seconds = 0.5;
  LiveServer server(o);
  const auto r = client_for(server.port(), kAnalystToken).create(small_spec(1));
  const Matrix<double> A = random_matrix(40, 4, 3);
  auto stub = raw_stub(server.port());
  {
    grpc::ClientContext ctx;
    authorize(ctx, r.tokens(0).token());
    auto stream = upload_first_chunk(*stub, ctx, r.collaboration_id(), A);
    v1::UploadAck ack;
    // Then silence.
    const auto silent = std::chrono::steady_clock::now();
    EXPECT_FALSE(stream->Read(&ack));
    const grpc::Status st = stream->Finish();
    EXPECT_EQ(st.error_code(), StatusCode::CANCELLED) << st.error_message();
    EXPECT_LT(std::chrono::steady_clock::now() - silent, std::chrono::seconds(5));
  }
  // What was acknowledged stays; the upload resumes from it.
  auto p = client_for(server.port(), r.tokens(0).token());
  EXPECT_EQ(p.upload_offset(r.collaboration_id(), v1::PART_ANCHOR).committed(), 1000u);
  p.upload(r.collaboration_id(), v1::PART_ANCHOR, A);
  EXPECT_TRUE(p.upload_offset(r.collaboration_id(), v1::PART_ANCHOR).complete());
}

// More stalled streams than gRPC has threads for the server (uploads + fetches + 32): without
// the bounds taken before the first read, the thread pool runs dry and every caller gets
// RESOURCE_EXHAUSTED from gRPC itself.
TEST(ServiceStreams, StalledStreamsNeverStarveTheOtherCallers) {
  TempDir dir;
  auto o = test_options(dir.path / "data");
  o.max_upload_streams = 4;
  o.max_fetch_streams = 2;
  o.max_streams_per_peer = 1000;
  LiveServer server(o);
  auto analyst = client_for(server.port(), kAnalystToken);
  const auto r = analyst.create(small_spec(1));
  auto stub = raw_stub(server.port());
  constexpr int kStreams = 4 + 2 + 32 + 20;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::UploadRequest, v1::UploadAck>>> streams;
  for (int k = 0; k < kStreams; ++k) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    authorize(*contexts.back(), r.tokens(0).token(), 60);
    streams.push_back(stub->Upload(contexts.back().get()));
  }
  // Which four streams gRPC hands a slot is its choice, so every stream is read on its own
  // thread: the refused ones end at once, the four holding slots only when cancelled below.
  std::mutex mu;
  std::condition_variable ended;
  int finished = 0, refused = 0;
  std::vector<std::thread> readers;
  for (auto& stream : streams) {
    readers.emplace_back([&, s = stream.get()] {
      v1::UploadAck ack;
      while (s->Read(&ack)) {
      }
      const grpc::Status st = s->Finish();
      std::lock_guard<std::mutex> lock(mu);
      ++finished;
      refused += st.error_code() == StatusCode::RESOURCE_EXHAUSTED &&
                 st.error_message().find("uploads in progress, its limit") != std::string::npos;
      ended.notify_all();
    });
  }
  {
    // Streams beyond the bound were refused with the reason, before any slot was given back.
    std::unique_lock<std::mutex> lock(mu);
    ended.wait_for(lock, std::chrono::seconds(8), [&] { return finished >= kStreams - 4; });
    EXPECT_EQ(finished, kStreams - 4);
    EXPECT_EQ(refused, kStreams - 4);
  }
  // The unary calls are served while the four slots are held.
  EXPECT_EQ(analyst.status(r.collaboration_id()).job_state(), "none");
  EXPECT_TRUE(analyst.healthy());
  for (auto& c : contexts) c->TryCancel();
  for (auto& t : readers) t.join();
}

TEST(ServiceStreams, OneAddressHoldsAtMostItsShareOfTheStreams) {
  TempDir dir;
  auto o = test_options(dir.path / "data");
  o.max_streams_per_peer = 2;
  LiveServer server(o);
  const auto r = client_for(server.port(), kAnalystToken).create(small_spec(1));
  auto stub = raw_stub(server.port());
  grpc::ClientContext a, b, c;
  for (auto* ctx : {&a, &b, &c}) authorize(*ctx, r.tokens(0).token());
  auto s1 = stub->Upload(&a);
  auto s2 = stub->Upload(&b);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto s3 = stub->Upload(&c);
  v1::UploadAck ack;
  EXPECT_FALSE(s3->Read(&ack));
  const grpc::Status st = s3->Finish();
  EXPECT_EQ(st.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("this address has 2 uploads and fetches in progress"),
            std::string::npos)
      << st.error_message();
  a.TryCancel();
  b.TryCancel();
}

TEST(ServiceStreams, ACollaborationDeletedDuringAnUploadIsNotFound) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  const auto r = analyst.create(small_spec(1));
  const Matrix<double> A = random_matrix(40, 4, 9);
  const std::string bytes = matrix_bytes(A);
  auto stub = raw_stub(server.port());
  grpc::ClientContext ctx;
  authorize(ctx, r.tokens(0).token());
  auto stream = upload_first_chunk(*stub, ctx, r.collaboration_id(), A);
  analyst.delete_collaboration(r.collaboration_id());
  v1::UploadAck ack;
  v1::UploadRequest chunk;
  chunk.mutable_chunk()->set_offset(1000);
  chunk.mutable_chunk()->set_data(bytes.substr(1000, 1000));
  stream->Write(chunk);
  while (stream->Read(&ack)) {
  }
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_NE(st.error_message().find("was deleted"), std::string::npos) << st.error_message();
  // And the deleted collaboration's directory did not come back.
  EXPECT_FALSE(fs::exists(dir.path / "data" / "collaborations" / r.collaboration_id()));
}

TEST(ServiceDataDirectory, OneServerPerDirectory) {
  TempDir dir;
  LiveServer first(test_options(dir.path / "data"));
  Server second(test_options(dir.path / "data"));
  try {
    second.start();
    ADD_FAILURE() << "a second server started on a directory in use";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("is in use by another dcalign-server (PID " +
                                         std::to_string(::getpid()) + ")"),
              std::string::npos)
        << e.what();
  }
  // The first one is untouched by the attempt.
  EXPECT_TRUE(client_for(first.port(), kAnalystToken).healthy());
}

// A collaboration with an uploaded release, on a server that is then stopped.
std::string collaboration_on_disk(const fs::path& data) {
  LiveServer server(test_options(data));
  const auto r = client_for(server.port(), kAnalystToken).create(small_spec(2));
  client_for(server.port(), r.tokens(0).token())
      .upload(r.collaboration_id(), v1::PART_ANCHOR, random_matrix(40, 4, 1));
  return r.collaboration_id();
}

void expect_start_refused(const fs::path& data, const std::string& words) {
  Server s(test_options(data));
  try {
    s.start();
    ADD_FAILURE() << "the server started";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Restore dcalign.db"), std::string::npos) << e.what();
  }
}

TEST(ServiceDataDirectory, AMissingOrEmptyDatabaseBesideCollaborationsStopsTheStart) {
  TempDir dir;
  const fs::path data = dir.path / "data";
  const std::string id = collaboration_on_disk(data);
  const fs::path part = data / "collaborations" / id / "uploads" / "p0" / "anchor.f64";
  ASSERT_TRUE(fs::exists(part));
  for (const char* f : {"dcalign.db-wal", "dcalign.db-shm"}) fs::remove(data / f);
  fs::rename(data / "dcalign.db", dir.path / "saved.db");
  expect_start_refused(data, "is missing");
  { std::ofstream(data / "dcalign.db"); }
  expect_start_refused(data, "is empty");
  // A valid database that knows no collaboration (another server's fresh one).
  fs::remove(data / "dcalign.db");
  { LiveServer other(test_options(dir.path / "other")); }
  fs::copy_file(dir.path / "other" / "dcalign.db", data / "dcalign.db");
  expect_start_refused(data, "holds no collaboration");
  // Nothing was deleted; with the database back, the server starts and knows the release.
  EXPECT_TRUE(fs::exists(part));
  fs::remove(data / "dcalign.db");
  fs::rename(dir.path / "saved.db", data / "dcalign.db");
  LiveServer server(test_options(data));
  EXPECT_TRUE(client_for(server.port(), kAnalystToken).status(id).participants(0).uploaded());
}

TEST(ServiceDataDirectory, OnlyDirectoriesProvedOrphansAreRemoved) {
  TempDir dir;
  const fs::path data = dir.path / "data";
  const std::string kept = collaboration_on_disk(data);
  std::string deleted;
  {
    LiveServer server(test_options(data));
    auto analyst = client_for(server.port(), kAnalystToken);
    deleted = analyst.create(small_spec(1)).collaboration_id();
    fs::copy(data / "collaborations" / deleted, dir.path / "copy", fs::copy_options::recursive);
    analyst.delete_collaboration(deleted);
  }
  // A deletion cut short between the rows and the files: the directory is back, its tombstone
  // in the store. And a directory the store never knew (a restore from another backup).
  fs::copy(dir.path / "copy", data / "collaborations" / deleted, fs::copy_options::recursive);
  const std::string stranger = "c" + std::string(32, 'a');
  fs::create_directories(data / "collaborations" / stranger / "uploads");
  LiveServer server(test_options(data));
  EXPECT_FALSE(fs::exists(data / "collaborations" / deleted));
  EXPECT_TRUE(fs::exists(data / "collaborations" / stranger));
  EXPECT_TRUE(fs::exists(data / "collaborations" / kept));
}

TEST(ServicePrivacy, AParticipantSeesTheOthersProgressNotTheirShapesNorTheJobsErrors) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  auto spec = small_spec(2);
  const auto r = analyst.create(spec);
  const std::string& id = r.collaboration_id();
  auto p0 = client_for(server.port(), r.tokens(0).token());
  auto p1 = client_for(server.port(), r.tokens(1).token());
  p0.upload(id, v1::PART_ANCHOR, random_matrix(40, 4, 1));
  // A rank-deficient anchor fails the job; its error names participant p1.
  Matrix<double> flat(40, 4);
  for (index_t k = 0; k < flat.size(); ++k) flat.data()[k] = 1.0;
  p1.upload(id, v1::PART_ANCHOR, flat);
  for (int i = 0; i < 500 && analyst.status(id).job_state() != "failed" &&
                  analyst.status(id).job_state() != "done";
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto as_analyst = analyst.status(id);
  const auto as_p0 = p0.status(id);
  ASSERT_EQ(as_p0.participants_size(), 2);
  EXPECT_TRUE(as_p0.participants(1).uploaded());
  EXPECT_EQ(as_p0.participants(1).parts_size(), 0);  // no shape of p1's
  EXPECT_EQ(as_p0.participants(0).parts_size(), 1);  // its own
  EXPECT_EQ(as_analyst.participants(1).parts_size(), 1);
  if (as_analyst.job_state() == "failed") {
    EXPECT_FALSE(as_analyst.job_error().empty());
    EXPECT_EQ(as_p0.job_error(), rpc::kJobErrorForParticipants);
  }
}

TEST(ServiceMessages, CallersReadNoServerPathsAndAFullDiskIsResourceExhausted) {
  EXPECT_EQ(redact_paths("cannot open /srv/dcalign/data/collaborations/c1/x.f64: No such file"),
            "cannot open <server path>: No such file");
  EXPECT_EQ(redact_paths("database '/var/lib/dc/dcalign.db': step failed"),
            "database '<server path>': step failed");
  EXPECT_EQ(redact_paths("1/2 of the rows, ratio a/b"), "1/2 of the rows, ratio a/b");
  const grpc::Status internal = rpc::status_of(
      "Upload", IoError("cannot write /srv/data/collaborations/c/u/p/anchor.partial: "
                        "Input/output error"));
  EXPECT_EQ(internal.error_code(), StatusCode::INTERNAL);
  EXPECT_EQ(internal.error_message().find("/srv"), std::string::npos) << internal.error_message();
  EXPECT_NE(internal.error_message().find("incident"), std::string::npos);
  const grpc::Status full = rpc::status_of("Upload", OsError("cannot write /srv/x", ENOSPC));
  EXPECT_EQ(full.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(full.error_message().find("out of disk space"), std::string::npos);
  const grpc::Status fs_full = rpc::status_of(
      "Fetch", fs::filesystem_error("copy", std::make_error_code(std::errc::no_space_on_device)));
  EXPECT_EQ(fs_full.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(rpc::status_of("Run", GoneError("collaboration c was deleted")).error_code(),
            StatusCode::NOT_FOUND);
}

TEST(ServiceMessages, AValueBeyondFloat32IsNamedInAFloat32Collaboration) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto spec = small_spec(1);
  (*spec.mutable_options())["precision"] = "float32";
  const auto r = client_for(server.port(), kAnalystToken).create(spec);
  auto p = client_for(server.port(), r.tokens(0).token());
  Matrix<double> A = random_matrix(40, 4, 2);
  A(7, 2) = 3e300;
  expect_rpc_error([&] { p.upload(r.collaboration_id(), v1::PART_ANCHOR, A); },
                   StatusCode::INVALID_ARGUMENT,
                   "holds 3.0000000000000002e+300 at row 7, column 2, out of float32's range");
  A(7, 2) = 1;
  p.upload(r.collaboration_id(), v1::PART_ANCHOR, A);
}

TEST(ServiceRequestIds, ARetryGetsTheFirstAnswerAndTheSameSecrets) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  const std::string rid = new_request_id();
  const auto first = analyst.create(small_spec(2), rid);
  const auto again = analyst.create(small_spec(2), rid);
  EXPECT_EQ(again.collaboration_id(), first.collaboration_id());
  EXPECT_EQ(again.tokens(1).token(), first.tokens(1).token());
  expect_rpc_error([&] { analyst.create(small_spec(3), rid); }, StatusCode::INVALID_ARGUMENT,
                   "was used for another request");
  expect_rpc_error([&] { analyst.create(small_spec(2), "short"); }, StatusCode::INVALID_ARGUMENT,
                   "request_id is not a request id");
  // A reissue repeated: the same new token, which works (the old one was revoked once).
  const std::string r2 = new_request_id();
  const auto t1 = analyst.reissue(first.collaboration_id(), "p0", r2);
  const auto t2 = analyst.reissue(first.collaboration_id(), "p0", r2);
  EXPECT_EQ(t1.token(), t2.token());
  EXPECT_EQ(client_for(server.port(), t2.token()).status(first.collaboration_id()).job_state(),
            "none");
  // Without an id (or with a new one) each call acts.
  EXPECT_NE(analyst.create(small_spec(2)).collaboration_id(), first.collaboration_id());
}

}  // namespace
}  // namespace dcalign::service::testing
