// The statistics layer against references from SciPy and statsmodels (fixtures/*.json, made by
// make_fixtures.py), paper 001's printed values, the 0/0 rule and every bad-input error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "dcalign/stats.hpp"

namespace {

using dcalign::InvalidInput;
using nlohmann::json;
namespace st = dcalign::stats;

constexpr double kStatTol = 1e-8;  // t, F, d, f, SS, eta^2, CI bounds
constexpr double kPTol = 1e-6;     // p-values (compared when the reference is above 1e-300)
constexpr double kInf = std::numeric_limits<double>::infinity();

json load(const std::string& name) {
  const std::string path = std::string(DCALIGN_STATS_FIXTURES) + "/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open fixture " + path);
  return json::parse(in);
}

// Largest relative error seen per quantity, printed at the end of the run.
std::map<std::string, double>& worst() {
  static std::map<std::string, double> m;
  return m;
}

class ReportWorst : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [name, err] : worst())
      std::cout << "[stats agreement] " << name << ": largest relative error " << err << "\n";
  }
};
const auto* const kReport = ::testing::AddGlobalTestEnvironment(new ReportWorst);

void expect_rel(const std::string& quantity, double actual, double expected, double tol) {
  ASSERT_TRUE(std::isfinite(expected)) << quantity;
  const double err =
      expected == 0 ? std::fabs(actual) : std::fabs(actual - expected) / std::fabs(expected);
  double& w = worst()[quantity];
  w = std::max(w, err);
  EXPECT_LE(err, tol) << quantity << ": got " << actual << ", reference " << expected;
}

void expect_stat(const std::string& q, double actual, double expected) {
  expect_rel(q, actual, expected, kStatTol);
}

void expect_p(const std::string& q, double actual, double expected) {
  if (expected > 1e-300)
    expect_rel(q, actual, expected, kPTol);
  else
    EXPECT_LE(actual, 1e-300) << q;
}

st::Alternative alternative(const std::string& s) {
  if (s == "less") return st::Alternative::less;
  if (s == "greater") return st::Alternative::greater;
  if (s == "two-sided") return st::Alternative::two_sided;
  throw std::runtime_error("unknown alternative " + s);
}

std::vector<double> vec(const json& j) { return j.get<std::vector<double>>(); }

// Expects InvalidInput whose message contains `needle`.
void expect_invalid(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no InvalidInput thrown (expected a message containing \"" << needle << "\")";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message \"" << e.what() << "\" does not contain \"" << needle << "\"";
  }
}

// ---- paired t-test ----------------------------------------------------------------------------

TEST(StatsPairedTTest, MatchesScipyTtestRel) {
  const json cases = load("paired_t.json")["cases"];
  ASSERT_GE(cases.size(), 8u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto r = st::paired_t_test(vec(c["x"]), vec(c["y"]), alternative(c["alternative"]),
                                     c["confidence"].get<double>());
    const json& e = c["expected"];
    EXPECT_EQ(r.n, e["n"].get<std::size_t>());
    expect_stat("paired t", r.t, e["t"]);
    expect_stat("paired df", r.df, e["df"]);
    expect_p("paired p", r.p, e["p"]);
    expect_stat("paired mean diff", r.mean_diff, e["mean_diff"]);
    expect_stat("paired sd diff", r.sd_diff, e["sd_diff"]);
    expect_stat("paired d_z", r.cohens_dz, e["cohens_dz"]);
    expect_stat("paired CI bound", r.ci_lower, e["ci_lower"]);
    expect_stat("paired CI bound", r.ci_upper, e["ci_upper"]);
    EXPECT_EQ(r.confidence, c["confidence"].get<double>());
  }
}

TEST(StatsPairedTTest, CoversTheRequiredCases) {
  // The fixture holds n = 2, ties, both one-sided directions and a p near 1e-30.
  const json cases = load("paired_t.json")["cases"];
  bool n2 = false, ties = false, less = false, greater = false, tiny = false;
  for (const auto& c : cases) {
    const auto d = vec(c["x"]);
    n2 = n2 || d.size() == 2;
    ties = ties || c["name"] == "ties";
    less = less || c["alternative"] == "less";
    greater = greater || c["alternative"] == "greater";
    const double p = c["expected"]["p"];
    tiny = tiny || (p > 1e-33 && p < 1e-27);
  }
  EXPECT_TRUE(n2 && ties && less && greater && tiny);
}

TEST(StatsPairedTTest, ZeroDifferencesGiveZeroEffectAndPOne) {
  const std::vector<double> x = {96.0, 96.0, 96.0, 96.0};
  for (auto alt : {st::Alternative::two_sided, st::Alternative::less, st::Alternative::greater}) {
    const auto r = st::paired_t_test(x, x, alt);
    EXPECT_EQ(r.t, 0.0);
    EXPECT_EQ(r.cohens_dz, 0.0);
    EXPECT_EQ(r.p, 1.0);
    EXPECT_EQ(r.mean_diff, 0.0);
    EXPECT_EQ(r.sd_diff, 0.0);
    EXPECT_EQ(r.ci_lower, 0.0);
    EXPECT_EQ(r.ci_upper, 0.0);
    EXPECT_EQ(r.df, 3.0);
  }
}

TEST(StatsPairedTTest, ConstantNonzeroDifferenceIsInfinite) {
  const std::vector<double> y = {0.25, 1.5, -3.0};
  const std::vector<double> x = {0.75, 2.0, -2.5};  // x - y = 0.5 exactly
  auto r = st::paired_t_test(x, y);
  EXPECT_EQ(r.t, kInf);
  EXPECT_EQ(r.cohens_dz, kInf);
  EXPECT_EQ(r.p, 0.0);
  EXPECT_EQ(r.mean_diff, 0.5);
  EXPECT_EQ(r.sd_diff, 0.0);
  EXPECT_EQ(r.ci_lower, 0.5);
  EXPECT_EQ(r.ci_upper, 0.5);
  EXPECT_EQ(st::paired_t_test(x, y, st::Alternative::greater).p, 0.0);
  EXPECT_EQ(st::paired_t_test(x, y, st::Alternative::less).p, 1.0);
  r = st::paired_t_test(y, x, st::Alternative::less);
  EXPECT_EQ(r.t, -kInf);
  EXPECT_EQ(r.cohens_dz, -kInf);
  EXPECT_EQ(r.p, 0.0);
  EXPECT_EQ(st::paired_t_test(y, x, st::Alternative::greater).p, 1.0);
}

TEST(StatsPairedTTest, BadInputThrows) {
  const std::vector<double> a = {1, 2, 3}, b = {1, 2};
  expect_invalid([&] { st::paired_t_test(a, b); }, "x has 3 values and y has 2");
  expect_invalid([&] { st::paired_t_test({1.0}, {2.0}); }, "1 pairs; expected at least 2");
  expect_invalid([&] { st::paired_t_test({}, {}); }, "0 pairs; expected at least 2");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { st::paired_t_test({1, nan, 3}, a); }, "x[1]");
  expect_invalid([&] { st::paired_t_test(a, {1, 2, kInf}); }, "y[2]");
  expect_invalid([&] { st::paired_t_test({1e308, 0}, {-1e308, 0}); }, "overflows");
  for (double level : {0.0, 1.0, 1.5, -0.2, nan})
    expect_invalid(
        [&] {
          st::paired_t_test(a, {0, 2, 5}, st::Alternative::two_sided, level);
        },
        "expected a level in (0, 1)");
}

// ---- one-way ANOVA ----------------------------------------------------------------------------

TEST(StatsOneWayAnova, MatchesScipyAndStatsmodels) {
  const json cases = load("one_way_anova.json")["cases"];
  ASSERT_GE(cases.size(), 3u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto r = st::one_way_anova(c["groups"].get<std::vector<std::vector<double>>>());
    const json& e = c["expected"];
    expect_stat("one-way SS", r.ss_between, e["ss_between"]);
    expect_stat("one-way SS", r.ss_within, e["ss_within"]);
    expect_stat("one-way SS", r.ss_total, e["ss_total"]);
    expect_stat("one-way df", r.df_between, e["df_between"]);
    expect_stat("one-way df", r.df_within, e["df_within"]);
    expect_stat("one-way F", r.F, e["F"]);
    expect_p("one-way p", r.p, e["p"]);
    expect_stat("one-way eta^2", r.eta_squared, e["eta_squared"]);
    expect_stat("one-way f", r.cohens_f, e["cohens_f"]);
    expect_stat("one-way f", st::f_from_F(r.F, r.df_between, r.df_within), e["cohens_f"]);
  }
}

TEST(StatsOneWayAnova, ZeroOverZeroRule) {
  // All observations equal: no effect, no error.
  auto r = st::one_way_anova({{0.1, 0.1, 0.1}, {0.1, 0.1}, {0.1}});
  EXPECT_EQ(r.ss_between, 0.0);
  EXPECT_EQ(r.ss_within, 0.0);
  EXPECT_EQ(r.F, 0.0);
  EXPECT_EQ(r.p, 1.0);
  EXPECT_EQ(r.eta_squared, 0.0);
  EXPECT_EQ(r.cohens_f, 0.0);
  // Constant groups at different levels: an effect with no error.
  r = st::one_way_anova({{0.1, 0.1, 0.1}, {0.2, 0.2}});
  EXPECT_EQ(r.ss_within, 0.0);
  EXPECT_GT(r.ss_between, 0.0);
  EXPECT_EQ(r.F, kInf);
  EXPECT_EQ(r.p, 0.0);
  EXPECT_EQ(r.eta_squared, 1.0);
  EXPECT_EQ(r.cohens_f, kInf);
}

TEST(StatsOneWayAnova, BadInputThrows) {
  expect_invalid([] { st::one_way_anova({{1, 2, 3}}); }, "1 groups; expected at least 2");
  expect_invalid([] { st::one_way_anova({}); }, "0 groups; expected at least 2");
  expect_invalid([] { st::one_way_anova({{1, 2}, {}, {3, 4}}); }, "group 1 has no observations");
  expect_invalid([] { st::one_way_anova({{1, 2}, {3, std::nan("")}}); }, "group 1 value[1]");
  expect_invalid([] { st::one_way_anova({{1, 2}, {-kInf, 4}}); }, "group 1 value[0]");
  expect_invalid([] { st::one_way_anova({{1}, {2}}); }, "no error degrees of freedom");
}

// ---- two-way ANOVA ----------------------------------------------------------------------------

void expect_term(const st::AnovaTerm& t, const json& e, const std::string& name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(t.name, name);
  expect_stat("two-way SS", t.ss, e["ss"]);
  expect_stat("two-way df", t.df, e["df"]);
  expect_stat("two-way F", t.F, e["F"]);
  expect_p("two-way p", t.p, e["p"]);
  expect_stat("two-way partial eta^2", t.partial_eta_squared, e["partial_eta_squared"]);
  expect_stat("two-way f", t.cohens_f, e["cohens_f"]);
}

void expect_table(const st::TwoWayAnova& r, const json& e) {
  expect_term(r.a, e["A"], "A");
  expect_term(r.b, e["B"], "B");
  expect_term(r.interaction, e["A:B"], "A:B");
  expect_stat("two-way SS", r.ss_residual, e["ss_residual"]);
  expect_stat("two-way df", r.df_residual, e["df_residual"]);
}

TEST(StatsTwoWayAnova, MatchesStatsmodelsTypes2And3) {
  const json cases = load("two_way_anova.json")["cases"];
  ASSERT_GE(cases.size(), 4u);
  int tables = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto y = vec(c["y"]);
    const auto a = c["a"].get<std::vector<std::string>>();
    const auto b = c["b"].get<std::vector<std::string>>();
    for (auto [key, type] : {std::pair{"type2", st::SumOfSquares::type2},
                             std::pair{"type3", st::SumOfSquares::type3}}) {
      if (!c.contains(key)) continue;
      SCOPED_TRACE(key);
      const auto r = st::two_way_anova(y, a, b, type);
      EXPECT_EQ(r.type, type);
      EXPECT_EQ(r.n, y.size());
      expect_table(r, c[key]);
      ++tables;
    }
  }
  EXPECT_GE(tables, 9);
}

TEST(StatsTwoWayAnova, TypesDifferOnUnbalancedDataWithInteraction) {
  const json cases = load("two_way_anova.json")["cases"];
  const auto it = std::find_if(cases.begin(), cases.end(), [](const json& c) {
    return c["name"] == "unbalanced_3x3_interaction";
  });
  ASSERT_NE(it, cases.end());
  const json& c = *it;
  const auto y = vec(c["y"]);
  const auto a = c["a"].get<std::vector<std::string>>();
  const auto b = c["b"].get<std::vector<std::string>>();
  const auto t2 = st::two_way_anova(y, a, b, st::SumOfSquares::type2);
  const auto t3 = st::two_way_anova(y, a, b, st::SumOfSquares::type3);
  // Main effects differ by far more than the tolerance; interaction and residual coincide.
  EXPECT_GT(std::fabs(t2.a.ss - t3.a.ss), 0.1 * t3.a.ss);
  EXPECT_GT(std::fabs(t2.b.ss - t3.b.ss), 0.1 * t3.b.ss);
  EXPECT_NEAR(t2.interaction.ss, t3.interaction.ss, 1e-10 * t3.interaction.ss);
  EXPECT_NEAR(t2.ss_residual, t3.ss_residual, 1e-12 * t3.ss_residual);
  EXPECT_EQ(t2.levels_a, 3u);
  EXPECT_EQ(t2.levels_b, 3u);
  expect_table(t2, c["type2"]);
  expect_table(t3, c["type3"]);
}

TEST(StatsTwoWayAnova, OrderOfObservationsAndLabelsDoesNotMatter) {
  const json cases = load("two_way_anova.json")["cases"];
  const json& c = cases.at(1);
  ASSERT_EQ(c["name"], "unbalanced_3x3_interaction");
  auto y = vec(c["y"]);
  auto a = c["a"].get<std::vector<std::string>>();
  auto b = c["b"].get<std::vector<std::string>>();
  std::vector<std::size_t> perm(y.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());
  std::rotate(perm.begin(), perm.begin() + 5, perm.end());
  std::vector<double> y2;
  std::vector<std::string> a2, b2;
  for (std::size_t i : perm) {
    y2.push_back(y[i]);
    a2.push_back("level " + a[i]);
    b2.push_back(b[i]);
  }
  for (auto type : {st::SumOfSquares::type2, st::SumOfSquares::type3}) {
    expect_table(st::two_way_anova(y2, a2, b2, type),
                 c[type == st::SumOfSquares::type2 ? "type2" : "type3"]);
    // Swapping the roles of the factors swaps the rows.
    const auto s = st::two_way_anova(y2, b2, a2, type);
    const json& e = c[type == st::SumOfSquares::type2 ? "type2" : "type3"];
    expect_stat("two-way SS", s.a.ss, e["B"]["ss"]);
    expect_stat("two-way SS", s.b.ss, e["A"]["ss"]);
    expect_stat("two-way SS", s.interaction.ss, e["A:B"]["ss"]);
  }
}

TEST(StatsTwoWayAnova, ZeroOverZeroRule) {
  // Constant cells whose means depend on A only: A is certain, B and A:B are 0/0.
  std::vector<double> y;
  std::vector<std::string> a, b;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2 + i; ++k) {
        y.push_back(0.1 * (i + 1));
        a.push_back("a" + std::to_string(i));
        b.push_back("b" + std::to_string(j));
      }
  for (auto type : {st::SumOfSquares::type2, st::SumOfSquares::type3}) {
    const auto r = st::two_way_anova(y, a, b, type);
    EXPECT_EQ(r.ss_residual, 0.0);
    EXPECT_EQ(r.a.F, kInf);
    EXPECT_EQ(r.a.p, 0.0);
    EXPECT_EQ(r.a.partial_eta_squared, 1.0);
    EXPECT_EQ(r.a.cohens_f, kInf);
    for (const auto* t : {&r.b, &r.interaction}) {
      EXPECT_EQ(t->ss, 0.0) << t->name;
      EXPECT_EQ(t->F, 0.0) << t->name;
      EXPECT_EQ(t->p, 1.0) << t->name;
      EXPECT_EQ(t->partial_eta_squared, 0.0) << t->name;
      EXPECT_EQ(t->cohens_f, 0.0) << t->name;
    }
  }
  // All observations equal: every term is 0/0.
  const auto r = st::two_way_anova(std::vector<double>(y.size(), 0.3), a, b);
  for (const auto* t : {&r.a, &r.b, &r.interaction}) {
    EXPECT_EQ(t->F, 0.0) << t->name;
    EXPECT_EQ(t->p, 1.0) << t->name;
  }
}

TEST(StatsTwoWayAnova, BadInputThrows) {
  const std::vector<double> y = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<std::string> a = {"u", "u", "u", "u", "p", "p", "p", "p"};
  const std::vector<std::string> b = {"1", "1", "2", "2", "1", "1", "2", "2"};
  // Sanity: the design itself is accepted.
  EXPECT_EQ(st::two_way_anova(y, a, b, st::SumOfSquares::type3).df_residual, 4.0);
  expect_invalid([&] { st::two_way_anova({1, 2, 3}, a, b); }, "3 observations but 8 labels");
  expect_invalid([&] { st::two_way_anova(y, a, {"1", "2"}); }, "and 2 of B");
  auto bad = y;
  bad[3] = std::nan("");
  expect_invalid([&] { st::two_way_anova(bad, a, b); }, "y[3]");
  bad[3] = kInf;
  expect_invalid([&] { st::two_way_anova(bad, a, b); }, "y[3]");
  const std::vector<std::string> one(8, "only");
  expect_invalid([&] { st::two_way_anova(y, one, b); }, "factor A has 1 level(s)");
  expect_invalid([&] { st::two_way_anova(y, a, one); }, "factor B has 1 level(s)");
  // Cell (p, 2) empty.
  const std::vector<std::string> b_empty = {"1", "1", "2", "2", "1", "1", "1", "1"};
  expect_invalid([&] { st::two_way_anova(y, a, b_empty, st::SumOfSquares::type3); },
                 "cell (A = \"p\", B = \"2\") has no observations");
  // Type II allows the empty cell, but then a 2 x 2 design has no interaction left to test.
  expect_invalid([&] { st::two_way_anova(y, a, b_empty, st::SumOfSquares::type2); },
                 "cannot estimate term A:B");
  // A and B confounded (each level of A meets one level of B): A adjusted for B is empty.
  const std::vector<std::string> b_conf = {"1", "1", "1", "1", "2", "2", "2", "2"};
  expect_invalid([&] { st::two_way_anova(y, a, b_conf, st::SumOfSquares::type2); },
                 "cannot estimate term A (no degrees of freedom left for it: the factors are "
                 "confounded)");
  // One observation per cell: no residual degrees of freedom.
  expect_invalid(
      [&] {
        st::two_way_anova({1, 2, 3, 4}, {"u", "u", "p", "p"}, {"1", "2", "1", "2"});
      },
      "no residual degrees of freedom");
}

// ---- helpers and paper 001's printed values ---------------------------------------------------

TEST(StatsHelpers, ReproducePaper001Tables18And19) {
  // Table 18 (one-way, 4 sizes x 100 runs): F = 91.55, df (3, 396) -> p = 5.09e-45, f = 0.833.
  EXPECT_NEAR(st::p_from_F(91.55, 3, 396), 5.09e-45, 0.005e-45);
  EXPECT_NEAR(st::f_from_F(91.55, 3, 396), 0.833, 0.0005);
  // Table 19 (two-way source x size, error df 792): F = 88.18, df (1, 792) -> p = 6.20e-20,
  // f = 0.334; F = 39598.38 -> f = 7.07 with p below 1e-300 ("< 10^-300").
  EXPECT_NEAR(st::p_from_F(88.18, 1, 792), 6.20e-20, 0.005e-20);
  EXPECT_NEAR(st::f_from_F(88.18, 1, 792), 0.334, 0.0005);
  EXPECT_NEAR(st::f_from_F(39598.38, 1, 792), 7.07, 0.005);
  EXPECT_LT(st::p_from_F(39598.38, 1, 792), 1e-300);
  // Table 19, Kawakami-DC PR-AUC: F = 143.53 -> p = 1.63e-30.
  EXPECT_NEAR(st::p_from_F(143.53, 1, 792), 1.63e-30, 0.005e-30);
}

TEST(StatsHelpers, EdgeValuesAndTails) {
  EXPECT_EQ(st::p_from_F(0, 2, 10), 1.0);
  EXPECT_EQ(st::p_from_F(kInf, 2, 10), 0.0);
  EXPECT_EQ(st::f_from_F(kInf, 2, 10), kInf);
  EXPECT_EQ(st::p_from_t(0, 5, st::Alternative::two_sided), 1.0);
  EXPECT_DOUBLE_EQ(st::p_from_t(0, 5, st::Alternative::less), 0.5);
  // t(1) is Cauchy: P(T > 1) = 1/4.
  EXPECT_NEAR(st::p_from_t(1, 1, st::Alternative::greater), 0.25, 1e-15);
  EXPECT_NEAR(st::p_from_t(1, 1, st::Alternative::less), 0.75, 1e-15);
  EXPECT_NEAR(st::p_from_t(-1, 1, st::Alternative::two_sided), 0.5, 1e-15);
  EXPECT_EQ(st::p_from_t(-kInf, 3, st::Alternative::less), 0.0);
  EXPECT_EQ(st::p_from_t(-kInf, 3, st::Alternative::greater), 1.0);
}

TEST(StatsHelpers, BadInputThrows) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([] { st::p_from_F(-1, 1, 2); }, "expected F >= 0");
  expect_invalid([&] { st::p_from_F(nan, 1, 2); }, "expected F >= 0");
  expect_invalid([] { st::p_from_F(1, 0, 2); }, "df1");
  expect_invalid([] { st::p_from_F(1, 1, kInf); }, "df2");
  expect_invalid([] { st::f_from_F(-0.5, 1, 2); }, "expected F >= 0");
  expect_invalid([] { st::f_from_F(1, -1, 2); }, "df_effect");
  expect_invalid([&] { st::f_from_F(1, 1, nan); }, "df_error");
  expect_invalid([&] { st::p_from_t(nan, 3, st::Alternative::less); }, "t is NaN");
  expect_invalid([] { st::p_from_t(1, 0, st::Alternative::less); }, "df");
}

}  // namespace
