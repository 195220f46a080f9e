// dcalign predict end to end through the dcalign executable (which forwards it to
// dcalign-experiment): a model saved by Model::save, a user's F, G and Y; the output must equal
// the library's h(Y F G) exactly, and inputs whose shapes do not chain fail, naming the file and
// what was expected, with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "cli/cli_fixture.hpp"
#include "dcalign/learn.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/random.hpp"
#include "dcalign/user.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;

Matrix<double> random_matrix(index_t rows, index_t cols, Rng& rng) {
  Matrix<double> m(rows, cols);
  for (index_t j = 0; j < cols; ++j)
    for (index_t i = 0; i < rows; ++i) m(i, j) = rng.normal();
  return m;
}

// Three classes in m = 6 features, separated along the first two.
std::vector<double> labels_of(Matrix<double>& X) {
  std::vector<double> y(static_cast<size_t>(X.rows()));
  for (index_t i = 0; i < X.rows(); ++i) {
    y[static_cast<size_t>(i)] = static_cast<double>(i % 3);
    X(i, static_cast<index_t>(i % 2)) += 3.0 * static_cast<double>(i % 3);
  }
  return y;
}

std::vector<std::uint64_t> bits(const Matrix<double>& m) {
  std::vector<std::uint64_t> out(static_cast<size_t>(m.size()));
  std::memcpy(out.data(), m.data(), out.size() * sizeof(double));
  return out;
}

class PredictCli : public testing::CliFixture {
 protected:
  PredictCli() : CliFixture("dcalign_predict_") {}
  void SetUp() override {
    CliFixture::SetUp();
    Rng rng(5);
    F_ = random_matrix(6, 3, rng);  // m = 6, l = 3
    G_ = random_matrix(3, 3, rng);
    Matrix<double> X = random_matrix(90, 6, rng);
    const std::vector<double> y = labels_of(X);
    Y_ = random_matrix(20, 6, rng);
    labels_of(Y_);
    learn::ModelOptions o;
    o.threads = 1;
    classifier_ = learn::make_model("knn", o);
    classifier_->fit(map_to_collaboration(X, F_, G_), y, 3);
    classifier_->save(path("knn"));
    regression_ = learn::make_model("linear");
    regression_->fit(map_to_collaboration(X, F_, G_), std::vector<double>(X.data(), X.data() + 90),
                     0);
    regression_->save(path("linear"));
    write_npy(path("F.npy"), F_.view());
    write_npy(path("G.npy"), G_.view());
    write_npy(path("Y.npy"), Y_.view());
  }
  std::string args(const std::string& model, const std::string& F, const std::string& G,
                   const std::string& Y, const std::string& out = "P.npy") const {
    return "predict --model " + path(model) + " --basis " + path(F) + " --change-of-basis " +
           path(G) + " --data " + path(Y) + " --out " + path(out);
  }
  // A failed run: its status, the fragments of its message, and no output file.
  void expect_failure(const std::string& command, int status,
                      const std::vector<std::string>& fragments) {
    const CliResult r = run(command);
    EXPECT_EQ(r.status, status) << r.err;
    for (const auto& f : fragments)
      EXPECT_NE(r.err.find(f), std::string::npos) << "'" << f << "' missing in: " << r.err;
    EXPECT_FALSE(fs::exists(path("P.npy")));
  }

  Matrix<double> F_, G_, Y_;
  std::unique_ptr<learn::Model> classifier_, regression_;
};

TEST_F(PredictCli, MatchesTheLibraryBitForBit) {
  const Matrix<double> Z = map_to_collaboration(Y_, F_, G_);
  CliResult r = run(args("knn", "F.npy", "G.npy", "Y.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  const Matrix<double> P = read_npy_matrix<double>(path("P.npy"));
  ASSERT_EQ(P.rows(), 20);
  ASSERT_EQ(P.cols(), 1);
  const std::vector<double> want = classifier_->predict(Z);
  EXPECT_EQ(bits(P), bits(Matrix<double>(20, 1, want)));

  r = run(args("knn", "F.npy", "G.npy", "Y.npy", "proba.npy") + " --proba");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(bits(read_npy_matrix<double>(path("proba.npy"))), bits(classifier_->predict_proba(Z)));

  r = run(args("linear", "F.npy", "G.npy", "Y.npy", "reg.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(bits(read_npy_matrix<double>(path("reg.npy"))),
            bits(Matrix<double>(20, 1, regression_->predict(Z))));
}

// A user whose l differs from the collaboration's dim (align_ragged: G is l_i x dim): F (6, 2)
// and G (2, 3) feed the model trained on dim = 3, exactly as the library maps them.
TEST_F(PredictCli, AUserOfAnotherLatentDimensionPredicts) {
  Rng rng(13);
  const Matrix<double> F2 = random_matrix(6, 2, rng), G23 = random_matrix(2, 3, rng);
  write_npy(path("F2.npy"), F2.view());
  write_npy(path("G23.npy"), G23.view());
  const CliResult r = run(args("knn", "F2.npy", "G23.npy", "Y.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  const Matrix<double> Z = map_to_collaboration(Y_, F2, G23);
  ASSERT_EQ(Z.cols(), 3);
  EXPECT_EQ(bits(read_npy_matrix<double>(path("P.npy"))),
            bits(Matrix<double>(20, 1, classifier_->predict(Z))));
}

TEST_F(PredictCli, ShapesThatDoNotChainFailBeforeAnyWork) {
  Rng rng(9);
  write_npy(path("Y7.npy"), random_matrix(20, 7, rng).view());
  expect_failure(args("knn", "F.npy", "G.npy", "Y7.npy"), 1,
                 {"--data", "Y7.npy", "(20, 7)", "expected (n, 6)", "F.npy"});
  write_npy(path("G4.npy"), random_matrix(4, 4, rng).view());
  expect_failure(args("knn", "F.npy", "G4.npy", "Y.npy"), 1,
                 {"--change-of-basis", "G4.npy", "(4, 4)", "expected (l, dim) = (3, dim)"});
  // A consistent F and G of another dimension than the model's.
  write_npy(path("F4.npy"), random_matrix(6, 4, rng).view());
  expect_failure(args("knn", "F4.npy", "G4.npy", "Y.npy"), 1,
                 {"--model", "trained on 3 features", "expected dim = 4", "G4.npy"});
  Stack<double> three(2, 6, 3);
  write_npy(path("F3d.npy"), three.view());
  expect_failure(args("knn", "F3d.npy", "G.npy", "Y.npy"), 1, {"--basis", "F3d.npy", "(2, 6, 3)"});
  expect_failure(args("knn", "F.npy", "G.npy", "missing.npy"), 1, {"missing.npy"});
  expect_failure(args("nothing", "F.npy", "G.npy", "Y.npy"), 1, {"nothing", "no such directory"});
  Matrix<double> bad = Y_;
  bad(4, 2) = std::numeric_limits<double>::quiet_NaN();
  write_npy(path("Ynan.npy"), bad.view());
  expect_failure(args("knn", "F.npy", "G.npy", "Ynan.npy"), 1,
                 {"--data", "Ynan.npy", "row 4, column 2"});
  expect_failure(args("linear", "F.npy", "G.npy", "Y.npy") + " --proba", 2,
                 {"--proba", "regression"});
  expect_failure("predict --model " + path("knn") + " --basis " + path("F.npy"), 2,
                 {"is required"});
}

TEST_F(PredictCli, NeverReplacesAnInput) {
  const std::string before = path("Y.npy");
  const auto size = fs::file_size(before);
  const CliResult r = run(args("knn", "F.npy", "G.npy", "Y.npy", "Y.npy"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--data"), std::string::npos) << r.err;
  EXPECT_EQ(fs::file_size(before), size);
  const CliResult into_model = run(args("knn", "F.npy", "G.npy", "Y.npy", "knn/P.npy"));
  EXPECT_NE(into_model.status, 0);
  EXPECT_FALSE(fs::exists(path("knn/P.npy")));
  EXPECT_EQ(learn::load_model(path("knn"))->name(), "knn");
}

}  // namespace
}  // namespace dcalign
