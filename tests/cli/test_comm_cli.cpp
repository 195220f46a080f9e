// `dcalign comm` through the executable: the table and the JSON of paper 001's worked example
// (values worked out by hand in tests/comm/test_comm.cpp), and bad values as usage errors that
// leave an existing --json file untouched.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli_fixture.hpp"

namespace dcalign {
namespace {

class CommCli : public testing::CliFixture {
 protected:
  CommCli() : testing::CliFixture("dcalign_comm_cli_") {}
  std::string read(const std::string& name) const {
    std::ifstream f(path(name));
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
};

TEST_F(CommCli, DefaultsPrintThePapersExample) {
  const auto r = run("comm");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string out = read("stdout.txt");
  // B_DC = 1.03976e10 bytes = 10.3976 GB, B_FL = 2e10, R* = 0.51988, ceil 1.
  for (const char* s :
       {"1.03976e+10", "10.3976", "2e+10", "R* (16) = 0.51988", "ceil(R*) = 1", "DC sends less"})
    EXPECT_NE(out.find(s), std::string::npos) << s << " not in:\n" << out;
  // No --bandwidth: no transfer times.
  EXPECT_EQ(out.find("transfer time"), std::string::npos) << out;
}

TEST_F(CommCli, JsonHasBytesBreakEvenAndTimes) {
  const std::string json = path("comm.json");
  const auto r = run("comm --participation 0.1 --bandwidth 1e9 --rtt 0.05 --json " + json);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream f(json);
  const auto j = nlohmann::json::parse(f);
  EXPECT_NEAR(j["bytes"]["dc"].get<double>(), 1.03976e10, 1.0);
  EXPECT_NEAR(j["bytes"]["fl"].get<double>(), 2.0e9, 1.0);  // p = 0.1 of 100 clients
  EXPECT_NEAR(j["gb"]["dc"].get<double>(), 10.3976, 1e-9);
  EXPECT_NEAR(j["break_even_rounds"].get<double>(), 5.1988, 1e-9);
  EXPECT_EQ(j["break_even_rounds_ceil"].get<double>(), 6.0);
  EXPECT_FALSE(j["dc_sends_less"].get<bool>());  // one round of 10 clients sends less
  EXPECT_EQ(j["inputs"]["gamma"].get<double>(), 100.0);
  EXPECT_EQ(j["inputs"]["users"].get<long long>(), 100);
  EXPECT_NEAR(j["transfer"]["dc_seconds"].get<double>(), 83.1808 + 0.15, 1e-9);
  EXPECT_NEAR(j["transfer"]["fl_seconds"].get<double>(), 16.0 + 0.1, 1e-9);
  const std::string out = read("stdout.txt");
  EXPECT_NE(out.find("transfer time"), std::string::npos) << out;
  EXPECT_NE(out.find("FL sends less"), std::string::npos) << out;
}

TEST_F(CommCli, GammaZeroHalfPrecisionAndPerUserSamples) {
  auto r = run("comm --gamma 0 --json " + path("a.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream fa(path("a.json"));
  EXPECT_NEAR(nlohmann::json::parse(fa)["bytes"]["dc"].get<double>(), 1.0084e10, 1.0);
  r = run("comm -q 16 --json " + path("b.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream fb(path("b.json"));
  EXPECT_NEAR(nlohmann::json::parse(fb)["bytes"]["dc"].get<double>(), 5.1988e9, 1.0);
  // Four users (c from the list): sum_i (n_i + 1000) 100 * 4 = 4e6 bytes of uplink.
  r = run("comm --samples 500,1500,1000,3000 --json " + path("c.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream fc(path("c.json"));
  const auto j = nlohmann::json::parse(fc);
  EXPECT_EQ(j["inputs"]["users"].get<long long>(), 4);
  EXPECT_EQ(j["inputs"]["mean_samples"].get<double>(), 1500.0);
  EXPECT_NEAR(j["bytes"]["uplink"].get<double>(), 4.0e6, 1e-6);
  EXPECT_NEAR(j["bytes"]["uplink_max_user"].get<double>(), 1.6e6, 1e-6);
}

// An MNIST layout (tests/comm/test_comm.cpp, PerProtocolModelSizes): N_DC = 10,506 (DC's MLP
// on l = 30), N_FL = 203,530 (FedAvg's on m = 784); B_DC = 10 (2000 * 30 + 900 + 10506) 4 =
// 2856240, B_FL per round = 2 * 10 * 203530 * 4 = 16282400, R* = 35703 / 203530.
const std::string kMnist = "comm -c 10 -n 1000 -a 1000 -m 784 -l 30 --gamma 0 ";

TEST_F(CommCli, PerProtocolModelSizes) {
  const auto r = run(kMnist + "--dc-model-parameters 10506 --fl-model-parameters 203530 --json " +
                     path("two.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream f(path("two.json"));
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["inputs"]["dc_model_parameters"].get<double>(), 10506.0);
  EXPECT_EQ(j["inputs"]["fl_model_parameters"].get<double>(), 203530.0);
  EXPECT_TRUE(j["inputs"]["model_parameters"].is_null());
  EXPECT_NEAR(j["bytes"]["downlink"].get<double>(), 456240.0, 1e-6);
  EXPECT_NEAR(j["bytes"]["dc"].get<double>(), 2856240.0, 1e-6);
  EXPECT_NEAR(j["bytes"]["fl_per_round"].get<double>(), 16282400.0, 1e-6);
  EXPECT_NEAR(j["break_even_rounds"].get<double>(), 35703.0 / 203530, 1e-15);
  const std::string out = read("stdout.txt");
  EXPECT_NE(out.find("N_DC = 10506 and N_FL = 203530 parameters,"), std::string::npos) << out;
  EXPECT_NE(out.find("R* (16) = 0.175419"), std::string::npos) << out;
}

TEST_F(CommCli, ModelParametersIsBothUnlessOverridden) {
  const auto json = [this](const std::string& args, const std::string& name) {
    const auto r = run(kMnist + args + " --json " + path(name));
    EXPECT_EQ(r.status, 0) << args << ": " << r.err;
    std::ifstream f(path(name));
    return nlohmann::json::parse(f);
  };
  // -N is FedAvg's size for both; --dc-model-parameters overrides DC's alone: the same result
  // as giving both sizes.
  auto j = json("-N 203530 --dc-model-parameters 10506", "a.json");
  EXPECT_EQ(j["inputs"]["dc_model_parameters"].get<double>(), 10506.0);
  EXPECT_EQ(j["inputs"]["fl_model_parameters"].get<double>(), 203530.0);
  EXPECT_NEAR(j["bytes"]["dc"].get<double>(), 2856240.0, 1e-6);
  // -N alone: one N, the old meaning (B_DC = 10 (60000 + 900 + 203530) 4 = 8577200 + 2400000).
  j = json("-N 203530", "b.json");
  EXPECT_EQ(j["inputs"]["model_parameters"].get<double>(), 203530.0);
  EXPECT_EQ(j["inputs"]["dc_model_parameters"].get<double>(), 203530.0);
  EXPECT_NEAR(j["bytes"]["dc"].get<double>(), 10577200.0, 1e-6);
  EXPECT_NEAR(j["break_even_rounds"].get<double>(), 10577200.0 / 16282400, 1e-15);
  // --fl-model-parameters alone: DC keeps the default N = 2.5e7.
  j = json("--fl-model-parameters 203530", "c.json");
  EXPECT_EQ(j["inputs"]["dc_model_parameters"].get<double>(), 2.5e7);
  EXPECT_NEAR(j["bytes"]["fl"].get<double>(), 16282400.0, 1e-6);
  // Overrides equal to -N: one N again.
  j = json("-N 5 --fl-model-parameters 5", "d.json");
  EXPECT_EQ(j["inputs"]["model_parameters"].get<double>(), 5.0);
}

TEST_F(CommCli, BadValuesAreUsageErrorsAndWriteNothing) {
  const std::string json = path("keep.json");
  std::ofstream(json) << "previous";
  struct Case {
    std::string args, fragment;
  } cases[] = {
      {"--participation 1.5", "0 < p <= 1"},
      {"--participation 0", "participation p"},
      {"--bits 0", "bits q"},
      {"--users 0", "--users 0 is out of range: expected 1 to 9223372036854775807"},
      // Past int64: the valid range is named, not the type's.
      {"--users 99999999999999999999", "expected 1 to 9223372036854775807"},
      {"--anchor-rows=-5", "--anchor-rows -5 is out of range: expected 0 to"},
      {"--gamma=-1", "gamma"},
      {"--model-parameters 0.1", "model_parameters N"},
      {"--model-parameters 0.1", "--model-parameters 0.1 is out of range: expected a finite"},
      {"--dc-model-parameters 0.5", "--dc-model-parameters 0.5 is out of range: expected a finite"},
      {"--dc-model-parameters nan", "--dc-model-parameters nan is out of range"},
      {"--fl-model-parameters=-3", "--fl-model-parameters -3 is out of range"},
      {"--fl-model-parameters inf", "fl_model_parameters N_FL"},
      {"--fl-model-parameters 1e999", "--fl-model-parameters 1e999 is out of range"},
      {"--dc-model-parameters ten", "--dc-model-parameters 'ten' is not a number"},
      {"-N 1e6 --dc-model-parameters 10 --fl-model-parameters 20",
       "--model-parameters sets no protocol's model when --dc-model-parameters and "
       "--fl-model-parameters are both given"},
      // An override does not hide a bad -N (it still sets the other protocol's model).
      {"-N 0 --dc-model-parameters 10", "--model-parameters 0 is out of range"},
      {"--dc-model-parameters 1e307", "(l^2 + N_DC) q / 8 overflows"},
      {"--rounds=-2", "rounds R"},
      {"--mean-samples nan", "mean_samples n"},
      {"--bandwidth 0", "bandwidth beta"},
      {"--bandwidth 1e9 --rtt=-1", "rtt tau"},
      {"--rtt 0.1", "--rtt needs --bandwidth"},
      {"--samples 1,2 --users 3", "samples has 2 entries"},
      {"--samples 1,2 --mean-samples 4", "use one of them"},
      {"--model-parameters 1e300 --rounds 1e10", "overflows"},
  };
  for (const Case& k : cases) {
    const auto r = run("comm " + k.args + " --json " + json);
    EXPECT_EQ(r.status, 2) << k.args << ": " << r.err;
    EXPECT_NE(r.err.find("dcalign: error:"), std::string::npos) << k.args << ": " << r.err;
    EXPECT_NE(r.err.find(k.fragment), std::string::npos) << k.args << ": " << r.err;
    EXPECT_EQ(read("keep.json"), "previous") << k.args;
  }
  // A --json path that cannot be used is an error of the run (status 1), not of its usage.
  const auto r = run("comm --json " + path("missing_dir/x.json"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("--json"), std::string::npos) << r.err;
  // No temporary is left beside the kept file.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    files += entry.path().filename().string().rfind(".keep.json", 0) == 0;
  EXPECT_EQ(files, 0);
}

}  // namespace
}  // namespace dcalign
