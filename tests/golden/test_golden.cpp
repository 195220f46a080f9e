// Golden values: every method's G_i and objective on fixed anchors, and the records of the
// README's synthetic default experiment, against tests/golden/reference.json, committed before
// the restructuring of the layers so that it changes no result. The comparison is bit-for-bit
// where the BLAS kernel set, dcalign's own CPU kernels, the core count and the build's compiler
// and flags are those the reference was recorded with; on any other CPU the G_i and objectives
// agree within 1e-12 relative and the SVM's accuracies are equal (the MLP's: see
// DefaultSyntheticExperiment).
//
// To record the reference anew (only when a result is meant to change, saying why in the
// commit): DCALIGN_GOLDEN_WRITE=tests/golden/reference.json build/tests/golden/test_golden
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backends.hpp"
#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/experiment.hpp"
#include "test_util.hpp"

#if !defined(DCALIGN_GOLDEN_DIR) || !defined(DCALIGN_GOLDEN_BUILD)
#error "tests/golden/CMakeLists.txt defines DCALIGN_GOLDEN_DIR and DCALIGN_GOLDEN_BUILD"
#endif

namespace dcalign {
namespace {

using nlohmann::json;

std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}
double unhex(const json& j) { return std::strtod(j.get<std::string>().c_str(), nullptr); }

/// What the golden values depend on besides the code: the BLAS kernels, dcalign's own, the
/// number of threads (the order of parallel sums) and the build (compiler, flags).
json machine() {
  return {{"blas_kernels", blas_info().kernels},
          {"own_kernels", cpu::own_kernels()},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"build", DCALIGN_GOLDEN_BUILD}};
}

json alignments() {
  const auto syn = testing::make_synthetic(60, 14, 6, 4, SpanCondition::diff_span_orth, 2026);
  const Stack<double> anchors = testing::released_anchors<double>(syn);
  json out = json::object();
  for (const char* name : {"odc", "imakura", "kawakami", "gopp", "opp", "rdp-ls", "rdp-opp"}) {
    AlignOptions opts;
    opts.method = parse_method(name);
    opts.seed = 7;
    const Alignment<double> r = align(anchors, opts);
    json g = json::array();
    for (index_t i = 0; i < r.G.size(); ++i) g.push_back(hex(r.G.data()[i]));
    out[name] = {{"G", g}, {"objective", hex(r.report.objective)}};
  }
  return out;
}

json experiment_records() {
  const experiment::Config config = experiment::load_config(
      std::string(DCALIGN_GOLDEN_DIR) + "/../../experiments/" + "default_synthetic.toml");
  const experiment::Result result = experiment::run(config);
  json out = json::array();
  for (const auto& r : result.records)
    out.push_back({{"trial", r.trial},
                   {"condition", r.condition},
                   {"method", r.method},
                   {"model", r.model},
                   {"metric", r.metric},
                   {"value", hex(r.value)}});
  return out;
}

const json& reference() {
  static const json j = [] {
    std::ifstream f(std::string(DCALIGN_GOLDEN_DIR) + "/reference.json");
    return f ? json::parse(f) : json();
  }();
  return j;
}

bool same_machine() { return reference().value("machine", json()) == machine(); }

// Recording mode: write everything and skip the comparisons.
class Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* out = std::getenv("DCALIGN_GOLDEN_WRITE"); out && *out) {
      static const bool written = [out] {  // once, in the order the tests run
        json all;
        all["machine"] = machine();
        all["alignments"] = alignments();
        all["experiment"] = experiment_records();
        std::ofstream(out) << all.dump(1) << "\n";
        return true;
      }();
      (void)written;
      GTEST_SKIP() << "reference written to " << out;
    }
    ASSERT_TRUE(reference().is_object()) << "tests/golden/reference.json is missing";
  }
};

TEST_F(Golden, EveryMethodOnFixedAnchors) {
  const json now = alignments();
  const json& ref = reference()["alignments"];
  const bool exact = same_machine();
  ASSERT_EQ(now.size(), ref.size());
  for (const auto& [name, want] : ref.items()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(now.contains(name));
    const json& got = now[name];
    ASSERT_EQ(got["G"].size(), want["G"].size());
    double scale = 0;
    for (const auto& v : want["G"]) scale = std::max(scale, std::abs(unhex(v)));
    for (size_t i = 0; i < want["G"].size(); ++i) {
      const double a = unhex(got["G"][i]), b = unhex(want["G"][i]);
      if (exact)
        ASSERT_EQ(a, b) << "G entry " << i << ": " << hex(a) << " against " << hex(b);
      else
        ASSERT_LE(std::abs(a - b), 1e-12 * scale) << "G entry " << i;
    }
    const double a = unhex(got["objective"]), b = unhex(want["objective"]);
    if (exact)
      EXPECT_EQ(a, b) << "objective";
    else
      EXPECT_LE(std::abs(a - b), 1e-12 * std::abs(b)) << "objective";
  }
}

TEST_F(Golden, DefaultSyntheticExperiment) {
  const json now = experiment_records();
  const json& ref = reference()["experiment"];
  const bool exact = same_machine();
  ASSERT_EQ(now.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    for (const char* key : {"trial", "condition", "method", "model", "metric"})
      ASSERT_EQ(now[i][key], ref[i][key]) << "record " << i << " key " << key;
    const double a = unhex(now[i]["value"]), b = unhex(ref[i]["value"]);
    // Accuracies are counts over the test set. The SVM's are equal on any machine. The MLP's
    // are equal where the kernels are those recorded; elsewhere LibTorch's training amplifies
    // the alignment's rounding-level differences (1e-13 in Kawakami-DC's G_i moved its MLP
    // accuracy from 0.9875 to 0.988 on OpenBLAS's Haswell kernels and to 0.9785 on its generic
    // ones), so there it is held to within 0.02 (40 of the 2000 test rows).
    if (exact || ref[i]["model"] != "mlp")
      EXPECT_EQ(a, b) << "record " << i << ": " << ref[i]["method"] << " " << ref[i]["model"];
    else
      EXPECT_NEAR(a, b, 0.02) << "record " << i << ": " << ref[i]["method"] << " mlp";
  }
}

}  // namespace
}  // namespace dcalign
