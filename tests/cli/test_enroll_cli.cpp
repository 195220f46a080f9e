// `dcalign align --model-out M` and `dcalign enroll --model M`: a model saved by align enrols
// later users as the batch alignment would have aligned them (ODC), in the model's precision,
// for (a, l) and (k, a, l) inputs; every bad model or A_new exits 1 with a message naming the
// problem, usage errors with CLI11's status, never a crash.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
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

class EnrollCli : public testing::CliFixture {
 protected:
  EnrollCli() : CliFixture("dcalign_enroll_cli_") {}
  void SetUp() override {
    CliFixture::SetUp();
    // Users 0..4 under SameSpan-Orth; a = 40, l = 4.
    all_ = testing::released_anchors<double>(
        testing::make_synthetic(40, 12, 4, 5, SpanCondition::same_span_orth, 4));
    write_npy<double>(path("all.npy"), all_.view());
    write_npy<double>(path("first.npy"), StackView<const double>(all_.data(), 1, 40, 4));
    write_npy<double>(path("rest.npy"), StackView<const double>(all_[1].data(), 4, 40, 4));
    write_npy<double>(path("user3.npy"), all_[3]);
  }
  Stack<double> all_;
};

// Fitting ODC on user 0 and enrolling users 1..4 reproduces the batch alignment of all five with
// the same seed (tolerance as in tests/core/test_aligner.cpp: the products differ only in
// summation order; 1e-10 relative to ||G_i||_F = 2).
TEST_F(EnrollCli, OdcModelEnrolsAsTheBatchAlignment) {
  auto r = run("align --anchors " + path("all.npy") + " --out " + path("G_all.npy") + " --seed 3");
  ASSERT_EQ(r.status, 0) << r.err;
  r = run("align --anchors " + path("first.npy") + " --out " + path("G_first.npy") +
          " --seed 3 --model-out " + path("model"));
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(fs::exists(path("model/model.json")));
  ASSERT_TRUE(fs::exists(path("model/target.npy")));
  r = run("enroll --model " + path("model") + " --anchors " + path("rest.npy") + " --out " +
          path("G_rest.npy") + " --report " + path("report.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto batch = read_npy_stack<double>(path("G_all.npy"));
  const auto rest = read_npy_stack<double>(path("G_rest.npy"));
  ASSERT_EQ(rest.count(), 4);
  for (index_t i = 1; i < 5; ++i)
    EXPECT_LE(testing::frob_diff(testing::to_double(rest[i - 1]), testing::to_double(batch[i])),
              1e-10 * 2)
        << "user " << i;
  std::ifstream f(path("report.json"));
  const auto js = nlohmann::json::parse(f);
  for (const char* key : {"method", "users", "fitted_users", "residual", "relative_residual",
                          "orthogonality_error", "rank_ratio", "seconds"})
    EXPECT_TRUE(js.contains(key)) << key;
  EXPECT_EQ(js["method"], "odc");
  EXPECT_EQ(js["users"], 4);
  EXPECT_EQ(js["fitted_users"], 1);
  EXPECT_EQ(js["residual"].size(), 4u);
  // One user as an (a, l) array gives an (l, l) array.
  r = run("enroll --model " + path("model") + " --anchors " + path("user3.npy") + " --out " +
          path("G3.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_npy_header(path("G3.npy")).shape, (std::vector<index_t>{4, 4}));
  const auto G3 = read_npy_matrix<double>(path("G3.npy"));
  EXPECT_LE(testing::frob_diff(testing::to_double(G3), testing::to_double(batch[3])), 1e-10 * 2);
}

TEST_F(EnrollCli, EveryMethodAndPrecision) {
  for (const char* method : {"odc", "imakura", "kawakami", "gopp"}) {
    for (const char* precision : {"float64", "float32"}) {
      SCOPED_TRACE(std::string(method) + " " + precision);
      const std::string model = path(std::string("m_") + method + precision);
      auto r = run(std::string("align --method ") + method + " --precision " + precision +
                   " --anchors " + path("all.npy") + " --out " + path("G.npy") + " --model-out " +
                   model);
      ASSERT_EQ(r.status, 0) << r.err;
      r = run("enroll --model " + model + " --anchors " + path("rest.npy") + " --out " +
              path("Gn.npy"));
      ASSERT_EQ(r.status, 0) << r.err;
      const auto h = read_npy_header(path("Gn.npy"));
      EXPECT_EQ(h.shape, (std::vector<index_t>{4, 4, 4}));
      EXPECT_EQ(h.dtype, std::string(precision) == "float32" ? DType::float32 : DType::float64);
    }
  }
}

TEST_F(EnrollCli, BadModelsAndInputsExitOneWithMessage) {
  ASSERT_EQ(run("align --anchors " + path("first.npy") + " --out " + path("G.npy") +
                " --model-out " + path("model"))
                .status,
            0);
  fs::copy(path("model"), path("truncated"));
  {
    std::ifstream in(path("model/model.json"));
    std::stringstream ss;
    ss << in.rdbuf();
    std::ofstream(path("truncated/model.json"), std::ios::trunc) << ss.str().substr(0, 100);
    auto j = nlohmann::json::parse(ss.str());
    j["method"] = "imakura";
    fs::copy(path("model"), path("other"));
    std::ofstream(path("other/model.json"), std::ios::trunc) << j.dump(2);
  }
  auto wide = Matrix<double>(40, 5);
  write_npy<double>(path("wide.npy"), wide.view());
  auto nan = all_.matrix(2);
  nan(6, 1) = std::numeric_limits<double>::quiet_NaN();
  write_npy<double>(path("nan.npy"), nan.view());
  auto deficient = all_.matrix(2);
  for (index_t i = 0; i < 40; ++i) deficient(i, 2) = deficient(i, 0);
  write_npy<double>(path("deficient.npy"), deficient.view());
  std::ofstream(path("file.txt")) << "not a model";

  const std::string out = " --out " + path("Gn.npy");
  const std::string user = " --anchors " + path("user3.npy");
  struct Case {
    std::string args, fragment;
  } cases[] = {
      {"enroll --model " + path("missing") + user + out, "no such directory"},
      {"enroll --model " + path("truncated") + user + out, "not valid JSON"},
      {"enroll --model " + path("other") + user + out, "another method"},
      {"enroll --model " + path("model") + " --anchors " + path("wide.npy") + out,
       "expected a x l = 40 x 4"},
      {"enroll --model " + path("model") + " --anchors " + path("nan.npy") + out,
       "row 6, column 1"},
      {"enroll --model " + path("model") + " --anchors " + path("deficient.npy") + out,
       "rank deficient"},
      {"enroll --model " + path("model") + " --anchors " + path("missing.npy") + out,
       "missing.npy"},
      {"align --anchors " + path("first.npy") + " --out " + path("G.npy") + " --model-out " +
           path("file.txt"),
       "not a dcalign model directory"},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find("dcalign: error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos)
        << "'" << c.fragment << "' not in: " << r.err;
  }
  // Usage errors: CLI11's status, as for the other commands.
  const auto r = run("enroll --anchors " + path("user3.npy") + out);
  EXPECT_EQ(r.status, 2) << "usage errors exit 2\n" << r.err;
  EXPECT_NE(r.err.find("--model is required"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dcalign
