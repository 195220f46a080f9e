// The dcalign executable: success writes G and a report; every bad input exits non-zero with
// a message naming the problem, never a crash (a signal would show as status > 128).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli_fixture.hpp"
#include "dcalign/npy.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;

using Result = testing::CliResult;

class Cli : public testing::CliFixture {
 protected:
  void write_bytes(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
};

TEST_F(Cli, AlignWritesOrthogonalGAndReport) {
  auto syn = testing::make_synthetic(30, 9, 4, 3, SpanCondition::same_span_orth, 2);
  const auto anchors = testing::released_anchors<double>(syn);
  write_npy<double>(path("A.npy"), anchors.view());
  for (const char* method : {"odc", "imakura", "kawakami", "gopp"}) {
    const auto r = run(std::string("align --method ") + method + " --anchors " + path("A.npy") +
                       " --out " + path("G.npy") + " --report " + path("r.json") + " --seed 3");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto G = read_npy_stack<double>(path("G.npy"));
    EXPECT_EQ(G.count(), 3);
    EXPECT_EQ(G.rows(), 4);
    std::ifstream f(path("r.json"));
    const auto js = nlohmann::json::parse(f);
    for (const char* key :
         {"method", "users", "anchor_rows", "dim", "objective", "orthogonality_error", "seconds"})
      EXPECT_TRUE(js.contains(key)) << key;
    EXPECT_EQ(js["method"], method);
    EXPECT_EQ(js["users"], 3);
    EXPECT_TRUE(js["seconds"].contains("total"));
    if (std::string(method) == "odc") {
      EXPECT_LE(js["orthogonality_error"].get<double>(), 1e-12);
    }
  }
  // float32 path
  const auto r =
      run("align --precision float32 --anchors " + path("A.npy") + " --out " + path("G32.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_npy_header(path("G32.npy")).dtype, DType::float32);
}

TEST_F(Cli, BadInputsExitNonZeroWithMessage) {
  auto syn = testing::make_synthetic(30, 9, 4, 3, SpanCondition::same_span_orth, 2);
  auto anchors = testing::released_anchors<double>(syn);
  write_npy<double>(path("good.npy"), anchors.view());
  std::ifstream good(path("good.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(good)), std::istreambuf_iterator<char>());
  write_bytes("truncated.npy", bytes.substr(0, bytes.size() - 100));
  write_bytes("garbage.npy", "this is not an npy file at all");
  write_npy<double>(path("twod.npy"), anchors[0]);
  anchors(1, 2, 3) = std::nan("");
  write_npy<double>(path("nan.npy"), anchors.view());
  Stack<double> wide(2, 3, 5);
  write_npy<double>(path("wide.npy"), wide.view());
  const std::string out = " --out " + path("G.npy");
  struct Case {
    std::string args, fragment;
  } cases[] = {
      {"align --anchors " + path("missing.npy") + out, "missing.npy"},
      {"align --anchors " + path("truncated.npy") + out, "truncated"},
      {"align --anchors " + path("garbage.npy") + out, "garbage.npy"},
      {"align --anchors " + path("twod.npy") + out, "3-D"},
      {"align --anchors " + path("nan.npy") + out, "user 1"},
      {"align --anchors " + path("wide.npy") + out, "l = 5"},
      {"align --method magic --anchors " + path("good.npy") + out, "magic"},
      {"align --device cuda --anchors " + path("good.npy") + out, "CUDA"},
      {"align --precision half --anchors " + path("good.npy") + out, "half"},
      {"align --anchors " + path("good.npy") + " --out /nonexistent/dir/G.npy", "/nonexistent"},
      {"align --anchors " + path("good.npy"), "--out"},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_LT(r.status, 128) << "crashed: " << c.args;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos)
        << "'" << c.fragment << "' not in: " << r.err;
  }
}

TEST_F(Cli, DemoPrintsEveryConditionAndMethod) {
  const auto r = run("demo --users 3 --samples 40 --features 12 --dim 3 --anchor-rows 30");
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream f(path("stdout.txt"));
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  for (const char* s : {"SameSpan-Orth", "DiffSpan", "imakura", "kawakami", "odc", "gopp"})
    EXPECT_NE(text.find(s), std::string::npos) << s;
}

// `dcalign experiment` runs in dcalign-experiment (the executable that links LibTorch) and
// behaves as the built-in command did: help, status 1 with a message, CLI11's usage errors.
TEST_F(Cli, ExperimentRunsThroughItsOwnExecutable) {
#ifndef DCALIGN_CLI_HAS_EXPERIMENT
  GTEST_SKIP() << "built without the experiment layer";
#endif
  auto r = run("experiment --help");
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream f(path("stdout.txt"));
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("experiment [OPTIONS] file"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("--trials"), std::string::npos) << ss.str();
  r = run("experiment " + path("missing.toml"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("dcalign: error: experiment file '" + path("missing.toml") + "'"),
            std::string::npos)
      << r.err;
  r = run("experiment");
  EXPECT_EQ(r.status, 2) << "usage errors exit 2\n" << r.err;
  EXPECT_NE(r.err.find("file is required"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dcalign
