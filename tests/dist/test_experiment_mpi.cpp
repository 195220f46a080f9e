// `mpirun -np N dcalign experiment FILE --distributed`: the trials and sweep points spread over
// 1 to 4 ranks (dynamic assignment) end with the records of one process, bit for bit (the JSON's
// values, 17 significant digits); a trial that fails on a rank fails the run with that rank's
// error, reported once, and --resume (on another rank count) finishes it with the same records.
// Each mpirun runs under `timeout`, so a hang fails.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace dcalign {
namespace {

struct Outcome {
  int status = -1;
  std::string err;
};

Outcome run(const std::string& command, const fs::path& dir) {
  const fs::path err = dir / "stderr.txt";
  const std::string full = "cd '" + dir.string() + "' && timeout 300 " + command + " 2>'" +
                           err.string() + "' >/dev/null";
  Outcome r;
  const int rc = std::system(full.c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::ifstream f(err);
  std::stringstream ss;
  ss << f.rdbuf();
  r.err = ss.str();
  return r;
}

class ExperimentMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dcalign_experiment_mpi_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream f(dir_ / "run.toml");
    f << "name = \"mpi\"\ndataset = \"synthetic\"\nusers = 4\nsamples_per_user = 60\n"
         "test_samples = 200\nanchor_rows = 120\ndim = 8\n"
         "conditions = [\"SameSpan-Orth\", \"DiffSpan\"]\n"
         "methods = [\"central\", \"local\", \"imakura\", \"odc\", \"fedavg\"]\n"
         "models = [\"knn\", \"mlp\"]\nmlp_hidden = 16\nmlp_max_epochs = 10\ntrials = 4\n"
         "seed = 4\nthreads = 1\n[fedavg]\nconfigurations = [\"1E16B\"]\nrounds = 3\n"
         "[sweep]\ndim = [5, 8]\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string experiment(const std::string& out) const {
    return std::string(DCALIGN_CLI_PATH) + " experiment run.toml --out " + out;
  }
  static std::string mpirun(int ranks) {
    return std::string(DCALIGN_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) + " ";
  }
  // The records (without their timings) and the rounds of a result file.
  nlohmann::json values(const std::string& out) const {
    std::ifstream f(dir_ / out / "mpi.json");
    nlohmann::json j = nlohmann::json::parse(f);
    for (auto& r : j["records"]) r.erase("seconds");
    return nlohmann::json{{"records", j["records"]}, {"rounds", j["rounds"]}};
  }
  fs::path dir_;
};

TEST_F(ExperimentMpi, EveryRankCountGivesTheRecordsOfOneProcess) {
  ASSERT_EQ(run(experiment("one"), dir_).status, 0);
  const auto one = values("one");
  ASSERT_EQ(one["records"].size() % 8, 0u);
  for (int ranks = 1; ranks <= 4; ++ranks) {
    const std::string out = "np" + std::to_string(ranks);
    const auto r = run(mpirun(ranks) + experiment(out) + " --distributed", dir_);
    ASSERT_EQ(r.status, 0) << ranks << " ranks: " << r.err;
    EXPECT_EQ(values(out), one) << ranks << " ranks";
    EXPECT_FALSE(fs::exists(dir_ / out / "mpi.trials")) << "the checkpoint outlived the outputs";
  }
}

TEST_F(ExperimentMpi, ARankThatFailsMidRunFailsItAndResumeFinishesIt) {
  ASSERT_EQ(run(experiment("one"), dir_).status, 0);
  // Trial 3 of every point fails on whichever rank runs it.
  auto r =
      run("env DCALIGN_EXPERIMENT_FAIL_TRIAL=3 " + mpirun(3) + experiment("out") + " --distributed",
          dir_);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("dcalign: error: rank "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("of 3: trial 3 failed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("dcalign: error:"), r.err.rfind("dcalign: error:")) << "reported twice";
  EXPECT_FALSE(fs::exists(dir_ / "out" / "mpi.json"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "mpi.trials" / "point1-trial1.json"));
  r = run(mpirun(2) + experiment("out") + " --distributed --resume", dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("resuming: "), std::string::npos) << r.err;
  EXPECT_EQ(values("out"), values("one"));
}

}  // namespace
}  // namespace dcalign
