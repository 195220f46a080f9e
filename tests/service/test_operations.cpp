// What an operator does to a running dcalign-server: check a config file before starting it,
// rotate the analyst token with SIGHUP.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "server_process.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

struct Output {
  int status = -1;
  std::string text;  ///< stdout and stderr
};

Output run_server(const std::string& args) {
  Output out;
  const std::string cmd = std::string(DCALIGN_SERVER_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.text.append(buf, n);
  const int st = ::pclose(p);
  out.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(ServiceOperations, CheckConfigValidatesAFileAndExits) {
  TempDir dir;
  { std::ofstream(dir.path / "token") << kAnalystToken << "\n"; }
  const fs::path data = dir.path / "data";
  const auto write_config = [&](const std::string& extra) {
    std::ofstream(dir.path / "server.toml")
        << "# dcalign-server\n"
        << "data-dir = \"" << data.string() << "\"\n"
        << "analyst-token-file = \"" << (dir.path / "token").string() << "\"\n"
        << "insecure-localhost = true\n"
        << "listen = \"127.0.0.1:0\"\n"
        << (extra.find("metrics-listen") == std::string::npos ? "metrics-listen = \"127.0.0.1:0\"\n"
                                                              : "")
        << extra;
    return "--config " + (dir.path / "server.toml").string() + " --check-config";
  };
  Output ok = run_server(write_config("device = \"cpu\"\ncpu-workers = 3\n"));
  EXPECT_EQ(ok.status, 0) << ok.text;
  EXPECT_NE(ok.text.find("the configuration is valid"), std::string::npos) << ok.text;
  EXPECT_NE(ok.text.find("workers: cpu0 ("), std::string::npos) << ok.text;
  EXPECT_NE(ok.text.find("cpu2 ("), std::string::npos) << ok.text;
  EXPECT_FALSE(fs::exists(data)) << "--check-config must not create the data directory";

  // Each mistake is named, with a non-zero exit and nothing started.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"device = \"cpu\"\ncpu-workers = 0\n", "--cpu-workers 0 without GPU workers"},
      {"device = \"cpu\"\ndevices = \"0\"\n", "--devices asks for GPU workers"},
      {"device = \"tpu\"\n", "--device 'tpu'"},
      {"cpu-workers = 5000\n", "--cpu-workers"},
      {"idle-timeout = -1\n", "--idle-timeout"},
      {"no-such-option = 1\n", "no-such-option"},
  };
  for (const auto& [extra, words] : bad) {
    const Output o = run_server(write_config(extra));
    EXPECT_NE(o.status, 0) << extra << o.text;
    EXPECT_NE(o.text.find(words), std::string::npos) << extra << "\n" << o.text;
    EXPECT_FALSE(fs::exists(data));
  }
  // The metrics on another host than loopback need TLS, which --insecure-localhost is not.
  Output open = run_server(write_config("metrics-listen = \"0.0.0.0:9464\"\n"));
  EXPECT_NE(open.status, 0);
  EXPECT_NE(open.text.find("is not a loopback address"), std::string::npos) << open.text;
  // A token file that is not there is named.
  fs::remove(dir.path / "token");
  Output missing = run_server(write_config(""));
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.text.find((dir.path / "token").string()), std::string::npos) << missing.text;
  // The command line wins over the file.
  { std::ofstream(dir.path / "token") << kAnalystToken << "\n"; }
  Output cli = run_server(write_config("device = \"cpu\"\ncpu-workers = 0\n") + " --cpu-workers 1");
  EXPECT_EQ(cli.status, 0) << cli.text;
}

bool analyst_accepted(int port, const std::string& token) {
  try {
    client_for(port, token).create(small_spec(1));
    return true;
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code, StatusCode::UNAUTHENTICATED) << e.what();
    return false;
  }
}

TEST(ServiceOperations, SighupRotatesTheAnalystToken) {
  TempDir dir;
  ServerProcess server(dir.path);
  ASSERT_TRUE(analyst_accepted(server.port(), kAnalystToken));
  const std::string fresh = "rotated-analyst-token-0123456789";
  { std::ofstream(dir.path / "analyst.token", std::ios::trunc) << fresh << "\n"; }
  server.signal(SIGHUP);
  bool rotated = false;
  for (int i = 0; i < 200 && !rotated; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    rotated = server.log().find("analyst_token_rotated") != std::string::npos;
  }
  ASSERT_TRUE(rotated) << server.log();
  EXPECT_FALSE(analyst_accepted(server.port(), kAnalystToken));  // the old one is refused
  EXPECT_TRUE(analyst_accepted(server.port(), fresh));

  // A bad file keeps the token in use, and the log says why.
  { std::ofstream(dir.path / "analyst.token", std::ios::trunc) << "short\n"; }
  server.signal(SIGHUP);
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    refused = server.log().find("analyst_token_not_rotated") != std::string::npos;
  }
  EXPECT_TRUE(refused) << server.log();
  EXPECT_TRUE(analyst_accepted(server.port(), fresh));
  // The server keeps serving and stops cleanly.
  server.signal(SIGTERM);
  EXPECT_EQ(server.exit_code_within(20), 0) << server.log();
}

}  // namespace
}  // namespace dcalign::service::testing
