// `mpirun -np N dcalign align --distributed` end to end: the same G.npy as one process (one
// stack read by offset, or one file per rank with uneven slices), and errors on one rank
// (a NaN, a missing file) reported once, naming the user and the rank, with every rank exiting
// non-zero and no output left behind. Each mpirun runs under `timeout`, so a hang fails.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dcalign/npy.hpp"
#include "dcalign/random.hpp"

namespace fs = std::filesystem;

namespace dcalign {
namespace {

struct Outcome {
  int status = -1;
  std::string err;
};

/// Runs `command` (stderr captured, stdout discarded) under a 120 s timeout.
Outcome run(const std::string& command, const fs::path& dir) {
  const fs::path err = dir / "stderr.txt";
  const std::string full = "cd '" + dir.string() + "' && timeout 120 " + command + " 2>'" +
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

std::string mpirun(int ranks) {
  return std::string(DCALIGN_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) + " " +
         DCALIGN_CLI_PATH + " align --distributed";
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class DistCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dcalign_dist_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // 7 users of 40 x 4: A_i = X B_i + noise.
    Rng rng = Rng::stream(17, 0);
    const Matrix<double> X = random_normal<double>(40, 9, rng);
    A_ = Stack<double>(7, 40, 4);
    for (index_t i = 0; i < 7; ++i) {
      const Matrix<double> B = random_normal<double>(9, 4, rng);
      const Matrix<double> N = random_normal<double>(40, 4, rng);
      for (index_t j = 0; j < 4; ++j)
        for (index_t r = 0; r < 40; ++r) {
          double v = 0.01 * N(r, j);
          for (index_t k = 0; k < 9; ++k) v += X(r, k) * B(k, j);
          A_(i, r, j) = v;
        }
    }
    write_npy(path("A.npy"), A_.view());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_users(const std::string& name, index_t first, index_t count, const Stack<double>& A) {
    Stack<double> s(count, A.rows(), A.cols());
    std::copy(A.data() + first * A.rows() * A.cols(),
              A.data() + (first + count) * A.rows() * A.cols(), s.data());
    write_npy(path(name), s.view());
  }
  static double max_difference(const Stack<double>& a, const Stack<double>& b) {
    double d = 0;
    for (index_t k = 0; k < a.size(); ++k) d = std::max(d, std::abs(a.data()[k] - b.data()[k]));
    return d;
  }
  fs::path dir_;
  Stack<double> A_;
};

TEST_F(DistCli, SameOutputAsOneProcess) {
  for (const char* method : {"odc", "gopp"}) {
    SCOPED_TRACE(method);
    const std::string m = std::string(" --method ") + method + " --seed 3";
    Outcome one = run(std::string(DCALIGN_CLI_PATH) + " align" + m +
                          " --anchors A.npy --out G1.npy --report r1.json",
                      dir_);
    ASSERT_EQ(one.status, 0) << one.err;
    Outcome two = run(mpirun(2) + m + " --anchors A.npy --out G2.npy --report r2.json", dir_);
    ASSERT_EQ(two.status, 0) << two.err;
    // Uneven per-rank files: 2, 4 and 1 users.
    write_users("A_0.npy", 0, 2, A_);
    write_users("A_1.npy", 2, 4, A_);
    write_users("A_2.npy", 6, 1, A_);
    Outcome three = run(mpirun(3) + m + " --anchors 'A_{rank}.npy' --out G3.npy", dir_);
    ASSERT_EQ(three.status, 0) << three.err;
    const auto G1 = read_npy_stack<double>(path("G1.npy"));
    const auto G2 = read_npy_stack<double>(path("G2.npy"));
    const auto G3 = read_npy_stack<double>(path("G3.npy"));
    ASSERT_EQ(G2.count(), 7);
    ASSERT_EQ(G3.count(), 7);
    // Orthogonal G_i (entries at most 1): absolute differences are relative ones.
    EXPECT_LE(max_difference(G1, G2), 1e-12);
    EXPECT_LE(max_difference(G1, G3), 1e-12);
    std::ifstream r2(path("r2.json"));
    std::stringstream ss;
    ss << r2.rdbuf();
    EXPECT_NE(ss.str().find("\"users\": 7"), std::string::npos) << ss.str();
  }
}

TEST_F(DistCli, NanOnOneRankIsReportedOnceAndNothingIsWritten) {
  Stack<double> bad = A_;
  bad(5, 7, 2) = std::nan("");  // user 5: rank 1 of 2 holds users 3..6
  write_npy(path("B.npy"), bad.view());
  for (const char* method : {"odc", "imakura", "gopp"}) {
    SCOPED_TRACE(method);
    Outcome r = run(mpirun(2) + " --method " + method + " --anchors B.npy --out G.npy", dir_);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.status, 124) << "timed out (a rank hung)";
    EXPECT_EQ(count(r.err, "dcalign: error:"), 1) << r.err;
    EXPECT_NE(r.err.find("rank 1 of 2: user 5:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("row 7, column 2"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(path("G.npy")));
  }
  // Only A.npy, B.npy and the captured stderr: no temporaries left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 3);
}

TEST_F(DistCli, MissingFileOnOneRankIsReportedOnce) {
  write_users("A_0.npy", 0, 3, A_);  // no A_1.npy
  Outcome r = run(mpirun(2) + " --anchors 'A_{rank}.npy' --out G.npy", dir_);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 124) << "timed out (a rank hung)";
  EXPECT_EQ(count(r.err, "dcalign: error:"), 1) << r.err;
  EXPECT_NE(r.err.find("rank 1 of 2: npy file 'A_1.npy': cannot read: no such file"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(path("G.npy")));
}

TEST_F(DistCli, MoreRanksThanUsersIsAnError) {
  write_users("A_small.npy", 0, 2, A_);
  Outcome r = run(mpirun(3) + " --anchors A_small.npy --out G.npy", dir_);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(count(r.err, "dcalign: error:"), 1) << r.err;
  EXPECT_NE(r.err.find("every rank needs at least one"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dcalign
