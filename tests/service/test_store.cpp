// The SQLite store and the small pieces (tokens, names, SHA-256) on their own.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "service/common.hpp"
#include "service/store.hpp"
#include "service_fixture.hpp"

namespace dcalign::service::testing {
namespace {

TEST(ServiceStore, EveryCommittedChangeSurvivesReopening) {
  TempDir dir;
  const std::string db = (dir.path / "x.db").string();
  {
    Store s(db);
    s.create_collaboration("c1", "spec-bytes\0with-nul", {{"a", "ha"}, {"b", "hb"}});
    PartRecord r;
    r.part = 1;
    r.rows = 40;
    r.cols = 4;
    r.total = 1280;
    r.sha256 = std::string(64, 'f');
    s.start_part("c1", "a", r);
    s.set_received("c1", "a", 1, 600);
    EXPECT_TRUE(s.transition_job("c1", {"none"}, "queued"));
    EXPECT_FALSE(s.transition_job("c1", {"none"}, "queued"));
    EXPECT_TRUE(s.transition_job("c1", {"queued"}, "running"));
    EXPECT_TRUE(s.replace_token("c1", "b", "hb2"));
    EXPECT_FALSE(s.replace_token("c1", "nobody", "x"));
  }
  Store s(db);
  EXPECT_EQ(*s.spec("c1"), "spec-bytes");  // a C string literal: up to the NUL
  EXPECT_EQ(s.participants("c1"), (std::vector<std::string>{"a", "b"}));
  const auto r = s.part("c1", "a", 1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->received, 600u);
  EXPECT_FALSE(r->complete);
  EXPECT_EQ(s.job("c1").state, "running");
  EXPECT_EQ(s.job("c1").attempts, 1);
  EXPECT_FALSE(s.find_token("hb"));
  EXPECT_TRUE(s.token_revoked("hb"));
  EXPECT_EQ(s.find_token("hb2")->participant, "b");
  s.delete_collaboration("c1");
  EXPECT_FALSE(s.spec("c1"));
  EXPECT_FALSE(s.find_token("ha"));
  EXPECT_FALSE(s.token_revoked("hb"));
  EXPECT_TRUE(s.parts("c1", "a").empty());
}

TEST(ServiceStore, AnUnopenableDatabaseIsAnIoErrorNamingIt) {
  try {
    Store s("/nonexistent-dir/x.db");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.db"), std::string::npos);
  }
}

TEST(ServiceCommon, Sha256MatchesTheStandardsVectors) {
  // FIPS 180-2 examples.
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 h;
  h.update("a", 1);
  h.update("bc", 2);
  EXPECT_EQ(h.hex(), sha256_hex("abc"));
}

TEST(ServiceCommon, TokensAndIdsAreFreshAndWellFormed) {
  const std::string t1 = new_token(), t2 = new_token();
  EXPECT_TRUE(is_token(t1));
  EXPECT_NE(t1, t2);
  EXPECT_FALSE(is_token(t1.substr(1)));
  const std::string id = new_collaboration_id();
  EXPECT_TRUE(is_collaboration_id(id));
  EXPECT_FALSE(is_collaboration_id("c../../../../etc/passwd..........."));
  EXPECT_TRUE(equal_constant_time("abc", "abc"));
  EXPECT_FALSE(equal_constant_time("abc", "abd"));
  EXPECT_FALSE(equal_constant_time("abc", "ab"));
}

TEST(ServiceCommon, NamesCannotLeaveTheirDirectory) {
  for (const char* ok : {"alice", "Bob_2", "site-3.a"}) EXPECT_NO_THROW(check_name("n", ok));
  for (const char* bad : {"", ".", "..", "../x", "a/b", "a..b", ".hidden", "-x", "a b", "a\\b"})
    EXPECT_THROW(check_name("n", bad), InvalidInput) << bad;
  EXPECT_THROW(check_name("n", std::string(65, 'a')), InvalidInput);
}

// Tokens, certificates, keys and specs: a bounded read, errors that name the file and what it
// should hold, and a token without the line break an editor leaves.
TEST(ServiceCommon, SmallFilesAreBoundedAndNamed) {
  TempDir dir;
  const auto expect_error = [](const std::string& path, const char* what, std::size_t max,
                               const std::vector<std::string>& fragments) {
    try {
      (void)read_small_file(path, what, max);
      ADD_FAILURE() << "no error for " << path;
    } catch (const InvalidInput& e) {
      for (const auto& f : fragments)
        EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << f << " in " << e.what();
    }
  };
  const std::string pem = (dir.path / "ca.pem").string(), token = (dir.path / "t").string();
  std::ofstream(pem) << "-----BEGIN CERTIFICATE-----\nabc\n";
  std::ofstream(token) << kAnalystToken << "\r\n\n";
  EXPECT_EQ(read_small_file(pem, "CA certificate"), "-----BEGIN CERTIFICATE-----\nabc\n");
  EXPECT_EQ(read_token_file(token, "token"), kAnalystToken);
  expect_error(pem, "CA certificate", 10,
               {"CA certificate file", "ca.pem", "32 bytes", "at most 10"});
  expect_error((dir.path / "none").string(), "TLS key", 100, {"TLS key file", "no such file"});
  expect_error(dir.path.string(), "spec", 100, {"spec file", "not a regular file"});
  std::ofstream((dir.path / "big").string()) << std::string(5000, 'x');
  EXPECT_THROW((void)read_token_file((dir.path / "big").string(), "token"), InvalidInput);
}

}  // namespace
}  // namespace dcalign::service::testing
