// `dcalign align-ragged`: one NPY per user in and out, users of different latent dimensions.
#include <gtest/gtest.h>

#include <random>

#include "cli/cli_fixture.hpp"
#include "dcalign/npy.hpp"

namespace dcalign::testing {
namespace {

class RaggedCli : public CliFixture {
 protected:
  RaggedCli() : CliFixture("dcalign_ragged_cli_") {}
  // Three users of l_i = 4, 6, 5 whose spans share 3 directions.
  void SetUp() override {
    CliFixture::SetUp();
    std::mt19937_64 gen(7);
    std::normal_distribution<double> d;
    Matrix<double> B(50, 3);
    for (index_t k = 0; k < B.size(); ++k) B.data()[k] = d(gen);
    const index_t l[] = {4, 6, 5};
    for (int i = 0; i < 3; ++i) {
      Matrix<double> A(50, l[i]);
      for (index_t j = 0; j < l[i]; ++j)
        for (index_t r = 0; r < 50; ++r)
          A(r, j) = j < 3 ? B(r, j) + 0.5 * B(r, (j + 1) % 3) : d(gen);
      write_npy(path("A" + std::to_string(i) + ".npy"), A.view());
    }
  }
  std::string users(int n, const std::string& what) const {
    std::string out;
    for (int i = 0; i < n; ++i)
      out += " --" + std::string(what == "G" ? "out " : "anchor ") +
             path(what + std::to_string(i) + ".npy");
    return out;
  }
};

TEST_F(RaggedCli, WritesOneGPerUserOfItsOwnShape) {
  for (const char* m : {"imakura", "kawakami"}) {
    const auto r = run(std::string("align-ragged --method ") + m + " --dim 3" + users(3, "A") +
                       users(3, "G") + " --report " + path("r.json"));
    ASSERT_EQ(r.status, 0) << r.err;
    const index_t l[] = {4, 6, 5};
    for (int i = 0; i < 3; ++i) {
      const auto G = read_npy_matrix<double>(path("G" + std::to_string(i) + ".npy"));
      EXPECT_EQ(G.rows(), l[i]);
      EXPECT_EQ(G.cols(), 3);
    }
    std::ifstream report(path("r.json"));
    EXPECT_TRUE(report.good());
  }
}

TEST_F(RaggedCli, MistakesChangeNoFileAndSayWhy) {
  std::ofstream(path("G0.npy")) << "keep";
  const auto expect = [&](const std::string& args, int status, const std::string& words) {
    const auto r = run(args);
    EXPECT_EQ(r.status, status) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  };
  expect("align-ragged --method odc --dim 3" + users(2, "A") + users(2, "G"), 1,
         "l_i = 4, 6: use imakura or kawakami");
  expect("align-ragged --method imakura --dim 3" + users(2, "A") + users(1, "G"), 2,
         "one --out per --anchor");
  expect("align-ragged --method imakura --dim 11" + users(2, "A") + users(2, "G"), 1,
         "dim 11 is out of range");
  expect("align-ragged --method kawakami --right uniform --dim 3" + users(2, "A") + users(2, "G"),
         2, "--right is not used by method kawakami");
  expect("align-ragged --method imakura --dim 3" + users(2, "A") + " --out " + path("G0.npy") +
             " --out " + path("A1.npy"),
         1, "--out");
  std::ifstream kept(path("G0.npy"));
  std::string text;
  kept >> text;
  EXPECT_EQ(text, "keep");
}

}  // namespace
}  // namespace dcalign::testing
