// Differential privacy in the experiment runner (Config::dp_target): the keys and their errors
// when the file is read, the noise on the released representations (paper 000) or on the raw
// rows (paper 001's baseline), the sigma recorded, and determinism under the seed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "dcalign/experiment.hpp"
#include "dcalign/privacy.hpp"
#include "experiment/config_files.hpp"
#include "experiment/records.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;
using testing::expect_config_error;
using testing::load_toml;

const std::string kBase = "dataset = \"mnist\"\n";

TEST(ExperimentDp, KeysAreReadWithTheirDefaults) {
  const auto off = load_toml(kBase);
  EXPECT_EQ(off.dp_target, "none");
  EXPECT_FALSE(off.dp_enabled());
  EXPECT_EQ(off.dp_epsilon, 8);
  EXPECT_EQ(off.dp_delta, 1e-3);
  EXPECT_EQ(off.dp_row_range, 1);
  const auto on = load_toml(kBase +
                            "dp_target = \"released\"\ndp_epsilon = 2\ndp_delta = 1e-5\n"
                            "dp_row_range = 28\n");
  EXPECT_TRUE(on.dp_enabled());
  EXPECT_EQ(on.dp_target, "released");
  EXPECT_EQ(on.dp_epsilon, 2);
  EXPECT_EQ(on.dp_delta, 1e-5);
  EXPECT_EQ(on.dp_row_range, 28);
  EXPECT_EQ(load_toml(kBase + "dp_target = \"raw\"\n").dp_target, "raw");
}

TEST(ExperimentDp, BadKeysFailWhenTheFileIsReadNamingTheKey) {
  const std::string on = kBase + "dp_target = \"released\"\n";
  for (const char* eps : {"0", "-1", "0.0", "nan", "inf"})
    expect_config_error(on + "dp_epsilon = " + eps + "\n", {"'dp_epsilon'", "(0, inf)"});
  for (const char* delta : {"0", "1", "-0.5", "1.5", "nan"})
    expect_config_error(on + "dp_delta = " + delta + "\n", {"'dp_delta'", "(0, 1)"});
  for (const char* r : {"0", "-3", "inf"})
    expect_config_error(on + "dp_row_range = " + r + "\n", {"'dp_row_range'", "(0, inf)"});
  expect_config_error(kBase + "dp_target = \"anchors\"\n",
                      {"'dp_target'", "\"none\", \"released\" or \"raw\""});
  expect_config_error(kBase + "dp_target = 1\n", {"'dp_target'", "a string"});
  expect_config_error(kBase + "protocol = \"nri-dc\"\ndp_target = \"raw\"\n",
                      {"'dp_target'", "needs protocol \"dc\""});
  // A DP parameter without a DP target would change nothing: refused, not ignored.
  expect_config_error(kBase + "dp_epsilon = 4\n", {"'dp_epsilon'", "unless dp_target"});
  expect_config_error(kBase + "dp_target = \"none\"\ndp_delta = 0.01\n",
                      {"'dp_delta'", "unless dp_target"});
}

// A small run on the artificial dataset (needs no files): 5 users of 100 rows, l = 10, kNN.
experiment::Config small(const std::string& target) {
  experiment::Config c;
  c.name = "dp_smoke";
  c.dataset = "synthetic";
  c.users = 5;
  c.samples_per_user = 100;
  c.test_samples = 500;
  c.anchor_rows = 200;
  c.dim = 10;
  c.conditions = {SpanCondition::same_span_orth};
  c.methods = {"central", "local", "odc"};
  c.models = {"knn"};
  c.trials = 1;
  c.seed = 11;
  c.dp_target = target;
  return c;
}

double value(const experiment::Result& r, const std::string& cond, const std::string& method,
             const std::string& metric = "accuracy") {
  return testing::record_value(r, cond, method, metric);
}

TEST(ExperimentDp, ProgrammaticBadValuesFailBeforeAnyTraining) {
  const auto expect_fast = [](const experiment::Config& c, const std::string& fragment) {
    testing::expect_run_error(c, fragment);
  };
  auto c = small("released");
  c.dp_epsilon = 0;
  expect_fast(c, "'dp_epsilon' = 0 must be a finite number > 0");
  c = small("raw");
  c.dp_delta = 1;
  expect_fast(c, "'dp_delta' = 1 must be in (0, 1)");
  c = small("released");
  c.dp_row_range = -1;
  expect_fast(c, "'dp_row_range' = -1 must be a finite number > 0");
  c = small("everything");
  expect_fast(c, "'dp_target' = \"everything\"");
  c = small("released");
  c.protocol = "nri-dc";
  expect_fast(c, "needs protocol \"dc\"");
}

TEST(ExperimentDp, ReleasedNoiseHitsDcOnlyWithSigmaPerCondition) {
  auto base = small("none");
  base.conditions = {SpanCondition::same_span_orth, SpanCondition::same_span};
  const auto clean = experiment::run(base);
  auto c = base;
  c.dp_target = "released";
  const auto dp8 = experiment::run(c);
  // Central and Local use the raw data (paper 000's baselines): the same numbers, bit for bit.
  EXPECT_EQ(value(dp8, "-", "central"), value(clean, "-", "central"));
  EXPECT_EQ(value(dp8, "-", "local"), value(clean, "-", "local"));
  // sigma: Delta = r = 1 for orthonormal F_i gives exactly the AGM's value (0.48 at eps = 8);
  // uniform E_i (SameSpan) have ||F_i||_2 = ||E_i||_2 of about l / 2 = 5, hence a larger sigma.
  const double sigma = analytic_gaussian_sigma(8, 1e-3, 1);
  EXPECT_EQ(value(dp8, "SameSpan-Orth", "dp", "dp_sigma"), sigma);
  EXPECT_GT(value(dp8, "SameSpan", "dp", "dp_sigma"), 2 * sigma);
  // Overwhelming noise (eps = 0.05, r = 100: sigma ~ 3e3) leaves ODC at chance (10 classes),
  // while the clean run is far above it; Central is still untouched.
  c.dp_epsilon = 0.05;
  c.dp_row_range = 100;
  const auto drowned = experiment::run(c);
  EXPECT_GT(value(clean, "SameSpan-Orth", "odc"), 0.5);
  EXPECT_LT(value(drowned, "SameSpan-Orth", "odc"), 0.25);
  EXPECT_EQ(value(drowned, "-", "central"), value(clean, "-", "central"));
  // The summary names the mechanism and sigma.
  const std::string table = experiment::summary_table(dp8);
  EXPECT_NE(table.find("released X~_i"), std::string::npos) << table;
  std::ostringstream s;
  s.precision(8);
  s << "sigma = " << sigma << " for Delta = r";
  EXPECT_NE(table.find(s.str()), std::string::npos) << table;
}

TEST(ExperimentDp, RawNoiseIsThe001BaselineForEveryMethod) {
  const auto clean = experiment::run(small("none"));
  auto c = small("raw");
  c.dp_epsilon = 0.05;
  c.dp_row_range = 100;
  const auto raw = experiment::run(c);
  // Central trains on the noisy rows (001's DP baseline): at this sigma it is at chance.
  EXPECT_GT(value(clean, "-", "central"), 0.5);
  EXPECT_LT(value(raw, "-", "central"), 0.25);
  EXPECT_LT(value(raw, "SameSpan-Orth", "odc"), 0.25);
  for (const auto& rec : raw.records) EXPECT_NE(rec.metric, "dp_sigma");
  EXPECT_NE(experiment::summary_table(raw).find("raw training rows"), std::string::npos);
}

TEST(ExperimentDp, SameSeedSameNoiseAndSigmaInTheJson) {
  auto c = small("released");
  c.methods = {"odc"};
  const auto r1 = experiment::run(c), r2 = experiment::run(c);
  ASSERT_EQ(r1.records.size(), r2.records.size());
  for (size_t k = 0; k < r1.records.size(); ++k)
    EXPECT_EQ(r1.records[k].value, r2.records[k].value);
  const auto dir = fs::temp_directory_path() / ("dcalign_dp_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  experiment::write_outputs(r1, dir.string());
  std::ifstream f(dir / "dp_smoke.json");
  const std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(json.find("\"dp_sigma\": 0.48001375"), std::string::npos) << json.substr(0, 400);
  EXPECT_NE(json.find("\"dp_target\": \"released\""), std::string::npos);
  fs::remove_all(dir);
}

// uplink (paper 001 Table 20's "Numerics"): the analyst aligns on dequantised X~_i and A_i.
// int8 and fp16 move the result a little, fp32 barely; the uplink bytes follow q = 32/16/8 bits
// per value (plus int8's column scales); the G_i's orthogonality and objective are recorded;
// bad values and NRI-DC are refused.
TEST(ExperimentUplink, QuantisedReleasesAreAlignedAndCounted) {
  std::map<std::string, double> bytes, accuracy;
  for (const char* u : {"fp64", "fp32", "fp16", "int8"}) {
    auto c = small("none");
    c.uplink = u;
    const auto r = experiment::run(c);
    accuracy[u] = value(r, "SameSpan-Orth", "odc");
    if (std::string(u) != "fp64") {  // (fp64 records no traffic without FedAvg, as before)
      bytes[u] = value(r, "SameSpan-Orth", "odc", "uplink_bytes");
      EXPECT_LT(value(r, "SameSpan-Orth", "odc", "orthogonality_error"), 1e-12) << u;
      EXPECT_GT(value(r, "SameSpan-Orth", "odc", "objective"), 0) << u;
    }
  }
  // Five users' X~_i (100 x 10) and A_i (200 x 10), and 100 labels of 8 bytes each.
  const double values = 5 * (100 * 10 + 200 * 10), labels = 5 * 100 * 8;
  EXPECT_EQ(bytes["fp32"], values * 4 + labels);
  EXPECT_EQ(bytes["fp16"], values * 2 + labels);
  EXPECT_EQ(bytes["int8"], values + 5 * 2 * 10 * 4 + labels);
  EXPECT_NEAR(accuracy["fp32"], accuracy["fp64"], 0.01);
  EXPECT_NEAR(accuracy["int8"], accuracy["fp64"], 0.05);
  expect_config_error(kBase + "uplink = \"bf16\"\n", {"'uplink'", "\"fp16\" or \"int8\""});
  expect_config_error(kBase + "protocol = \"nri-dc\"\nuplink = \"int8\"\n",
                      {"'uplink'", "needs protocol \"dc\""});
}

}  // namespace
}  // namespace dcalign
