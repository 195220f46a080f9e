// dcalign-server end to end in one process: the protocol, its results against the same
// alignment run in-process, resumable uploads, deletion, and bad input.
#include <gtest/gtest.h>

#include <fstream>

#include "dcalign/align.hpp"
#include "dcalign/npy.hpp"
#include "service/common.hpp"
#include "service_fixture.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

struct Collaboration {
  std::string id;
  std::vector<std::string> tokens;
};

Collaboration create(int port, const v1::CollaborationSpec& spec) {
  auto analyst = client_for(port, kAnalystToken);
  const auto resp = analyst.create(spec);
  Collaboration c{resp.collaboration_id(), {}};
  for (const auto& t : resp.tokens()) c.tokens.push_back(t.token());
  return c;
}

// Polls the job until it leaves queued/running (the worker wakes at once when notified).
std::string wait_for_job(Client& c, const std::string& id) {
  for (int i = 0; i < 600; ++i) {
    const auto st = c.status(id).job_state();
    if (st != "queued" && st != "running") return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "timeout";
}

// A raw Upload stream, for messages the Client never sends.
struct RawUpload {
  RawUpload(int port, const std::string& token)
      : channel(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                    grpc::InsecureChannelCredentials())),
        stub(v1::Analyst::NewStub(channel)) {
    ctx.AddMetadata("authorization", "Bearer " + token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    stream = stub->Upload(&ctx);
  }
  grpc::Status finish() {
    stream->WritesDone();
    return stream->Finish();
  }
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Analyst::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UploadRequest, v1::UploadAck>> stream;
};

v1::UploadRequest header(const std::string& id, v1::Part part, std::uint64_t rows,
                         std::uint64_t cols, const std::string& bytes) {
  v1::UploadRequest r;
  auto* h = r.mutable_header();
  h->set_collaboration_id(id);
  h->set_part(part);
  h->set_rows(rows);
  h->set_cols(cols);
  h->set_total_bytes(bytes.size());
  h->set_sha256(sha256_hex(bytes));
  return r;
}

v1::UploadRequest chunk(std::uint64_t offset, const std::string& data) {
  v1::UploadRequest r;
  r.mutable_chunk()->set_offset(offset);
  r.mutable_chunk()->set_data(data);
  return r;
}

TEST(Service, ThreeParticipantsGetTheInProcessAlignment) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  const auto spec = small_spec(3, 40, 4);
  const auto c = create(server.port(), spec);
  std::vector<Matrix<double>> anchors;
  for (int i = 0; i < 3; ++i) {
    anchors.push_back(random_matrix(40, 4, 100 + i));
    // Small chunks: 1280 bytes in 4 chunks of at most 400.
    client_for(server.port(), c.tokens[i], 400).upload(c.id, v1::PART_ANCHOR, anchors.back());
  }
  auto analyst = client_for(server.port(), kAnalystToken);
  ASSERT_EQ(wait_for_job(analyst, c.id), "done");
  AlignOptions opts;
  opts.method = Method::odc;
  opts.seed = 5;
  const auto expected = align(Stack<double>::from_matrices(anchors), opts);
  for (int i = 0; i < 3; ++i) {
    const fs::path out = dir.path / ("result" + std::to_string(i));
    client_for(server.port(), c.tokens[i]).fetch(c.id, out.string());
    const auto G = read_npy_matrix<double>((out / "G.npy").string());
    ASSERT_EQ(G.rows(), 4);
    for (index_t k = 0; k < G.size(); ++k)
      EXPECT_EQ(G.data()[k], expected.G[i].data()[k]) << "participant " << i << " entry " << k;
    std::ifstream report(out / "report.json");
    EXPECT_TRUE(report.good());
  }
  const auto st = analyst.status(c.id);
  EXPECT_EQ(st.job_attempts(), 1u);
  EXPECT_NE(st.job_report().find("\"orthogonality_error\""), std::string::npos);
  for (const auto& p : st.participants()) EXPECT_TRUE(p.uploaded());
}

TEST(Service, UploadResumesFromTheAcknowledgedOffset) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  const auto c = create(server.port(), small_spec(2, 40, 4));
  const Matrix<double> A = random_matrix(40, 4, 7);  // 1280 bytes
  auto p0 = client_for(server.port(), c.tokens[0], 300);
  p0.upload(c.id, v1::PART_ANCHOR, A, /*stop_after_chunks=*/2);
  auto off = p0.upload_offset(c.id, v1::PART_ANCHOR);
  EXPECT_EQ(off.committed(), 600u);
  EXPECT_FALSE(off.complete());
  EXPECT_EQ(off.total(), 1280u);
  p0.upload(c.id, v1::PART_ANCHOR, A);
  off = p0.upload_offset(c.id, v1::PART_ANCHOR);
  EXPECT_TRUE(off.complete());
  // The stored part is exactly A.
  std::ifstream f(dir.path / "data" / "collaborations" / c.id / "uploads" / "p0" / "anchor.f64",
                  std::ios::binary);
  std::string stored((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(stored, matrix_bytes(A));
  // A chunk at another offset than the acknowledged one is refused, not duplicated.
  const auto c2 = create(server.port(), small_spec(1, 40, 4));
  RawUpload raw(server.port(), c2.tokens[0]);
  const std::string bytes = matrix_bytes(A);
  v1::UploadAck ack;
  ASSERT_TRUE(raw.stream->Write(header(c2.id, v1::PART_ANCHOR, 40, 4, bytes)));
  ASSERT_TRUE(raw.stream->Read(&ack));
  ASSERT_TRUE(raw.stream->Write(chunk(0, bytes.substr(0, 100))));
  ASSERT_TRUE(raw.stream->Read(&ack));
  EXPECT_EQ(ack.committed(), 100u);
  raw.stream->Write(chunk(0, bytes.substr(0, 100)));
  const auto st = raw.finish();
  EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("expected the acknowledged offset 100"), std::string::npos)
      << st.error_message();
}

// One bad upload: the header (and optionally chunks) are sent, the status is checked. The
// previous bad upload's stream may still hold the part on the server (gRPC refuses an oversized
// message to the client before the server's handler has returned): ABORTED "in progress" is
// tried again, as Client::upload does.
void expect_upload_refused(int port, const std::string& token, const v1::UploadRequest& head,
                           const std::vector<v1::UploadRequest>& chunks, StatusCode code,
                           const std::string& words) {
  grpc::Status st;
  for (int attempt = 0; attempt < 100; ++attempt) {
    RawUpload raw(port, token);
    raw.stream->Write(head);
    v1::UploadAck ack;
    for (const auto& c : chunks) {
      if (!raw.stream->Read(&ack)) break;
      if (!raw.stream->Write(c)) break;
    }
    while (raw.stream->Read(&ack)) {
    }
    st = raw.finish();
    const bool busy = st.error_code() == StatusCode::ABORTED &&
                      st.error_message().find("in progress") != std::string::npos;
    if (!busy || code == StatusCode::ABORTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(st.error_code(), code) << st.error_message();
  EXPECT_NE(st.error_message().find(words), std::string::npos)
      << "'" << st.error_message() << "' lacks '" << words << "'";
}

TEST(Service, BadUploadsAreRefusedWithTheReason) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto spec = small_spec(1, 40, 4);
  spec.set_model("none");
  const auto c = create(server.port(), spec);
  const std::string& tok = c.tokens[0];
  Matrix<double> A = random_matrix(40, 4, 3);
  const std::string good = matrix_bytes(A);
  const int port = server.port();

  // A shape outside the declared bounds: 41 anchor rows; 5 columns.
  expect_upload_refused(port, tok, header(c.id, v1::PART_ANCHOR, 41, 4, std::string(41 * 32, 'x')),
                        {}, StatusCode::INVALID_ARGUMENT, "expected the anchor's 40");
  expect_upload_refused(port, tok, header(c.id, v1::PART_ANCHOR, 40, 5, std::string(40 * 40, 'x')),
                        {}, StatusCode::INVALID_ARGUMENT, "columns: expected 4");
  // A total that does not match the shape.
  auto head = header(c.id, v1::PART_ANCHOR, 40, 4, good);
  head.mutable_header()->set_total_bytes(999);
  expect_upload_refused(port, tok, head, {}, StatusCode::INVALID_ARGUMENT,
                        "does not match 40 x 4 float64 values");
  // A part this collaboration does not take, and no part at all.
  expect_upload_refused(port, tok, header(c.id, v1::PART_DATA, 10, 4, std::string(320, 'x')), {},
                        StatusCode::INVALID_ARGUMENT, "takes no data");
  expect_upload_refused(port, tok, header(c.id, v1::PART_UNSPECIFIED, 10, 4, good), {},
                        StatusCode::INVALID_ARGUMENT, "is not a part");
  // An oversized chunk (the server's limit is 4096 bytes; gRPC's own is 2 x 4096 + 4096).
  const auto big = header(c.id, v1::PART_ANCHOR, 40, 4, good);
  expect_upload_refused(port, tok, big, {chunk(0, std::string(5000, 'x'))},
                        StatusCode::INVALID_ARGUMENT, "a chunk of 5000 bytes: expected 1 to 4096");
  expect_upload_refused(port, tok, big, {chunk(0, std::string(13000, 'x'))},
                        StatusCode::RESOURCE_EXHAUSTED, "larger than max");
  // A chunk past the declared total.
  expect_upload_refused(port, tok, big,
                        {chunk(0, good.substr(0, 1000)), chunk(1000, std::string(300, 'x'))},
                        StatusCode::INVALID_ARGUMENT, "past the declared total of 1280");
  // The header must come first.
  expect_upload_refused(port, tok, chunk(0, good), {}, StatusCode::INVALID_ARGUMENT,
                        "must be its header");
  // A checksum mismatch: the values arrive, the declared SHA-256 is another's.
  auto wrong = header(c.id, v1::PART_ANCHOR, 40, 4, good);
  wrong.mutable_header()->set_sha256(sha256_hex(matrix_bytes(random_matrix(40, 4, 4))));
  expect_upload_refused(port, tok, wrong, {chunk(0, good)}, StatusCode::INVALID_ARGUMENT,
                        "checksum mismatch");
  // A NaN, reported with its place.
  A(3, 2) = std::numeric_limits<double>::quiet_NaN();
  const std::string nan = matrix_bytes(A);
  expect_upload_refused(port, tok, header(c.id, v1::PART_ANCHOR, 40, 4, nan), {chunk(0, nan)},
                        StatusCode::INVALID_ARGUMENT, "NaN or Inf at row 3, column 2");
  // Nothing of the refused uploads stays: the part can be uploaded afresh.
  auto p = client_for(port, tok);
  EXPECT_EQ(p.upload_offset(c.id, v1::PART_ANCHOR).total(), 0u);
  // An unknown collaboration id and a malformed one.
  expect_upload_refused(port, tok, header("c" + std::string(32, '0'), v1::PART_ANCHOR, 40, 4, good),
                        {}, StatusCode::PERMISSION_DENIED, "another collaboration");
  auto analyst = client_for(port, kAnalystToken);
  expect_rpc_error([&] { analyst.status("c" + std::string(32, '0')); }, StatusCode::NOT_FOUND,
                   "no collaboration");
  expect_rpc_error([&] { analyst.status("../etc"); }, StatusCode::INVALID_ARGUMENT,
                   "not a collaboration id");
}

TEST(Service, BadSpecsAreRefusedWithTheField) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  const auto refused = [&](const std::function<void(v1::CollaborationSpec&)>& edit,
                           const std::string& words) {
    auto s = small_spec();
    edit(s);
    expect_rpc_error([&] { analyst.create(s); }, StatusCode::INVALID_ARGUMENT, words);
  };
  refused([](auto& s) { s.set_participants(1, "../evil"); }, "not a valid name");
  refused([](auto& s) { s.set_participants(1, "a/b"); }, "not a valid name");
  refused([](auto& s) { s.set_participants(1, ".."); }, "not a valid name");
  refused([](auto& s) { s.set_name("x/../../y"); }, "spec.name");
  refused([](auto& s) { s.set_participants(1, "p0"); }, "named twice");
  refused([](auto& s) { s.set_method("pca"); }, "pca");
  refused([](auto& s) { s.set_dim(0); }, "spec.dim 0 is out of range");
  refused([](auto& s) { s.mutable_anchor()->set_rows(3); }, "spec.anchor.rows 3");
  refused([](auto& s) { s.mutable_anchor()->set_kind("cauchy"); }, "cauchy");
  refused([](auto& s) { s.set_max_rows(1000000000); }, "spec.max_rows");
  refused([](auto& s) { (*s.mutable_options())["svd"] = "qr"; }, "qr");
  refused([](auto& s) { (*s.mutable_options())["tolerance"] = "1"; }, "unknown key 'tolerance'");
  refused([](auto& s) { s.clear_participants(); }, "spec.participants has 0 names");
  // 10^8 rows of 8 float64 values: 6.4 GB, beyond the default part limit of 4 GiB.
  refused(
      [](auto& s) {
        s.set_dim(8);
        s.set_max_rows(100000000);
      },
      "exceeds the server's part limit of 4294967296 bytes");
  EXPECT_FALSE(fs::exists(dir.path / "data" / "collaborations") &&
               !fs::is_empty(dir.path / "data" / "collaborations"));
}

TEST(Service, DeletingACollaborationRemovesEveryFile) {
  TempDir dir;
  const fs::path data = dir.path / "data";
  LiveServer server(test_options(data));
  const auto keep = create(server.port(), small_spec(2));
  const auto c = create(server.port(), small_spec(2));
  for (int i = 0; i < 2; ++i)
    client_for(server.port(), c.tokens[i]).upload(c.id, v1::PART_ANCHOR, random_matrix(40, 4, i));
  auto analyst = client_for(server.port(), kAnalystToken);
  ASSERT_EQ(wait_for_job(analyst, c.id), "done");
  client_for(server.port(), c.tokens[0]).fetch(c.id, (dir.path / "r").string());
  analyst.delete_collaboration(c.id);
  // No file or directory under the data directory carries the id, and the store forgets it.
  for (const auto& e : fs::recursive_directory_iterator(data))
    EXPECT_EQ(e.path().string().find(c.id), std::string::npos) << e.path();
  expect_rpc_error([&] { analyst.status(c.id); }, StatusCode::NOT_FOUND, "no collaboration");
  expect_rpc_error([&] { client_for(server.port(), c.tokens[0]).status(c.id); },
                   StatusCode::UNAUTHENTICATED, "unknown token");
  // The other collaboration is untouched.
  EXPECT_EQ(analyst.status(keep.id).participants_size(), 2);
}

TEST(Service, AReleaseCanBeDeletedOnlyBeforeTheRun) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  const auto c = create(server.port(), small_spec(2));
  auto p0 = client_for(server.port(), c.tokens[0]);
  p0.upload(c.id, v1::PART_ANCHOR, random_matrix(40, 4, 1));
  p0.delete_release(c.id);
  EXPECT_FALSE(fs::exists(dir.path / "data" / "collaborations" / c.id / "uploads" / "p0"));
  EXPECT_EQ(p0.upload_offset(c.id, v1::PART_ANCHOR).total(), 0u);
  auto analyst = client_for(server.port(), kAnalystToken);
  expect_rpc_error([&] { analyst.run(c.id); }, StatusCode::FAILED_PRECONDITION,
                   "no participant has uploaded its release");
  p0.upload(c.id, v1::PART_ANCHOR, random_matrix(40, 4, 1));
  client_for(server.port(), c.tokens[1]).upload(c.id, v1::PART_ANCHOR, random_matrix(40, 4, 2));
  ASSERT_EQ(wait_for_job(analyst, c.id), "done");
  expect_rpc_error([&] { p0.delete_release(c.id); }, StatusCode::FAILED_PRECONDITION,
                   "the job is done");
  expect_rpc_error([&] { p0.upload(c.id, v1::PART_ANCHOR, random_matrix(40, 4, 3)); },
                   StatusCode::FAILED_PRECONDITION, "the job is done");
}

TEST(Service, TheAnalystCanRunBeforeEveryoneHasUploaded) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  const auto c = create(server.port(), small_spec(3));
  std::vector<Matrix<double>> anchors;
  for (int i : {0, 2}) {
    anchors.push_back(random_matrix(40, 4, 70 + i));
    client_for(server.port(), c.tokens[i]).upload(c.id, v1::PART_ANCHOR, anchors.back());
  }
  auto analyst = client_for(server.port(), kAnalystToken);
  EXPECT_EQ(analyst.status(c.id).job_state(), "none");  // p1 is missing: nothing queued itself
  analyst.run(c.id);
  ASSERT_EQ(wait_for_job(analyst, c.id), "done");
  EXPECT_NE(analyst.status(c.id).job_report().find("\"participants\": [\n    \"p0\",\n    \"p2\""),
            std::string::npos)
      << analyst.status(c.id).job_report();
  // p0 and p2 get the alignment of the two of them; p1 has no result and can no longer upload.
  AlignOptions opts;
  opts.seed = 5;
  const auto expected = align(Stack<double>::from_matrices(anchors), opts);
  for (int k = 0; k < 2; ++k) {
    const fs::path out = dir.path / ("r" + std::to_string(k));
    client_for(server.port(), c.tokens[k == 0 ? 0 : 2]).fetch(c.id, out.string());
    const auto G = read_npy_matrix<double>((out / "G.npy").string());
    for (index_t e = 0; e < G.size(); ++e) ASSERT_EQ(G.data()[e], expected.G[k].data()[e]);
  }
  auto p1 = client_for(server.port(), c.tokens[1]);
  expect_rpc_error([&] { p1.fetch(c.id, (dir.path / "r1x").string()); },
                   StatusCode::FAILED_PRECONDITION, "participant p1 has no result");
  expect_rpc_error([&] { p1.upload(c.id, v1::PART_ANCHOR, random_matrix(40, 4, 1)); },
                   StatusCode::FAILED_PRECONDITION, "the job is done");
}

TEST(Service, AFailedJobReportsItsErrorAndRunRetriesIt) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  const auto c = create(server.port(), small_spec(2));
  // Participant 1's anchor has rank 1: ODC refuses it, naming the user.
  Matrix<double> bad(40, 4);
  for (index_t i = 0; i < 40; ++i)
    for (index_t j = 0; j < 4; ++j) bad(i, j) = double(i + 1);
  client_for(server.port(), c.tokens[0]).upload(c.id, v1::PART_ANCHOR, random_matrix(40, 4, 1));
  client_for(server.port(), c.tokens[1]).upload(c.id, v1::PART_ANCHOR, bad);
  auto analyst = client_for(server.port(), kAnalystToken);
  ASSERT_EQ(wait_for_job(analyst, c.id), "failed");
  const auto st = analyst.status(c.id);
  EXPECT_NE(st.job_error().find("user 1"), std::string::npos) << st.job_error();
  expect_rpc_error(
      [&] { client_for(server.port(), c.tokens[0]).fetch(c.id, (dir.path / "r").string()); },
      StatusCode::FAILED_PRECONDITION, "the job is failed");
  // The participant replaces its release; the analyst runs again.
  auto p1 = client_for(server.port(), c.tokens[1]);
  p1.delete_release(c.id);
  p1.upload(c.id, v1::PART_ANCHOR, random_matrix(40, 4, 2));
  analyst.run(c.id);
  EXPECT_EQ(wait_for_job(analyst, c.id), "done");
}

TEST(Service, UploadsBeyondTheServersLimitAreRefusedUntilOneEnds) {
  TempDir dir;
  auto o = test_options(dir.path / "data");
  o.max_upload_streams = 1;
  LiveServer server(o);
  const auto c = create(server.port(), small_spec(2));
  const Matrix<double> A = random_matrix(40, 4, 1);
  const std::string bytes = matrix_bytes(A);
  v1::UploadAck ack;
  {
    // p0's upload holds the one slot: its header is acknowledged, its chunks not yet sent.
    RawUpload first(server.port(), c.tokens[0]);
    ASSERT_TRUE(first.stream->Write(header(c.id, v1::PART_ANCHOR, 40, 4, bytes)));
    ASSERT_TRUE(first.stream->Read(&ack));
    auto p1 = client_for(server.port(), c.tokens[1]);
    expect_rpc_error([&] { p1.upload(c.id, v1::PART_ANCHOR, A); }, StatusCode::RESOURCE_EXHAUSTED,
                     "uploads in progress, its limit");
    ASSERT_TRUE(first.stream->Write(chunk(0, bytes)));
    while (first.stream->Read(&ack)) {
    }
    EXPECT_TRUE(first.finish().ok());
  }
  // The slot is free again.
  client_for(server.port(), c.tokens[1]).upload(c.id, v1::PART_ANCHOR, A);
  EXPECT_TRUE(
      client_for(server.port(), c.tokens[1]).upload_offset(c.id, v1::PART_ANCHOR).complete());
}

TEST(Service, HealthAndOptions) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  EXPECT_TRUE(client_for(server.port(), "").healthy());
  auto o = test_options(dir.path / "other");
  o.listen = "0.0.0.0:0";
  EXPECT_THROW(check_options(o), InvalidInput);  // plaintext off loopback
  o = test_options(dir.path / "other");
  o.insecure_localhost = false;
  EXPECT_THROW(check_options(o), InvalidInput);  // TLS without a certificate
  o = test_options(dir.path / "other");
  o.analyst_token = "short";
  EXPECT_THROW(check_options(o), InvalidInput);
}

}  // namespace
}  // namespace dcalign::service::testing
