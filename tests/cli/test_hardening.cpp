// Hostile use of `dcalign align` and `dcalign enroll`, one test per class of failure:
// (1) no wrong success: meaningless option values and options the method ignores are usage
// errors (status 2) before any work; (2) no lost or partial files: a run that fails changes no
// existing output and leaves no temporary behind, and outputs replace a symbolic link rather
// than writing through it, for the experiment's result files too; (3) bounded resources:
// --threads is capped at 4 x the cores, the demo's sizes are bounded; (4) values that change on
// the way in: an explicit experiment --trials or --device is checked, never silently ignored.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <vector>
#include "dataset_guard.hpp"

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
  // /proc/self is a directory in which no file can be created, even by root: refused when the
  // outputs are checked, before the computation (the --model-out case below fails after it).
  auto r = run(align("--target-out " + path("Z.npy") + " --report /proc/self/report.json"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("dcalign: error: --report '/proc/self/report.json': cannot write in "
                       "directory '/proc/self'"),
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
    EXPECT_NE(
        r.err.find("--threads " + n + " is out of range: expected 0 to " + std::to_string(bound)),
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
      {"demo --device tpu", "--device: 'tpu' is unknown: expected one of: cpu, cuda"},
      {align("--device tpu"), "--device 'tpu' is unknown: expected one of: cpu, cuda"},
  };
#ifdef DCALIGN_CLI_HAS_EXPERIMENT
  write_text("e.toml", "name = \"e\"\ndataset = \"synthetic\"\n");
  for (const char* t : {"0", "-3"})
    cases.push_back({"experiment " + path("e.toml") + " --out " + path("res") + " --trials " + t,
                     std::string("--trials ") + t + " is out of range: expected 1 to 1000000"});
  cases.push_back({"experiment " + path("e.toml") + " --device tpu",
                   "'tpu' is unknown: expected one of: cpu, cuda"});
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

// ---- Hardening, round 2.

// Class 1: an output never destroys something else. A directory that merely holds a file named
// model.json is not a model and is never replaced; a FIFO (as a device node) is never replaced
// by a file; an output may not be an input, lie inside the input model, or clash with
// --model-out; and every clash is found before --out is replaced.
TEST_F(Hardening, OutputsDestroyNothingElse) {
  write_text("G.npy", "previous G");
  // Another program's project directory with a model.json of its own.
  fs::create_directories(dir_ / "proj");
  write_text("proj/model.json", "{\"name\": \"my web app\"}");
  write_text("proj/main.c", "int main() {}");
  write_text("proj/util.c", "int util() {}");
  auto r = run(align("--model-out " + path("proj")));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("cannot save model to '" + path("proj") + "'"), std::string::npos) << r.err;
  EXPECT_EQ(bytes("proj/main.c"), "int main() {}");
  EXPECT_EQ(bytes("proj/util.c"), "int util() {}");
  EXPECT_EQ(bytes("proj/model.json"), "{\"name\": \"my web app\"}");
  EXPECT_EQ(bytes("G.npy"), "previous G");  // refused before any work
  // A real model with a stranger inside is not replaced either; a clean one is.
  r = run(align("--model-out " + path("model")));
  ASSERT_EQ(r.status, 0) << r.err;
  write_text("model/notes.txt", "mine");
  write_text("G.npy", "previous G");
  r = run(align("--model-out " + path("model")));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("holds 'notes.txt'"), std::string::npos) << r.err;
  EXPECT_EQ(bytes("model/notes.txt"), "mine");
  EXPECT_EQ(bytes("G.npy"), "previous G");
  fs::remove(dir_ / "model" / "notes.txt");
  r = run(align("--model-out " + path("model")));
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string model_json = bytes("model/model.json");
  const std::string model_target = bytes("model/target.npy");

  // A FIFO stands for any node that is not a regular file (/dev/null as root).
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const std::string enroll = "enroll --model " + path("model") + " --anchors " + path("A.npy");
  for (const std::string& args :
       {align(" --report " + path("fifo")),
        "align --anchors " + path("A.npy") + " --out " + path("fifo"),
        enroll + " --out " + path("fifo"), "comm --json " + path("fifo")}) {
    r = run(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("is a FIFO"), std::string::npos) << args << "\n" << r.err;
    struct stat st {};
    ASSERT_EQ(::lstat(path("fifo").c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << args;
  }

  const std::string anchors = bytes("A.npy");
  struct Case {
    std::string args, fragment;
  } cases[] = {
      {"align --anchors " + path("A.npy") + " --out " + path("A.npy"),
       "would replace the input --anchors"},
      {align("--report " + path("A.npy")), "would replace the input --anchors"},
      {align("--report " + path("sub/../A.npy")), "would replace the input --anchors"},
      {enroll + " --out " + path("model/target.npy"), "would replace a file of the input --model"},
      {enroll + " --out " + path("G.npy") + " --report " + path("model/model.json"),
       "would replace a file of the input --model"},
      {enroll + " --out " + path("G.npy") + " --report " + path("model/new.json"),
       "would replace a file of the input --model"},
      {align("--model-out " + path("m2") + " --report " + path("m2")), "clash"},
      {align("--model-out " + path("model") + " --report " + path("model/r.json")), "clash"},
      {align("--report " + path("model/r.json") + " --model-out " + path("model")), "clash"},
      {align("--model-out " + path("A.npy")), "--model-out"},
  };
  fs::create_directories(dir_ / "sub");
  for (const auto& c : cases) {
    write_text("G.npy", "previous G");
    r = run(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(bytes("G.npy"), "previous G") << c.args;
    EXPECT_EQ(bytes("A.npy"), anchors) << c.args;
    EXPECT_EQ(bytes("model/model.json"), model_json) << c.args;
    EXPECT_EQ(bytes("model/target.npy"), model_target) << c.args;
    EXPECT_FALSE(fs::exists(path("m2"))) << c.args;
    EXPECT_FALSE(fs::exists(path("model/r.json"))) << c.args;
  }
  EXPECT_TRUE(temporaries().empty());
}

// Class 1: a signal during a write leaves no temporary behind. The file size limit makes the
// kernel send SIGXFSZ in the middle of writing a temporary (an output file or the model
// directory), deterministically; the process must still die of that signal.
TEST_F(Hardening, SignalDuringWriteLeavesNoTemporary) {
  const auto big = testing::released_anchors<double>(
      testing::make_synthetic(400, 40, 6, 3, SpanCondition::same_span_orth, 3));
  write_npy<double>(path("B.npy"), big.view());  // Z is 400 x 6 doubles: 19 KB
  for (const std::string& extra :
       {"--target-out " + path("Z.npy"), "--model-out " + path("model")}) {
    const std::string cmd = "(ulimit -f 8; exec " + cli() + " align --anchors " + path("B.npy") +
                            " --out " + path("G.npy") + " " + extra + ") 2> " + path("stderr.txt");
    const int raw = std::system(cmd.c_str());
    // The shell reports a child killed by a signal as 128 + the signal.
    const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    EXPECT_EQ(status, 128 + SIGXFSZ) << extra;
    EXPECT_FALSE(fs::exists(path("Z.npy"))) << extra;
    EXPECT_FALSE(fs::exists(path("model"))) << extra;
    EXPECT_FALSE(fs::exists(path("G.npy"))) << extra;
    EXPECT_TRUE(temporaries().empty()) << extra;
  }
}

// Class 3: out-of-range numbers are usage errors, never clamped or wrapped; and malformed ones
// (a fraction, trailing text) are refused the same way. Nothing runs: G.npy is untouched.
TEST_F(Hardening, NumbersAreNeverClampedOrWrapped) {
  write_text("G.npy", "previous G");
  struct Case {
    std::string args, fragment;
  };
  std::vector<Case> cases = {
      {align("--seed -1"), "--seed -1 is out of range: expected 0 to 18446744073709551615"},
      {align("--seed 18446744073709551616"), "--seed 18446744073709551616 is out of range"},
      {align("--seed 99999999999999999999999999"), "--seed 99999999999999999999999999 is out"},
      {align("--seed 7.5"), "--seed '7.5' is not an integer"},
      {align("--seed 12abc"), "--seed '12abc' is not an integer"},
      {align("--method imakura --svd randomized --oversampling 9223372036854775808"),
       "--oversampling 9223372036854775808 is out of range"},
      {align("--threads 4294967296"), "--threads 4294967296 is out of range"},
      {align("--method gopp --gopp-tolerance 1e999"), "--gopp-tolerance 1e999 is out of range"},
      {"comm -c 9223372036854775808", "--users 9223372036854775808 is out of range"},
      {"comm -c -9223372036854775809", "--users -9223372036854775809 is out of range"},
      {"comm -N 1e400", "--model-parameters 1e400 is out of range"},
      {"comm -p 0.5x", "--participation '0.5x' is not a number"},
      {"demo --seed -1", "--seed -1 is out of range"},
      {"demo --users 99999999999999999999", "--users 99999999999999999999 is out of range"},
  };
#ifdef DCALIGN_CLI_HAS_EXPERIMENT
  write_text("e.toml", "name = \"e\"\ndataset = \"synthetic\"\n");
  cases.push_back(
      {"experiment " + path("e.toml") + " --trials 99999999999999999999 --out " + path("res"),
       "--trials 99999999999999999999 is out of range"});
  cases.push_back({"experiment " + path("e.toml") + " --trials 2.5 --out " + path("res"),
                   "--trials '2.5' is not an integer"});
  cases.push_back({"experiment " + path("e.toml") + " --threads 99999 --out " + path("res"),
                   "--threads 99999 is out of range"});
#endif
  for (const auto& c : cases) {
    const auto r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("dcalign: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(bytes("G.npy"), "previous G") << c.args;
  }
  EXPECT_FALSE(fs::exists(path("res")));
  // The largest seed is a seed like any other.
  const auto r = run(align("--seed 18446744073709551615"));
  EXPECT_EQ(r.status, 0) << r.err;
}

// Class 6: an unknown value of any choice is a usage error (status 2, like --device), and so is
// every option the run would not use, and an empty output path.
TEST_F(Hardening, UnknownValuesAndUnusedOptionsAreUsageErrors) {
  write_text("G.npy", "previous G");
  struct Case {
    std::string extra, fragment;
  } cases[] = {
      {"--method foo", "--method 'foo': unknown alignment method 'foo'"},
      {"--method imakura --svd foo", "--svd 'foo'"},
      {"--polar foo", "--polar 'foo'"},
      {"--precision float16", "--precision 'float16'"},
      {"--target-rotation foo", "--target-rotation 'foo'"},
      {"--method imakura --right foo", "--right 'foo'"},
      {"--method kawakami --kawakami-form foo", "--kawakami-form 'foo'"},
      {"--method gopp --gopp-init foo", "--gopp-init 'foo'"},
      {"--method odc --svd exact", "--svd is not used by method odc"},
      {"--method gopp --gopp-init odc --svd exact", "--svd is not used by method gopp with"},
      {"--method imakura --polar svd", "--polar is not used by method imakura"},
      {"--method kawakami --polar iterative", "--polar is not used by method kawakami"},
      {"--method imakura --power-iterations 3", "--power-iterations is not used without --svd"},
      {"--method imakura --svd exact --oversampling 3",
       "--oversampling is not used without --svd randomized"},
      {"--target " + path("Z0.npy") + " --rotation " + path("O.npy"),
       "--rotation is not used with --target"},
      {"--rotation " + path("O.npy") + " --target-rotation identity",
       "--target-rotation is not used with --target or --rotation"},
      {"--target " + path("Z0.npy") + " --reference-user 1",
       "--reference-user is not used with --target"},
      {"--method imakura --reference-user 1", "--reference-user is not used by method imakura"},
      {"--no-evaluate --consensus", "--consensus is not used with --no-evaluate"},
      {"--report ''", "--report '' is an empty path"},
      {"--target-out ''", "--target-out '' is an empty path"},
      {"--model-out ''", "--model-out '' is an empty path"},
  };
  for (const auto& c : cases) {
    const auto r = run(align(c.extra));
    EXPECT_EQ(r.status, 2) << c.extra << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("dcalign: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.extra << "\n" << r.err;
    EXPECT_EQ(bytes("G.npy"), "previous G") << c.extra;
  }
  auto r = run("align --anchors '' --out " + path("G.npy"));
  EXPECT_EQ(r.status, 2) << r.err;
  r = run("comm --json ''");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--json '' is an empty path"), std::string::npos) << r.err;
  // The options that a run does use stay accepted.
  for (const char* extra :
       {"--method imakura --svd randomized --oversampling 4 --power-iterations 1",
        "--method gopp --gopp-init spectral --svd exact --polar svd",
        "--method odc --polar iterative --reference-user 1 --consensus"}) {
    r = run(align(extra));
    EXPECT_EQ(r.status, 0) << extra << "\n" << r.err;
  }
}

// Class 4: every count has an upper bound, and every file read has a type and a size check
// before it is read: a FIFO as the experiment file is refused at once (not a blocked open()),
// a directory or /dev/zero is named for what it is, and a padded model.json is refused by size.
TEST_F(Hardening, WorkAndReadsAreBounded) {
  write_text("G.npy", "previous G");
  for (const std::string& extra :
       {std::string("--method imakura --svd randomized --power-iterations 2000000000"),
        std::string("--method imakura --svd randomized --oversampling 100000000"),
        std::string("--method gopp --gopp-max-iterations 1000000000"),
        std::string("--method rdp-ls --rdp-max-iterations 1000000000")}) {
    const auto r = run(align(extra));
    EXPECT_EQ(r.status, 2) << extra << "\n" << r.err;
    EXPECT_NE(r.err.find("is out of range: expected"), std::string::npos) << extra << r.err;
    EXPECT_EQ(bytes("G.npy"), "previous G");
  }
  auto r = run(align("--model-out " + path("model")));
  ASSERT_EQ(r.status, 0) << r.err;
  // 2 MB of trailing spaces: valid JSON, but no model.json is that large.
  std::string json = bytes("model/model.json");
  write_text("model/model.json", json + std::string(2 << 20, ' '));
  r = run("enroll --model " + path("model") + " --anchors " + path("A.npy") + " --out " +
          path("Gn.npy"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("a model.json is at most 1048576 bytes"), std::string::npos) << r.err;
#ifdef DCALIGN_CLI_HAS_EXPERIMENT
  ASSERT_EQ(::mkfifo(path("fifo.toml").c_str(), 0600), 0);
  fs::create_directories(dir_ / "cfgdir");
  struct Case {
    std::string file, fragment;
  } cases[] = {{path("fifo.toml"), "is a FIFO; expected a TOML file"},
               {path("cfgdir"), "is a directory; expected a TOML file"},
               {"/dev/zero", "is a character device; expected a TOML file"}};
  for (const auto& c : cases) {
    // timeout: before the fix, open() of the FIFO blocks forever (status 124).
    const std::string cmd =
        "timeout 20 " + cli() + " experiment " + c.file + " --check 2> " + path("stderr.txt");
    const int raw = std::system(cmd.c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    r.err = bytes("stderr.txt");
    EXPECT_EQ(r.status, 1) << c.file << "\n" << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.file << "\n" << r.err;
  }
#endif
}

// Class 5: model.json is parsed strictly: a NUL byte with garbage after the JSON, or a key given
// twice, is an error naming the file, never a model that loads.
TEST_F(Hardening, ModelFileIsParsedStrictly) {
  auto r = run(align("--model-out " + path("model")));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string json = bytes("model/model.json");
  const std::string enroll = "enroll --model " + path("model") + " --anchors " + path("A.npy") +
                             " --out " + path("Gn.npy");
  r = run(enroll);
  ASSERT_EQ(r.status, 0) << r.err;
  fs::remove(path("Gn.npy"));
  const auto brace = json.find('{');
  ASSERT_NE(brace, std::string::npos);
  struct Case {
    std::string text, fragment;
  } cases[] = {
      {json + std::string(1, '\0') + "garbage", "has a NUL byte at offset"},
      {json.substr(0, brace + 1) + "\"users\": 99, " + json.substr(brace + 1),
       "has the key 'users' twice"},
      {json + "{}", "not valid JSON"},
  };
  for (const auto& c : cases) {
    write_text("model/model.json", c.text);
    r = run(enroll);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("model.json"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(path("Gn.npy")));
  }
}

// Class 9: an experiment whose results directory cannot be written fails before the first
// trial, with the OS's reason.
TEST_F(Hardening, ExperimentChecksItsOutputDirectoryFirst) {
#ifndef DCALIGN_CLI_HAS_EXPERIMENT
  GTEST_SKIP() << "built without the experiment layer";
#else
  write_text("e.toml",
             "name = \"e\"\ndataset = \"synthetic\"\nusers = 2\nsamples_per_user = 30\n"
             "anchor_rows = 40\ndim = 4\nmethods = [\"odc\"]\nmodels = [\"knn\"]\n"
             "conditions = [\"SameSpan-Orth\"]\n");
  // /proc/self: a directory in which no file can be created, even by root.
  auto r = run("experiment " + path("e.toml") + " --out /proc/self");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("--out '/proc/self': cannot write the results there ("), std::string::npos)
      << r.err;
  EXPECT_EQ(bytes("stdout.txt").find("wall time"), std::string::npos);
  write_text("file", "x");
  r = run("experiment " + path("e.toml") + " --out " + path("file/sub"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("cannot create the results directory ("), std::string::npos) << r.err;
  ASSERT_EQ(::mkfifo(path("res_e.json").c_str(), 0600), 0);
  fs::create_directories(dir_ / "res");
  fs::rename(path("res_e.json"), path("res/e.json"));
  r = run("experiment " + path("e.toml") + " --out " + path("res"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("is a FIFO"), std::string::npos) << r.err;
#endif
}

// Class 8: a dataset file is checked against the official file's SHA-256 by default. A Pima
// CSV with one digit changed (still well-formed) is refused, naming the file and both digests;
// verify_checksums = false reads it as it is.
TEST_F(Hardening, DatasetsAreVerifiedByDefault) {
#ifndef DCALIGN_CLI_HAS_EXPERIMENT
  GTEST_SKIP() << "built without the experiment layer";
#else
  const char* env = std::getenv("DCALIGN_DATA");
  const fs::path official = fs::path(env && *env ? env : DCALIGN_SHARED_DATASETS) /
                            "pima-diabetes" / "pima-indians-diabetes.csv";
  DCALIGN_REQUIRE_DATASET(!fs::exists(official), "Pima diabetes not found at " << official);
  std::ifstream in(official, std::ios::binary);
  std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t pos = csv.find("148");
  ASSERT_NE(pos, std::string::npos);
  csv[pos] = '2';
  fs::create_directories(dir_ / "data" / "pima-diabetes");
  write_text("data/pima-diabetes/pima-indians-diabetes.csv", csv);
  const std::string body =
      "name = \"p\"\ndataset = \"pima-diabetes\"\nusers = 2\nsamples_per_user = 50\n"
      "test_samples = 50\nanchor_rows = 40\ndim = 4\nmethods = [\"odc\"]\n"
      "models = [\"knn\"]\nconditions = [\"SameSpan-Orth\"]\n";
  write_text("p.toml", body);
  auto r = run("experiment " + path("p.toml") + " --check --data-dir " + path("data"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("checksum mismatch for '" + path("data") +
                       "/pima-diabetes/pima-indians-diabetes.csv'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("6bfe5d0f379d17a0e0819b996407e3c09bf80febd4287f2ed212190dfff154af"),
            std::string::npos)
      << r.err;
  write_text("p.toml", body + "verify_checksums = false\n");
  r = run("experiment " + path("p.toml") + " --check --data-dir " + path("data"));
  EXPECT_EQ(r.status, 0) << r.err;
#endif
}

// Class 6 for experiment files: a key for a feature the run does not use is refused (as the
// unused dp_* keys were), naming the key and what would use it.
TEST_F(Hardening, UnusedExperimentKeysAreRefused) {
#ifndef DCALIGN_CLI_HAS_EXPERIMENT
  GTEST_SKIP() << "built without the experiment layer";
#else
  const std::string base =
      "name = \"e\"\ndataset = \"synthetic\"\nusers = 2\nsamples_per_user = 30\n"
      "anchor_rows = 40\ndim = 4\nmethods = [\"odc\"]\nmodels = [\"knn\"]\n";
  struct Case {
    std::string key, fragment;
  } cases[] = {
      {"kawakami_form = \"eigen\"", "key 'kawakami_form' must be left out unless methods lists"},
      {"svm_C = 2.0", "key 'svm_C' must be left out unless models lists \"svm\""},
      {"nri_delta = 0.1", "key 'nri_delta' must be left out unless protocol = \"nri-dc\""},
      {"forest_trees = 10", "key 'forest_trees' must be left out unless models lists"},
      {"imakura_right = \"uniform\"", "key 'imakura_right' must be left out unless"},
      {"dirichlet_alpha = 0.5", "key 'dirichlet_alpha' must be left out unless partition"},
  };
  for (const auto& c : cases) {
    write_text("e.toml", base + c.key + "\n");
    const auto r = run("experiment " + path("e.toml") + " --check");
    EXPECT_EQ(r.status, 1) << c.key << "\n" << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.key << "\n" << r.err;
  }
  write_text("e.toml", base + "knn_k = 3\n");
  const auto r = run("experiment " + path("e.toml") + " --check");
  EXPECT_EQ(r.status, 0) << r.err;
#endif
}

// Class 2: scale invariance. Anchors far from scale 1 are refused with a message that says so
// (exit 1, no output), for every method, never answered with a meaningless "converged" result
// (GOPP objective 0 after one step, RDP gradient 0, an orthogonality error NaN). Class 7: the
// subnormal case says the same, not "please report this". A moderate scale still aligns.
TEST_F(Hardening, ScaleIsHandledForEveryMethod) {
  const auto A = read_npy_stack<double>(path("A.npy"));
  const auto scaled = [&](double s) {
    Stack<double> B(A.count(), A.rows(), A.cols());
    for (index_t i = 0; i < A.size(); ++i) B.data()[i] = A.data()[i] * s;
    write_npy<double>(path("S.npy"), B.view());
  };
  for (const char* method : {"odc", "imakura", "kawakami", "gopp", "opp", "rdp-ls", "rdp-opp"})
    for (double s : {1e-200, 1e-300, 1e300, 1e-310}) {
      scaled(s);
      const auto r = run("align --method " + std::string(method) + " --anchors " + path("S.npy") +
                         " --out " + path("GS.npy") + " --report " + path("rs.json"));
      EXPECT_EQ(r.status, 1) << method << " " << s << "\n" << r.err;
      EXPECT_NE(r.err.find("Every method is scale invariant"), std::string::npos)
          << method << " " << s << "\n"
          << r.err;
      EXPECT_EQ(r.err.find("please report"), std::string::npos) << r.err;
      EXPECT_FALSE(fs::exists(path("GS.npy"))) << method << " " << s;
    }
  auto r = run(align(""));
  ASSERT_EQ(r.status, 0) << r.err;
  scaled(1e-50);
  r = run("align --anchors " + path("S.npy") + " --out " + path("GS.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto G = read_npy_stack<double>(path("G.npy")), GS = read_npy_stack<double>(path("GS.npy"));
  for (index_t i = 0; i < G.size(); ++i) EXPECT_NEAR(G.data()[i], GS.data()[i], 1e-9);
}

// Class 7: a huge dataset name is not echoed back whole.
TEST_F(Hardening, LongValuesAreNotEchoed) {
#ifndef DCALIGN_CLI_HAS_EXPERIMENT
  GTEST_SKIP() << "built without the experiment layer";
#else
  write_text("e.toml", "name = \"e\"\ndataset = \"" + std::string(500000, 'x') + "\"\n");
  const auto r = run("experiment " + path("e.toml") + " --check");
  EXPECT_EQ(r.status, 1) << r.err.substr(0, 300);
  EXPECT_LT(r.err.size(), 1000u) << r.err.substr(0, 300);
  EXPECT_NE(r.err.find("key 'dataset'"), std::string::npos) << r.err.substr(0, 300);
#endif
}

}  // namespace
}  // namespace dcalign
