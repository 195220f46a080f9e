// Issue 12, hostile use of `dcalign align` and `dcalign enroll`, one test per class of failure:
// (1) no wrong success: meaningless option values and options the method ignores are usage
// errors (status 2) before any work; (2) no lost or partial files: a run that fails changes no
// existing output and leaves no temporary behind, and outputs replace a symbolic link rather
// than writing through it, for the experiment's result files too; (3) bounded resources:
// --threads is capped at 4 x the cores, the demo's sizes are bounded; (4) values that change on
// the way in: an explicit experiment --trials or --device is checked, never silently ignored.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_fixture.hpp"
#include "dcalign/npy.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;

class Hardening : public testing::CliFixture {
 protected:
  Hardening() : CliFixture("dcalign_hardening_") {}
  void SetUp() override {
    CliFixture::SetUp();
    const auto anchors = testing::released_anchors<double>(
        testing::make_synthetic(30, 9, 4, 3, SpanCondition::same_span_orth, 2));
    write_npy<double>(path("A.npy"), anchors.view());
  }
  std::string bytes(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  void write_text(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
  }
  // Names in the scratch directory that look like an output's temporary (".X.tmp.PID.N").
  std::vector<std::string> temporaries() const {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string n = e.path().filename().string();
      if (n.find(".tmp.") != std::string::npos) found.push_back(n);
    }
    return found;
  }
  std::string align(const std::string& extra) const {
    return "align --anchors " + path("A.npy") + " --out " + path("G.npy") + " " + extra;
  }
};

// Class 1: each meaningless value or ignored option exits 2 with a message naming it (an
// unusable output path exits 1), and the existing G.npy is untouched: nothing ran.
TEST_F(Hardening, MeaninglessOptionsAreUsageErrors) {
  write_text("G.npy", "previous G");
  struct Case {
    std::string extra, fragment;
    int status = 2;
  } cases[] = {
      {"--method gopp --gopp-max-iterations 0", "--gopp-max-iterations 0 is out of range"},
      {"--method gopp --gopp-max-iterations -3", "--gopp-max-iterations -3 is out of range"},
      {"--method gopp --gopp-tolerance -1", "--gopp-tolerance"},
      {"--method gopp --gopp-tolerance nan", "--gopp-tolerance nan"},
      {"--method gopp --gopp-tolerance inf", "--gopp-tolerance inf"},
      {"--method imakura --oversampling -1", "--oversampling -1"},
      {"--method imakura --power-iterations -2", "--power-iterations -2"},
      {"--reference-user -1", "--reference-user -1"},
      {"--threads -1", "--threads -1"},
      {"--method kawakami --target " + path("A.npy"), "--target is not used by method kawakami"},
      {"--method imakura --rotation " + path("A.npy"), "--rotation is not used by method imakura"},
      {"--method kawakami --target-rotation identity",
       "--target-rotation is not used by method kawakami"},
      {"--method odc --right uniform", "--right is not used by method odc"},
      {"--method gopp --kawakami-form eigen", "--kawakami-form is not used by method gopp"},
      {"--method odc --gopp-init odc", "--gopp-init is not used by method odc"},
      {"--method imakura --gopp-tolerance 1e-3", "--gopp-tolerance is not used by method imakura"},
      {"--method kawakami --gopp-max-iterations 5",
       "--gopp-max-iterations is not used by method kawakami"},
      {"--method kawakami --target-out " + path("Z.npy"),
       "--target-out is not used by method kawakami"},
      // Outputs are checked before any work too (errors, status 1).
      {"--report " + path("G.npy"), "--report and --out name the same file", 1},
      {"--report " + path("no_such_dir/r.json"), "no_such_dir' does not exist", 1},
      {"--target-out " + path("."), "is a directory", 1},
  };
  for (const auto& c : cases) {
    const auto r = run(align(c.extra));
    EXPECT_EQ(r.status, c.status) << c.extra << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("dcalign: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos)
        << "'" << c.fragment << "' not in " << r.err;
    EXPECT_EQ(bytes("G.npy"), "previous G") << c.extra;
    EXPECT_FALSE(fs::exists(path("Z.npy"))) << c.extra;
  }
  EXPECT_TRUE(temporaries().empty());
  // The defaults of options another method uses never trip the check, and options a method
  // does use are accepted.
  for (const char* extra :
       {"--method imakura --right uniform", "--method kawakami --kawakami-form eigen",
        "--method gopp --gopp-max-iterations 1 --gopp-tolerance 0 --target-rotation identity",
        "--method odc --target-rotation identity --reference-user 2 --threads 0"}) {
    const auto r = run(align(extra));
    EXPECT_EQ(r.status, 0) << extra << "\n" << r.err;
  }
}

// Class 2: a failure after the computation (the report cannot be created) leaves the existing
// G.npy and report byte for byte, writes no target, and leaves no temporary; a success then
// replaces them, and an output that is a symbolic link is replaced, its target left alone.
TEST_F(Hardening, FailedRunChangesNoExistingFile) {
  write_text("G.npy", "previous G");
  write_text("Z.npy", "previous Z");
  // /proc/self is a directory in which no file can be created, even by root.
  auto r = run(align("--target-out " + path("Z.npy") + " --report /proc/self/report.json"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("dcalign: error: cannot write the report to '/proc/self/report.json'"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(bytes("G.npy"), "previous G");
  EXPECT_EQ(bytes("Z.npy"), "previous Z");
  EXPECT_TRUE(temporaries().empty());

  // A failing --model-out (after G, Z and the report were written to temporaries).
  write_text("r.json", "previous report");
  r = run(align("--target-out " + path("Z.npy") + " --report " + path("r.json") +
                " --model-out /proc/self/model"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(bytes("G.npy"), "previous G");
  EXPECT_EQ(bytes("Z.npy"), "previous Z");
  EXPECT_EQ(bytes("r.json"), "previous report");
  EXPECT_TRUE(temporaries().empty());

  // Enroll: the same guarantee for its G and report.
  r = run(align("--model-out " + path("model")));
  ASSERT_EQ(r.status, 0) << r.err;
  write_text("G.npy", "previous G");
  r = run("enroll --model " + path("model") + " --anchors " + path("A.npy") + " --out " +
          path("G.npy") + " --report /proc/self/report.json");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(bytes("G.npy"), "previous G");
  EXPECT_TRUE(temporaries().empty());

  // Success replaces every output; a symbolic link is replaced by the file, not written through.
  write_text("elsewhere.npy", "link target");
  fs::create_symlink(path("elsewhere.npy"), path("link.npy"));
  r = run("align --anchors " + path("A.npy") + " --out " + path("link.npy") + " --target-out " +
          path("Z.npy") + " --report " + path("r.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::is_symlink(path("link.npy")));
  EXPECT_EQ(read_npy_stack<double>(path("link.npy")).count(), 3);
  EXPECT_EQ(bytes("elsewhere.npy"), "link target");
  EXPECT_EQ(read_npy_matrix<double>(path("Z.npy")).rows(), 30);
  EXPECT_NE(bytes("r.json").find("\"method\""), std::string::npos);
  EXPECT_TRUE(temporaries().empty());
}

// Class 3: thread counts beyond 4 x the cores are refused with the bound in the message, for
// align and enroll, before any work (no crash inside the OpenMP runtime).
TEST_F(Hardening, ThreadCountIsBounded) {
  const unsigned hw = std::thread::hardware_concurrency();
  const long long bound = 4LL * (hw == 0 ? 1 : hw);
  write_text("G.npy", "previous G");
  for (const std::string& n : {std::to_string(bound + 1), std::string("100000")}) {
    const auto r = run(align("--threads " + n));
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--threads " + n + " is out of range: expected 0 (all cores) to " +
                         std::to_string(bound)),
              std::string::npos)
        << r.err;
    EXPECT_EQ(bytes("G.npy"), "previous G");
  }
  auto r = run(align("--threads " + std::to_string(bound) + " --model-out " + path("model")));
  ASSERT_EQ(r.status, 0) << r.err;
  r = run("enroll --model " + path("model") + " --anchors " + path("A.npy") + " --out " +
          path("Gnew.npy") + " --threads 100000");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--threads 100000 is out of range"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("Gnew.npy")));
  EXPECT_TRUE(temporaries().empty());
}

// Class 4: the experiment's and demo's options are range-checked when given (status 2, the
// option and the accepted range named), and --device names are checked by every command.
TEST_F(Hardening, ExperimentAndDemoOptionsAreChecked) {
  struct Case {
    std::string args, fragment;
  };
  std::vector<Case> cases = {
      {"demo --users 0", "--users 0 is out of range: expected 1 to 10000"},
      {"demo --users 100000000", "--users 100000000 is out of range"},
      {"demo --samples -5", "--samples -5 is out of range"},
      {"demo --features 10 --dim 11", "--dim 11 is out of range: expected 1 to 10"},
      {"demo --users 10000 --samples 100000 --features 1000",
       "demo: --users x --samples x --features = 1000000000000"},
      {"demo --device tpu", "unknown device 'tpu': expected cpu or cuda"},
      {align("--device tpu"), "unknown device 'tpu'"},
  };
#ifdef DCALIGN_CLI_HAS_EXPERIMENT
  write_text("e.toml", "name = \"e\"\ndataset = \"synthetic\"\n");
  for (const char* t : {"0", "-3"})
    cases.push_back({"experiment " + path("e.toml") + " --out " + path("res") + " --trials " + t,
                     std::string("--trials ") + t + " is out of range: expected >= 1"});
  cases.push_back({"experiment " + path("e.toml") + " --device tpu", "unknown device 'tpu'"});
#endif
  for (const auto& c : cases) {
    const auto r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos)
        << "'" << c.fragment << "' not in " << r.err;
  }
  EXPECT_FALSE(fs::exists(path("res")));
}

// Class 2 for `dcalign experiment`: its JSON, CSV and Markdown files appear together or not at
// all. With the CSV's name taken by a directory the run fails (status 1) after the computation,
// and the existing JSON is left byte for byte, with no temporary behind.
TEST_F(Hardening, ExperimentResultsAreReplacedTogether) {
#ifndef DCALIGN_CLI_HAS_EXPERIMENT
  GTEST_SKIP() << "built without the experiment layer";
#else
  write_text("e.toml",
             "name = \"e\"\ndataset = \"synthetic\"\nusers = 2\nsamples_per_user = 30\n"
             "anchor_rows = 40\ndim = 4\nmethods = [\"odc\"]\nmodels = [\"knn\"]\n"
             "conditions = [\"SameSpan-Orth\"]\n");
  fs::create_directories(dir_ / "res" / "e.csv");
  { std::ofstream(path("res/e.json")) << "previous json"; }
  auto r = run("experiment " + path("e.toml") + " --out " + path("res"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("e.csv' is a directory"), std::string::npos) << r.err;
  EXPECT_EQ(bytes("res/e.json"), "previous json");
  EXPECT_FALSE(fs::exists(path("res/e.md")));
  for (const auto& e : fs::directory_iterator(dir_ / "res"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  fs::remove(dir_ / "res" / "e.csv");
  r = run("experiment " + path("e.toml") + " --out " + path("res"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(bytes("res/e.json").find("\"records\""), std::string::npos);
  EXPECT_NE(bytes("res/e.csv").find("trial,condition"), std::string::npos);
#endif
}

}  // namespace
}  // namespace dcalign
