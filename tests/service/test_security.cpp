// Every RPC of dcalign-server with every kind of wrong credential: no token, a malformed one,
// a revoked one, another collaboration's, another participant's, the wrong role.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "service/common.hpp"
#include "service_fixture.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

struct Fixture {
  TempDir dir;
  LiveServer server{test_options(dir.path / "data")};
  std::string id, other_id;
  std::vector<std::string> tokens, other_tokens;
  std::string revoked;
  Matrix<double> A0 = random_matrix(40, 4, 10), A1 = random_matrix(40, 4, 11);

  Fixture() {
    auto analyst = client_for(server.port(), kAnalystToken);
    auto r = analyst.create(small_spec(2));
    id = r.collaboration_id();
    for (const auto& t : r.tokens()) tokens.push_back(t.token());
    auto o = analyst.create(small_spec(2));
    other_id = o.collaboration_id();
    for (const auto& t : o.tokens()) other_tokens.push_back(t.token());
    // p1's first token is revoked by a reissue.
    revoked = tokens[1];
    tokens[1] = analyst.reissue(id, "p1").token();
  }
};

// The RPCs, each as a call on collaboration `id` (CreateCollaboration ignores it).
std::map<std::string, std::function<void(Client&, const std::string&)>> rpcs(const Fixture& f) {
  return {
      {"CreateCollaboration", [](Client& c, const std::string&) { c.create(small_spec(2)); }},
      {"ReissueToken", [](Client& c, const std::string& id) { c.reissue(id, "p0"); }},
      {"Run", [](Client& c, const std::string& id) { c.run(id); }},
      {"DeleteCollaboration", [](Client& c, const std::string& id) { c.delete_collaboration(id); }},
      {"GetStatus", [](Client& c, const std::string& id) { c.status(id); }},
      {"GetUploadOffset",
       [](Client& c, const std::string& id) { c.upload_offset(id, v1::PART_ANCHOR); }},
      {"Upload", [&f](Client& c, const std::string& id) { c.upload(id, v1::PART_ANCHOR, f.A0); }},
      {"DeleteRelease", [](Client& c, const std::string& id) { c.delete_release(id); }},
      {"Fetch",
       [&f](Client& c, const std::string& id) { c.fetch(id, (f.dir.path / "fetched").string()); }}};
}

const std::set<std::string> kAnalystRpcs = {"CreateCollaboration", "ReissueToken", "Run",
                                            "DeleteCollaboration"};
const std::set<std::string> kParticipantRpcs = {"GetUploadOffset", "Upload", "DeleteRelease",
                                                "Fetch"};

TEST(ServiceSecurity, EveryRpcRefusesMissingMalformedAndRevokedTokens) {
  Fixture f;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "no token"},
      {"x", "malformed"},
      {"dca_has spaces in it 0123456789", "malformed token"},
      {std::string(300, 'a'), "malformed"},
      {"dca_" + std::string(43, 'A'), "unknown token"},
      {f.revoked, "revoked"}};
  for (const auto& [name, call] : rpcs(f))
    for (const auto& [token, words] : bad) {
      SCOPED_TRACE(name + " with '" + token.substr(0, 20) + "'");
      auto c = client_for(f.server.port(), token);
      expect_rpc_error([&] { call(c, f.id); }, StatusCode::UNAUTHENTICATED, words);
    }
}

TEST(ServiceSecurity, RolesAndCollaborationsAreKeptApart) {
  Fixture f;
  const int port = f.server.port();
  for (const auto& [name, call] : rpcs(f)) {
    SCOPED_TRACE(name);
    auto other = client_for(port, f.other_tokens[0]);  // a participant of another collaboration
    auto analyst = client_for(port, kAnalystToken);
    auto p0 = client_for(port, f.tokens[0]);
    if (kAnalystRpcs.count(name)) {
      // No participant may call the analyst's RPCs (start the run above all).
      expect_rpc_error([&] { call(p0, f.id); }, StatusCode::PERMISSION_DENIED, "only the analyst");
      expect_rpc_error([&] { call(other, f.id); }, StatusCode::PERMISSION_DENIED,
                       "only the analyst");
    } else {
      expect_rpc_error([&] { call(other, f.id); }, StatusCode::PERMISSION_DENIED,
                       "another collaboration");
    }
    if (kParticipantRpcs.count(name))
      expect_rpc_error([&] { call(analyst, f.id); }, StatusCode::PERMISSION_DENIED,
                       "only a participant");
  }
}

TEST(ServiceSecurity, NoParticipantReachesAnothersReleaseOrResult) {
  Fixture f;
  const int port = f.server.port();
  auto p0 = client_for(port, f.tokens[0]), p1 = client_for(port, f.tokens[1]);
  p0.upload(f.id, v1::PART_ANCHOR, f.A0);
  // p1 can neither see p0's progress as its own nor delete it.
  EXPECT_EQ(p1.upload_offset(f.id, v1::PART_ANCHOR).total(), 0u);
  p1.delete_release(f.id);
  EXPECT_TRUE(p0.upload_offset(f.id, v1::PART_ANCHOR).complete());
  p1.upload(f.id, v1::PART_ANCHOR, f.A1);
  auto analyst = client_for(port, kAnalystToken);
  for (int i = 0; i < 500 && analyst.status(f.id).job_state() != "done"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(analyst.status(f.id).job_state(), "done");
  p0.fetch(f.id, (f.dir.path / "r0").string());
  p1.fetch(f.id, (f.dir.path / "r1").string());
  std::ifstream g0(f.dir.path / "r0" / "G.npy", std::ios::binary),
      g1(f.dir.path / "r1" / "G.npy", std::ios::binary);
  const std::string b0((std::istreambuf_iterator<char>(g0)), {}),
      b1((std::istreambuf_iterator<char>(g1)), {});
  EXPECT_NE(b0, b1);  // each its own G_i
  // The stored releases are the uploaders' own bytes.
  const fs::path up = f.dir.path / "data" / "collaborations" / f.id / "uploads";
  std::ifstream a0(up / "p0" / "anchor.f64", std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(a0)), {}), matrix_bytes(f.A0));
  // The analyst's view has shapes and progress, never the values.
  const std::string status = analyst.status(f.id).SerializeAsString();
  const std::string raw = matrix_bytes(f.A0);
  for (std::size_t at = 0; at + 16 <= raw.size(); at += 16)
    ASSERT_EQ(status.find(raw.substr(at, 16)), std::string::npos);
}

}  // namespace
}  // namespace dcalign::service::testing
