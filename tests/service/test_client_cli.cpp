// `dcalign client` against a server in this process: a collaboration through the command line,
// and every kind of mistake exiting non-zero with the reason (1 for errors, 2 for usage).
#include <gtest/gtest.h>

#include <fstream>

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
  expect("client fetch " + at() + analyst + " --collaboration c" + std::string(32, '0') +
             " --out " + path("notaresult"),
         1, "not a fetched result");
}

}  // namespace
}  // namespace dcalign::service::testing
