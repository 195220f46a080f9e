// Studies: a [sweep] runs every point as the config with those values would run alone (common
// random numbers: the same seed), and the [[statistics]] tests group the records as written out
// here independently; every point and test is checked before the first trial.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "dcalign/experiment.hpp"
#include "dcalign/stats.hpp"
#include "experiment/config_files.hpp"

namespace dcalign {
namespace {

experiment::Config study() {
  experiment::Config c;
  c.name = "study";
  c.dataset = "synthetic";
  c.users = 3;
  c.samples_per_user = 60;
  c.test_samples = 300;
  c.anchor_rows = 100;
  c.dim = 8;
  c.conditions = {SpanCondition::diff_span_orth};
  c.methods = {"central", "imakura", "odc"};
  c.models = {"knn"};
  c.trials = 3;
  c.seed = 5;
  c.threads = 1;
  c.sweep = {{"dim", {"5", "10"}}, {"anchor_rows", {"40", "120"}}};
  c.statistics = {{"paired-t", "odc", "imakura", "greater", {}, "type2"},
                  {"anova1", "", "", "two-sided", {"anchor_rows"}, "type2"},
                  {"anova2", "", "", "two-sided", {"anchor_rows", "dim"}, "type3"},
                  {"anova1", "", "", "two-sided", {"method"}, "type2"}};
  return c;
}

TEST(ExperimentStudy, SweepPointsRunAsTheirOwnConfigs) {
  const auto c = study();
  const auto points = experiment::sweep_points(c);
  ASSERT_EQ(points.size(), 4u);
  // Keys in alphabetical order, the last varying fastest.
  EXPECT_EQ(points[0].first, "anchor_rows=40,dim=5");
  EXPECT_EQ(points[1].first, "anchor_rows=40,dim=10");
  EXPECT_EQ(points[3].first, "anchor_rows=120,dim=10");
  EXPECT_EQ(points[3].second.anchor_rows, 120);
  EXPECT_EQ(points[3].second.dim, 10);
  EXPECT_TRUE(points[3].second.sweep.empty());

  EXPECT_EQ(experiment::check(c), 4u);  // every point prepared, no trial run
  const auto res = experiment::run(c);
  std::set<std::string> labels;
  for (const auto& r : res.records) labels.insert(r.point);
  EXPECT_EQ(labels.size(), 4u);
  // Point 3 alone gives the same numbers.
  experiment::Config alone = points[2].second;
  const auto single = experiment::run(alone);
  std::vector<double> swept, own;
  for (const auto& r : res.records)
    if (r.point == points[2].first) swept.push_back(r.value);
  for (const auto& r : single.records) own.push_back(r.value);
  EXPECT_EQ(swept, own);
}

TEST(ExperimentStudy, TestsGroupTheRecordsAsWrittenOutHere) {
  const auto c = study();
  const auto res = experiment::run(c);
  // accuracy[(point, method)] by trial
  std::map<std::pair<std::string, std::string>, std::vector<double>> acc;
  for (const auto& r : res.records)
    if (r.metric == "accuracy") acc[{r.point, r.method}].push_back(r.value);

  std::map<std::string, std::vector<const experiment::StatisticsResult*>> by_test;
  for (const auto& t : res.statistics) by_test[t.test + " " + t.what].push_back(&t);

  // Paired t: ODC - Imakura-DC per point, paired by trial.
  const auto& paired = by_test["paired-t odc - imakura (greater)"];
  ASSERT_EQ(paired.size(), 4u);
  for (const auto* t : paired) {
    const auto ref = stats::paired_t_test(acc[{t->point, "odc"}], acc[{t->point, "imakura"}],
                                          stats::Alternative::greater);
    EXPECT_DOUBLE_EQ(t->statistic, ref.t) << t->point;
    EXPECT_DOUBLE_EQ(t->p, ref.p);
    EXPECT_DOUBLE_EQ(t->effect, ref.cohens_dz);
    EXPECT_EQ(t->n, 3);
  }
  // One-way ANOVA across anchor_rows, per dim and method (Central included).
  const auto& oneway = by_test["anova1 anchor_rows"];
  ASSERT_EQ(oneway.size(), 2u * 3u);
  for (const auto* t : oneway) {
    ASSERT_EQ(t->point.substr(0, 4), "dim=");
    const std::string dim = t->point.substr(4);
    const auto ref = stats::one_way_anova({acc[{"anchor_rows=40,dim=" + dim, t->method}],
                                           acc[{"anchor_rows=120,dim=" + dim, t->method}]});
    EXPECT_DOUBLE_EQ(t->statistic, ref.F) << t->point << " " << t->method;
    EXPECT_DOUBLE_EQ(t->effect, ref.cohens_f);
  }
  // Two-way ANOVA anchor_rows x dim, type III, per method: three terms each.
  const auto& twoway = by_test["anova2 anchor_rows x dim"];
  ASSERT_EQ(twoway.size(), 3u * 3u);
  {
    const auto* t = twoway[0];
    std::vector<double> y;
    std::vector<std::string> a, b;
    for (const auto& [key, values] : acc) {
      if (key.second != t->method) continue;
      for (double v : values) {
        y.push_back(v);
        a.push_back(key.first.substr(0, key.first.find(',')).substr(12));
        b.push_back(key.first.substr(key.first.find("dim=") + 4));
      }
    }
    const auto ref = stats::two_way_anova(y, a, b, stats::SumOfSquares::type3);
    EXPECT_EQ(t->term, "anchor_rows");
    EXPECT_NEAR(t->statistic, ref.a.F, 1e-9 * (1 + ref.a.F));
    EXPECT_NEAR(twoway[2]->statistic, ref.interaction.F, 1e-9 * (1 + ref.interaction.F));
  }
  // Across methods: the alignment methods only (Central has no condition).
  const auto& methods = by_test["anova1 method"];
  ASSERT_EQ(methods.size(), 4u);
  for (const auto* t : methods) EXPECT_EQ(t->n, 2 * 3);
}

TEST(ExperimentStudy, OutputsCarryPointsAndTests) {
  auto c = study();
  c.trials = 2;
  c.statistics.resize(2);
  const auto res = experiment::run(c);
  const auto dir =
      std::filesystem::temp_directory_path() / ("dcalign_study_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  experiment::write_outputs(res, dir.string());
  std::ifstream jf(dir / "study.json");
  const auto j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["config"]["sweep"]["dim"], (std::vector<std::string>{"5", "10"}));
  EXPECT_EQ(j["records"][0]["point"], "anchor_rows=40,dim=5");
  EXPECT_EQ(j["statistics"].size(), res.statistics.size());
  std::ifstream mf(dir / "study.md");
  const std::string md((std::istreambuf_iterator<char>(mf)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("## Point anchor_rows=120,dim=10"), std::string::npos);
  EXPECT_NE(md.find("### Statistics"), std::string::npos);
  std::ifstream cf(dir / "study.csv");
  std::string header;
  std::getline(cf, header);
  EXPECT_EQ(header, "trial,condition,method,model,metric,value,seconds,point");
  std::filesystem::remove_all(dir);
}

TEST(ExperimentStudy, BadSweepsAndTestsFailBeforeAnyTrial) {
  auto fails = [](experiment::Config c, const std::string& fragment) {
    bool trial_started = false;
    try {
      experiment::run(c, [&](const std::string& msg) {
        if (msg.rfind("trial", 0) == 0) trial_started = true;
      });
      ADD_FAILURE() << "no error, expected " << fragment;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    EXPECT_FALSE(trial_started) << fragment;
  };
  auto c = study();
  c.statistics.clear();
  c.sweep = {{"seed", {"1", "2"}}};
  fails(c, "'seed' cannot be swept");
  c.sweep = {{"dim", {"5", "x"}}};
  fails(c, "value 'x'");
  c.sweep = {{"dim", {"5", "5"}}};
  fails(c, "repeats a value");
  c.sweep = {{"dim", {"5", "70"}}};  // the second point has l > m = 64
  fails(c, "exceeds the 64 features");
  EXPECT_THROW(experiment::check(c), InvalidInput);
  c = study();
  c.statistics = {{"paired-t", "odc", "kawakami", "less", {}, "type2"}};
  fails(c, "method 'kawakami' is not in 'methods'");
  c.statistics = {{"anova1", "", "", "two-sided", {"users"}, "type2"}};
  fails(c, "factor 'users'");
  c.statistics = {{"anova2", "", "", "two-sided", {"dim", "dim"}, "type2"}};
  fails(c, "the same");
  c.statistics = {{"kruskal", "", "", "two-sided", {}, "type2"}};
  fails(c, "test 'kruskal'");
  c.statistics = {{"paired-t", "odc", "imakura", "sideways", {}, "type2"}};
  fails(c, "unknown alternative 'sideways'; expected two-sided, less or greater");
  c.statistics = {{"anova1", "", "", "two-sided", {"dim"}, "type1"}};
  fails(c, "sum_of_squares: unknown sum of squares 'type1'; expected type2 or type3");
  c = study();
  c.trials = 1;
  c.statistics = {{"paired-t", "odc", "imakura", "less", {}, "type2"}};
  fails(c, "needs trials >= 2");

  // The file form.
  const std::string base =
      "dataset = \"synthetic\"\nmethods = [\"odc\", \"imakura\"]\ntrials = 2\n";
  const auto ok =
      testing::load_toml(base +
                         "[sweep]\nanchor_rows = [196, 392]\nanchor = [\"uniform\"]\n"
                         "[[statistics]]\ntest = \"anova1\"\nfactors = [\"anchor_rows\"]\n"
                         "[[statistics]]\ntest = \"paired-t\"\na = \"odc\"\nb = "
                         "\"imakura\"\nalternative = \"less\"\n");
  ASSERT_EQ(ok.sweep.size(), 2u);
  EXPECT_EQ(ok.sweep[1].key, "anchor_rows");
  EXPECT_EQ(ok.sweep[1].values, (std::vector<std::string>{"196", "392"}));
  ASSERT_EQ(ok.statistics.size(), 2u);
  EXPECT_EQ(ok.statistics[1].alternative, "less");
  testing::expect_config_error(base + "[sweep]\ndim = []\n", {"sweep.dim"});
  testing::expect_config_error(base + "[sweep]\nlearning_rate = [1]\n", {"cannot be swept"});
  testing::expect_config_error(base + "[[statistics]]\ntest = \"anova1\"\nfactor = \"dim\"\n",
                               {"unknown key 'statistics[0].factor'"});
  testing::expect_config_error(
      base + "[[statistics]]\ntest = \"paired-t\"\na = \"odc\"\nb = \"x\"\n", {"method 'x'"});
}

}  // namespace
}  // namespace dcalign
