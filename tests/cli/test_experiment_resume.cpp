// `dcalign experiment --resume` after a SIGKILL: the run is killed once some trials are in its
// checkpoint, resumed, and its final records are bit for bit those of an uninterrupted run
// (the JSON's values, which carry 17 significant digits); a plain rerun over the interrupted
// run's trials is refused, and --restart discards them.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_fixture.hpp"

namespace dcalign::testing {
namespace {

namespace fs = std::filesystem;

class ExperimentResume : public CliFixture {
 protected:
  ExperimentResume() : CliFixture("dcalign_resume_") {}
  void write_config() {
    std::ofstream f(path("run.toml"));
    f << "name = \"resume\"\ndataset = \"synthetic\"\nusers = 4\nsamples_per_user = 80\n"
         "test_samples = 200\nanchor_rows = 150\ndim = 10\n"
         "conditions = [\"SameSpan-Orth\", \"DiffSpan\"]\n"
         "methods = [\"central\", \"local\", \"imakura\", \"odc\", \"fedavg\"]\n"
         "models = [\"knn\", \"mlp\"]\nmlp_hidden = 32\nmlp_max_epochs = 30\ntrials = 12\n"
         "seed = 4\nthreads = 2\n[fedavg]\nconfigurations = [\"1E16B\"]\nrounds = 4\n";
  }
  // The records and rounds without their timings.
  static nlohmann::json values(const std::string& file) {
    std::ifstream f(file);
    nlohmann::json j = nlohmann::json::parse(f);
    for (auto& r : j["records"]) r.erase("seconds");
    return nlohmann::json{{"records", j["records"]}, {"rounds", j["rounds"]}};
  }
};

TEST_F(ExperimentResume, AKilledRunResumesToTheUninterruptedRunsRecords) {
#ifndef DCALIGN_CLI_HAS_EXPERIMENT
  GTEST_SKIP() << "built without the experiment layer";
#endif
  write_config();
  ASSERT_EQ(run("experiment " + path("run.toml") + " --out " + path("whole")).status, 0);
  const auto whole = values(path("whole/resume.json"));
  ASSERT_EQ(whole["records"].size() % 12, 0u);
  EXPECT_FALSE(fs::exists(path("whole/resume.trials")));  // removed once the outputs are in

  // The same run, killed with SIGKILL once two trials are in its checkpoint.
  const std::string out = path("killed");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string log = path("killed.log");
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const std::string exe = cli(), cfg = path("run.toml");
    ::execl(exe.c_str(), exe.c_str(), "experiment", cfg.c_str(), "--out", out.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const fs::path ck = fs::path(out) / "resume.trials";
  const auto count = [&] {
    size_t n = 0;
    std::error_code ec;
    for (fs::directory_iterator it(ck, ec), end; !ec && it != end; it.increment(ec))
      n += it->path().filename().string().rfind("point", 0) == 0 &&
           it->path().extension() == ".json";
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run ended before it was killed";
  const size_t kept = count();
  ASSERT_GE(kept, 2u);
  ASSERT_LT(kept, 12u) << "every trial was done before the kill";
  EXPECT_FALSE(fs::exists(fs::path(out) / "resume.json"));

  // A plain rerun would redo them: refused, naming --resume.
  auto r = run("experiment " + path("run.toml") + " --out " + out);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--resume"), std::string::npos) << r.err;

  r = run("experiment " + path("run.toml") + " --out " + out + " --resume");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("resuming: " + std::to_string(kept) + " of 12"), std::string::npos) << r.err;
  EXPECT_EQ(values(out + "/resume.json"), whole);
  EXPECT_FALSE(fs::exists(ck));
}

TEST_F(ExperimentResume, ResumeAndRestartAreExclusiveAndResumeNeedsNoCheckpoint) {
#ifndef DCALIGN_CLI_HAS_EXPERIMENT
  GTEST_SKIP() << "built without the experiment layer";
#endif
  write_config();
  auto r = run("experiment " + path("run.toml") + " --resume --restart --out " + path("o"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--restart"), std::string::npos) << r.err;
  // Nothing to resume: the whole run (here only 1 trial).
  r = run("experiment " + path("run.toml") + " --resume --trials 1 --out " + path("o"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(path("o/resume.json")));
}

}  // namespace
}  // namespace dcalign::testing
