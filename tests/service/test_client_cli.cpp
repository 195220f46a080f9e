// `dcalign client` against a server in this process: a collaboration through the command line,
// and every kind of mistake exiting non-zero with the reason (1 for errors, 2 for usage).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <regex>

#include "cli/cli_fixture.hpp"
#include "dcalign/npy.hpp"
#include "service/common.hpp"
#include "service_fixture.hpp"

namespace dcalign::service::testing {
namespace {

class ClientCli : public dcalign::testing::CliFixture {
 protected:
  ClientCli() : CliFixture("dcalign_client_cli_") {}
  void SetUp() override {
    CliFixture::SetUp();
    server = std::make_unique<LiveServer>(test_options(dir_ / "data"));
    std::ofstream(path("analyst.token")) << kAnalystToken << "\n";
    std::ofstream(path("spec.json"))
        << R"({"name": "cli", "method": "odc", "dim": 4, "anchor": {"kind": "uniform", "rows": 40,
               "features": 10, "seed": 1}, "participants": ["a", "b"], "model": "none",
               "max_rows": 100, "seed": 5})";
  }
  void TearDown() override {
    server.reset();
    CliFixture::TearDown();
  }
  std::string at() const {
    return "--server 127.0.0.1:" + std::to_string(server->port()) + " --insecure";
  }
  std::string stdout_text() const {
    std::ifstream f(path("stdout.txt"));
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }
  std::unique_ptr<LiveServer> server;
};

TEST_F(ClientCli, ACollaborationThroughTheCommandLine) {
  ASSERT_EQ(run("client create " + at() + " --token-file " + path("analyst.token") + " --spec " +
                path("spec.json") + " --tokens-out " + path("tokens"))
                .status,
            0);
  std::string id = stdout_text();
  id.erase(id.find_last_not_of("\n") + 1);
  ASSERT_TRUE(is_collaboration_id(id)) << id;
  EXPECT_EQ(fs::status(path("tokens/a.token")).permissions() & fs::perms::others_read,
            fs::perms::none);
  for (const char* p : {"a", "b"}) {
    write_npy(path(std::string(p) + ".npy"), random_matrix(40, 4, p[0]).view());
    const auto r = run("client upload " + at() + " --token-file " +
                       path("tokens/" + std::string(p) + ".token") + " --collaboration " + id +
                       " --anchor " + path(std::string(p) + ".npy"));
    ASSERT_EQ(r.status, 0) << r.err;
  }
  for (int i = 0; i < 500; ++i) {
    ASSERT_EQ(run("client status " + at() + " --token-file " + path("analyst.token") +
                  " --collaboration " + id)
                  .status,
              0);
    if (stdout_text().find("job done") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(stdout_text().find("a: uploaded"), std::string::npos) << stdout_text();
  const auto r = run("client fetch " + at() + " --token-file " + path("tokens/b.token") +
                     " --collaboration " + id + " --out " + path("result"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_npy_matrix<double>(path("result/G.npy")).rows(), 4);
  // A participant may not run the job: the server's reason, exit status 1.
  const auto denied = run("client run " + at() + " --token-file " + path("tokens/a.token") +
                          " --collaboration " + id);
  EXPECT_EQ(denied.status, 1);
  EXPECT_NE(denied.err.find("PERMISSION_DENIED: only the analyst"), std::string::npos)
      << denied.err;
  // Nothing of a success line reaches stdout before the error (it printed "job " first).
  EXPECT_EQ(stdout_text(), "");
}

// A participant added after the run of a collaboration that trains a model uploads its anchor
// alone with --private (no --labels: h is not retrained) and is enrolled; --labels or --data
// from it is refused as a usage error before anything is uploaded.
TEST_F(ClientCli, ALateParticipantUploadsItsAnchorAloneWhereAModelIsTrained) {
  std::ofstream(path("model_spec.json"))
      << R"({"name": "late", "method": "odc", "dim": 4, "anchor": {"kind": "uniform", "rows": 40,
             "features": 10, "seed": 1}, "participants": ["a", "b"], "model": "logreg",
             "num_classes": 2, "max_rows": 100, "seed": 5})";
  const std::string analyst = " --token-file " + path("analyst.token");
  ASSERT_EQ(run("client create " + at() + analyst + " --spec " + path("model_spec.json") +
                " --tokens-out " + path("tokens"))
                .status,
            0);
  std::string id = stdout_text();
  id.erase(id.find_last_not_of("\n") + 1);
  const auto upload = [&](const std::string& who, const std::string& extra) {
    return run("client upload " + at() + " --token-file " + path("tokens/" + who + ".token") +
               " --collaboration " + id + " --private " + path(who + ".npy") + " --secret-out " +
               path(who + ".F.npy") + extra);
  };
  const auto wait_for = [&](const std::string& token, const std::string& words) {
    for (int i = 0; i < 500; ++i) {
      if (run("client status " + at() + " --token-file " + path(token) + " --collaboration " + id)
              .status != 0)
        return false;
      if (stdout_text().find(words) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };
  Matrix<double> labels(60, 1);
  for (index_t r = 0; r < 60; ++r) labels(r, 0) = static_cast<double>(r % 2);
  write_npy(path("y.npy"), labels.view());
  for (const char* p : {"a", "b", "c"})
    write_npy(path(std::string(p) + ".npy"), random_matrix(60, 10, p[0]).view());
  for (const char* p : {"a", "b"}) {
    const auto r = upload(p, " --labels " + path("y.npy"));
    ASSERT_EQ(r.status, 0) << r.err;
  }
  ASSERT_TRUE(wait_for("analyst.token", "job done")) << stdout_text();
  ASSERT_EQ(run("client add-participant " + at() + analyst + " --collaboration " + id +
                " --participant c --token-out " + path("tokens/c.token"))
                .status,
            0);
  const auto refused = upload("c", " --labels " + path("y.npy"));
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("--labels is not used: you joined after the run"), std::string::npos)
      << refused.err;
  EXPECT_FALSE(fs::exists(path("c.F.npy")));
  const auto r = upload("c", "");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(stdout_text().find("you joined late"), std::string::npos) << stdout_text();
  ASSERT_TRUE(wait_for("tokens/c.token", "done")) << stdout_text();
  const auto fetched = run("client fetch " + at() + " --token-file " + path("tokens/c.token") +
                           " --collaboration " + id + " --out " + path("c-result"));
  ASSERT_EQ(fetched.status, 0) << fetched.err;
  EXPECT_EQ(read_npy_matrix<double>(path("c-result/G.npy")).rows(), 4);
}

TEST_F(ClientCli, MistakesExitNonZeroWithTheReason) {
  const std::string analyst = " --token-file " + path("analyst.token");
  const auto expect = [&](const std::string& args, int status, const std::string& words) {
    const auto r = run(args);
    EXPECT_EQ(r.status, status) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << args << "\n" << r.err;
  };
  // Nobody listens on port 1.
  expect("client status --server 127.0.0.1:1 --insecure --deadline 5" + analyst +
             " --collaboration c" + std::string(32, '0'),
         1, "UNAVAILABLE");
  std::ofstream(path("wrong.token")) << "dca_" << std::string(43, 'x') << "\n";
  expect("client status " + at() + " --token-file " + path("wrong.token") + " --collaboration c" +
             std::string(32, '0'),
         1, "UNAUTHENTICATED: unknown token");
  expect("client status " + at() + " --token-file " + path("missing.token") + " --collaboration x",
         1, "cannot read the token file");
  std::ofstream(path("bad_spec.json")) << R"({"name": "x", "colour": "blue"})";
  expect("client create " + at() + analyst + " --spec " + path("bad_spec.json") + " --tokens-out " +
             path("t1"),
         1, "is not a collaboration spec");
  std::ofstream(path("range_spec.json")) << R"({"name": "x/y", "method": "odc"})";
  expect("client create " + at() + analyst + " --spec " + path("range_spec.json") +
             " --tokens-out " + path("t2"),
         1, "INVALID_ARGUMENT: spec.name 'x/y' is not a valid name");
  fs::create_directories(path("full"));
  std::ofstream(path("full/keep.txt")) << "mine";
  expect("client create " + at() + analyst + " --spec " + path("spec.json") + " --tokens-out " +
             path("full"),
         1, "not overwritten");
  EXPECT_TRUE(fs::exists(path("full/keep.txt")));
  expect("client upload " + at() + analyst + " --collaboration x --anchor a.npy --private x.npy", 2,
         "either --anchor");
  expect("client status " + at() + analyst + " --collaboration x --deadline 0", 2, "--deadline 0");
  fs::create_directories(path("notaresult"));
  std::ofstream(path("notaresult/mine.txt")) << "mine";
  expect("client fetch " + at() + analyst + " --collaboration c" + std::string(32, '0') +
             " --out " + path("notaresult"),
         1, "holds 'mine.txt', which a fetch did not write");
}

// ---- The output rules of every client command: checked before any call, no output aliases an
// input, no link followed, no device replaced, nothing irreversible before the outputs are sure.

class ClientOutputs : public ClientCli {
 protected:
  std::string analyst() const { return " --token-file " + path("analyst.token"); }
  // A collaboration of a and b through the command line; its id.
  std::string create_ok(const std::string& tokens = "tokens") {
    const auto r = run("client create " + at() + analyst() + " --spec " + path("spec.json") +
                       " --tokens-out " + path(tokens));
    EXPECT_EQ(r.status, 0) << r.err;
    std::string id = stdout_text();
    id.erase(id.find_last_not_of("\n") + 1);
    return id;
  }
  std::size_t collaborations() const {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_ / "data" / "collaborations"))
      n += e.is_directory();
    return n;
  }
  std::string read(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }
  // Both participants upload and the job is done.
  void run_job(const std::string& id) {
    for (const char* p : {"a", "b"}) {
      write_npy(path(std::string(p) + "_A.npy"), random_matrix(40, 4, p[0]).view());
      const auto r = run("client upload " + at() + " --token-file " +
                         path("tokens/" + std::string(p) + ".token") + " --collaboration " + id +
                         " --anchor " + path(std::string(p) + "_A.npy"));
      ASSERT_EQ(r.status, 0) << r.err;
    }
    for (int i = 0; i < 500; ++i) {
      run("client status " + at() + analyst() + " --collaboration " + id);
      if (stdout_text().find("job done") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "the job did not finish";
  }
  dcalign::testing::CliResult fetch(const std::string& id, const std::string& out) {
    return run("client fetch " + at() + " --token-file " + path("tokens/a.token") +
               " --collaboration " + id + " --out " + out);
  }
};

TEST_F(ClientOutputs, TokenFilesArePrivateFromTheirFirstByteAndTheDirectoryIsChecked) {
  create_ok();
  struct stat st {};
  ASSERT_EQ(::stat(path("tokens/a.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(path("tokens").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::size_t before = collaborations();
  // A link to a directory: refused, its target untouched (mode and contents).
  fs::create_directories(path("target"));
  fs::permissions(path("target"), fs::perms(0755));
  fs::create_directory_symlink(path("target"), path("link"));
  auto r = run("client create " + at() + analyst() + " --spec " + path("spec.json") +
               " --tokens-out " + path("link"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is a symbolic link"), std::string::npos) << r.err;
  EXPECT_EQ(fs::status(path("target")).permissions(), fs::perms(0755));
  EXPECT_TRUE(fs::is_empty(path("target")));
  // An existing file, a place where no directory can be made: refused before the server
  // creates anything (the tokens would be lost).
  std::ofstream(path("afile")) << "x";
  r = run("client create " + at() + analyst() + " --spec " + path("spec.json") + " --tokens-out " +
          path("afile"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r.err;
  r = run("client create " + at() + analyst() + " --spec " + path("spec.json") +
          " --tokens-out /proc/dcalign-tokens");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot create the directory"), std::string::npos) << r.err;
  EXPECT_EQ(collaborations(), before);
  EXPECT_EQ(read("afile"), "x");
}

TEST_F(ClientOutputs, ALostCreateIsRecoveredWithItsRequestId) {
  const std::string rid = "recover-0123456789abcdef";
  auto r = run("client create " + at() + analyst() + " --spec " + path("spec.json") +
               " --tokens-out " + path("t1") + " --request-id " + rid);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string id = stdout_text();
  const std::string token = read("t1/a.token");
  r = run("client create " + at() + analyst() + " --spec " + path("spec.json") + " --tokens-out " +
          path("t2") + " --request-id " + rid);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(stdout_text(), id);
  EXPECT_EQ(read("t2/a.token"), token);
  r = run("client create " + at() + analyst() + " --spec " + path("spec.json") + " --tokens-out " +
          path("t3") + " --request-id bad");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--request-id"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("t3")));
}

TEST_F(ClientOutputs, AReissueNeverRevokesATokenItCannotWrite) {
  const std::string id = create_ok();
  const std::string before = read("tokens/a.token");
  const auto reissue = [&](const std::string& out) {
    return run("client reissue " + at() + analyst() + " --collaboration " + id +
               " --participant a --token-out " + out);
  };
  // Its own input (the analyst's token), an existing file, a device: refused before the call.
  auto r = reissue(path("analyst.token"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("would replace the input --token-file"), std::string::npos) << r.err;
  EXPECT_EQ(read("analyst.token"), kAnalystToken + "\n");
  r = reissue(path("tokens/b.token"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("a new secret is never written over a file"), std::string::npos) << r.err;
  r = reissue("/dev/null");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is a character device"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // a's token still works: nothing was revoked.
  r = run("client status " + at() + " --token-file " + path("tokens/a.token") +
          " --collaboration " + id);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read("tokens/a.token"), before);
  r = reissue(path("new.token"));
  ASSERT_EQ(r.status, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat(path("new.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(ClientOutputs, TheSecretBasisIsNeverLostNorWrittenOverItsData) {
  const std::string id = create_ok();
  write_npy(path("X.npy"), random_matrix(30, 10, 7).view());
  const std::string x = read("X.npy");
  const auto upload = [&](const std::string& secret, int seed) {
    return run("client upload " + at() + " --token-file " + path("tokens/a.token") +
               " --collaboration " + id + " --private " + path("X.npy") + " --secret-out " +
               secret + " --seed " + std::to_string(seed));
  };
  auto r = upload(path("X.npy"), 1);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("would replace the input --private"), std::string::npos) << r.err;
  EXPECT_EQ(read("X.npy"), x);
  r = upload("/dev/null", 1);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("character device"), std::string::npos) << r.err;
  ASSERT_EQ(upload(path("F.npy"), 1).status, 0);
  const std::string f = read("F.npy");
  struct stat st {};
  ASSERT_EQ(::stat(path("F.npy").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The same upload again (an interrupted one, resumed): the same F, accepted.
  r = upload(path("F.npy"), 1);
  EXPECT_EQ(r.status, 0) << r.err;
  // Another seed would make another F: refused, the F of the release on the server kept.
  r = upload(path("F.npy"), 2);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("holds another secret basis"), std::string::npos) << r.err;
  EXPECT_EQ(read("F.npy"), f);
  r = upload(path("F2.npy"), 2);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("your anchor is already on the server"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("F2.npy")));
}

TEST_F(ClientOutputs, AFetchReplacesOnlyWhatAFetchWrote) {
  const std::string id = create_ok();
  run_job(id);
  // A directory of the user's that happens to hold a G.npy: nothing of it is touched.
  fs::create_directories(path("mine"));
  std::ofstream(path("mine/G.npy")) << "old";
  std::ofstream(path("mine/notes.txt")) << "notes";
  auto r = fetch(id, path("mine"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("not replaced"), std::string::npos) << r.err;
  EXPECT_EQ(read("mine/notes.txt"), "notes");
  EXPECT_EQ(read("mine/G.npy"), "old");
  // A link: not followed.
  fs::create_directories(path("elsewhere"));
  fs::create_directory_symlink(path("elsewhere"), path("linked"));
  r = fetch(id, path("linked"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is a symbolic link"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(path("elsewhere")));
  // New, then again over its own result.
  ASSERT_EQ(fetch(id, path("result")).status, 0);
  EXPECT_TRUE(fs::exists(path("result/.dcalign-fetch.json")));
  r = fetch(id, path("result"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_npy_matrix<double>(path("result/G.npy")).rows(), 4);
  // A file the user added to a result keeps it from being replaced.
  std::ofstream(path("result/analysis.txt")) << "mine";
  r = fetch(id, path("result"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("'analysis.txt', which a fetch did not write"), std::string::npos) << r.err;
  EXPECT_EQ(read("result/analysis.txt"), "mine");
  // No temporary stays beside the outputs.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
}

TEST_F(ClientOutputs, OnlyTheClientsOwnMessageReachesStderr) {
  // A TLS client against the plaintext server: gRPC's handshake fails, and would log its own
  // "E1128 ... Handshake failed" lines first.
  const auto r = run("client status --server 127.0.0.1:" + std::to_string(server->port()) +
                     " --deadline 3" + analyst() + " --collaboration c" + std::string(32, '0'));
  EXPECT_EQ(r.status, 1);
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);)
    EXPECT_EQ(line.rfind("dcalign: error:", 0), 0u) << "stderr: " << r.err;
}

}  // namespace
}  // namespace dcalign::service::testing
