#pragma once
// A scratch directory per test and a runner for the dcalign executable (DCALIGN_CLI_PATH),
// shared by the CLI suites: the exit status (128 + signal for a crash) and what went to stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dcalign::testing {

struct CliResult {
  int status;
  std::string err;
};

class CliFixture : public ::testing::Test {
 protected:
  explicit CliFixture(const char* prefix = "dcalign_cli_") : prefix_(prefix) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  /// The executable under test: DCALIGN_CLI_PATH, or $DCALIGN_TEST_CLI when set (to run the
  /// suite against another build, e.g. to check that a new test fails before its fix).
  static std::string cli() {
    const char* other = std::getenv("DCALIGN_TEST_CLI");
    return other && *other ? other : DCALIGN_CLI_PATH;
  }
  CliResult run(const std::string& args) const {
    const std::string err = path("stderr.txt");
    const std::string cmd = cli() + " " + args + " 2> " + err + " > " + path("stdout.txt");
    const int raw = std::system(cmd.c_str());
    std::ifstream f(err);
    std::stringstream ss;
    ss << f.rdbuf();
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), ss.str()};
  }
  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace dcalign::testing
