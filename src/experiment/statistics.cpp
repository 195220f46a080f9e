// The parts of a study that need no data: a [sweep] grid's points and the tests of the
// [[statistics]] section (paired t-tests, one- and two-way ANOVAs from include/dcalign/stats.hpp)
// on the records. study.cpp runs them; the configuration parser checks them with this file alone.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "dcalign/experiment.hpp"
#include "dcalign/stats.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment {
namespace {

const std::set<std::string> kSweepKeys = {"anchor",           "anchor_rows",  "dim",  "dp_epsilon",
                                          "samples_per_user", "test_samples", "users"};
const std::set<std::string> kBaselineMethods = {"central", "local"};
constexpr std::size_t kMaxPoints = 10000;

[[noreturn]] void sweep_error(const std::string& key, const std::string& value,
                              const std::string& expected) {
  throw InvalidInput("experiment: [sweep] key '" + key + "' value '" + value + "': expected " +
                     expected);
}

index_t integer_value(const std::string& key, const std::string& text, index_t lo) {
  index_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo)
    sweep_error(key, text, "an integer >= " + std::to_string(lo));
  return v;
}

double real_value(const std::string& key, const std::string& text) {
  std::istringstream is(text);
  double v = 0;
  is >> v;
  if (!is || !is.eof() || !std::isfinite(v) || v <= 0)
    sweep_error(key, text, "a finite number > 0");
  return v;
}

void apply(Config& c, const std::string& key, const std::string& value) {
  if (key == "anchor") {
    if (value != "uniform" && value != "normal" && value.rfind("public:", 0) != 0)
      sweep_error(key, value, "uniform, normal or public:<dataset>");
    c.anchor = value;
  } else if (key == "anchor_rows") {
    c.anchor_rows = integer_value(key, value, 1);
  } else if (key == "dim") {
    c.dim = integer_value(key, value, 1);
  } else if (key == "dp_epsilon") {
    c.dp_epsilon = real_value(key, value);
  } else if (key == "samples_per_user") {
    c.samples_per_user = integer_value(key, value, 1);
  } else if (key == "test_samples") {
    c.test_samples = integer_value(key, value, 0);
  } else {
    c.users = integer_value(key, value, 1);
  }
}

// "k1=v1,k2=v2" -> {k1: v1, k2: v2}.
std::map<std::string, std::string> point_values(const std::string& point) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start < point.size()) {
    const std::size_t comma = std::min(point.find(',', start), point.size());
    const std::string part = point.substr(start, comma - start);
    const std::size_t eq = part.find('=');
    if (eq != std::string::npos) out[part.substr(0, eq)] = part.substr(eq + 1);
    start = comma + 1;
  }
  return out;
}

// The point without the keys in `drop` (the factors a test runs across).
std::string point_without(const std::string& point, const std::vector<std::string>& drop) {
  std::string out;
  for (const auto& [k, v] : point_values(point))
    if (std::find(drop.begin(), drop.end(), k) == drop.end())
      out += (out.empty() ? "" : ",") + k + "=" + v;
  return out.empty() && !point.empty() ? "*" : out;
}

std::vector<SweepAxis> sorted_axes(const Config& c) {
  std::vector<SweepAxis> axes = c.sweep;
  std::sort(axes.begin(), axes.end(),
            [](const SweepAxis& x, const SweepAxis& y) { return x.key < y.key; });
  return axes;
}

}  // namespace

namespace detail {

void validate_statistics(const Config& c) {
  std::set<std::string> keys;
  for (const auto& a : c.sweep) keys.insert(a.key);
  const auto method_known = [&c](const std::string& m) {
    return std::find(c.methods.begin(), c.methods.end(), m) != c.methods.end();
  };
  for (std::size_t k = 0; k < c.statistics.size(); ++k) {
    const StatisticsSpec& s = c.statistics[k];
    const std::string where = "experiment: statistics[" + std::to_string(k) + "] (" + s.test + ")";
    if (s.test == "paired-t") {
      for (const auto* m : {&s.a, &s.b})
        if (!method_known(*m))
          throw InvalidInput(where + ": method '" + *m + "' is not in 'methods'");
      if (s.a == s.b) throw InvalidInput(where + ": compares '" + s.a + "' with itself");
      try {
        (void)stats::parse_alternative(s.alternative);
      } catch (const InvalidInput& e) {
        throw InvalidInput(where + ": " + e.what());
      }
      if (c.trials < 2) throw InvalidInput(where + ": needs trials >= 2 to pair");
    } else if (s.test == "anova1" || s.test == "anova2") {
      const std::size_t want = s.test == "anova1" ? 1 : 2;
      if (s.factors.size() != want)
        throw InvalidInput(where + ": needs " + std::to_string(want) + " factor(s), got " +
                           std::to_string(s.factors.size()));
      for (const auto& f : s.factors)
        if (f != "method" && f != "condition" && !keys.count(f))
          throw InvalidInput(where + ": factor '" + f +
                             "' is neither \"method\", \"condition\" nor a key of [sweep]");
      if (want == 2 && s.factors[0] == s.factors[1])
        throw InvalidInput(where + ": the two factors are the same");
      try {
        (void)stats::parse_sum_of_squares(s.sum_of_squares);
      } catch (const InvalidInput& e) {
        throw InvalidInput(where + ": sum_of_squares: " + e.what());
      }
    } else {
      throw InvalidInput("experiment: statistics[" + std::to_string(k) + "]: test '" + s.test +
                         "'; expected paired-t, anova1 or anova2");
    }
  }
}

}  // namespace detail

namespace {

std::string factor_value(const std::string& f, const Record& r) {
  if (f == "method") return r.method;
  if (f == "condition") return r.condition;
  return point_values(r.point)[f];
}

}  // namespace

std::vector<std::pair<std::string, Config>> sweep_points(const Config& config) {
  if (config.sweep.empty()) return {{"", config}};
  const auto axes = sorted_axes(config);
  std::size_t count = 1;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const SweepAxis& a = axes[k];
    if (!kSweepKeys.count(a.key))
      throw InvalidInput("experiment: [sweep] key '" + a.key +
                         "' cannot be swept; expected one of "
                         "anchor, anchor_rows, dim, dp_epsilon, samples_per_user, test_samples, "
                         "users");
    if (k > 0 && axes[k - 1].key == a.key)
      throw InvalidInput("experiment: [sweep] key '" + a.key + "' given twice");
    if (a.values.empty())
      throw InvalidInput("experiment: [sweep] key '" + a.key + "' has no values");
    if (std::set<std::string>(a.values.begin(), a.values.end()).size() != a.values.size())
      throw InvalidInput("experiment: [sweep] key '" + a.key + "' repeats a value");
    count *= a.values.size();
    if (count > kMaxPoints)
      throw InvalidInput("experiment: [sweep] has more than " + std::to_string(kMaxPoints) +
                         " points");
  }
  std::vector<std::pair<std::string, Config>> points;
  std::vector<std::size_t> at(axes.size(), 0);
  for (std::size_t n = 0; n < count; ++n) {
    Config c = config;
    c.sweep.clear();
    c.statistics.clear();
    std::string label;
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const std::string& v = axes[k].values[at[k]];
      apply(c, axes[k].key, v);
      label += (label.empty() ? "" : ",") + axes[k].key + "=" + v;
    }
    points.emplace_back(label, std::move(c));
    for (std::size_t k = axes.size(); k-- > 0;) {  // the last axis varies fastest
      if (++at[k] < axes[k].values.size()) break;
      at[k] = 0;
    }
  }
  return points;
}

std::vector<StatisticsResult> run_statistics(const Config& c, const std::vector<Record>& records) {
  detail::validate_statistics(c);
  const std::set<std::string> metrics(c.metrics.begin(), c.metrics.end());
  const std::set<std::string> models(c.models.begin(), c.models.end());
  std::vector<const Record*> scores;
  for (const auto& r : records)
    if (metrics.count(r.metric) && models.count(r.model)) scores.push_back(&r);
  std::vector<std::string> conditions;
  for (auto cond : c.conditions) conditions.push_back(to_string(cond));
  if (c.protocol == "nri-dc") conditions = {"-"};

  std::vector<StatisticsResult> out;
  for (const StatisticsSpec& s : c.statistics) {
    if (s.test == "paired-t") {
      // (point, condition, model, metric) -> trial -> value, for a and for b.
      using Key = std::tuple<std::string, std::string, std::string, std::string>;
      std::map<Key, std::map<index_t, double>> va, vb;
      const bool a_base = kBaselineMethods.count(s.a) > 0, b_base = kBaselineMethods.count(s.b) > 0;
      for (const Record* r : scores) {
        for (const auto& cond : (a_base && b_base) ? std::vector<std::string>{"-"} : conditions) {
          if (r->method == s.a && r->condition == (a_base ? "-" : cond))
            va[{r->point, cond, r->model, r->metric}][r->trial] = r->value;
          if (r->method == s.b && r->condition == (b_base ? "-" : cond))
            vb[{r->point, cond, r->model, r->metric}][r->trial] = r->value;
        }
      }
      for (const auto& [key, by_trial] : va) {
        const auto other = vb.find(key);
        if (other == vb.end()) continue;
        std::vector<double> x, y;
        for (const auto& [trial, v] : by_trial) {
          const auto it = other->second.find(trial);
          if (it == other->second.end()) continue;
          x.push_back(v);
          y.push_back(it->second);
        }
        if (x.size() < 2) continue;
        const auto t = stats::paired_t_test(x, y, stats::parse_alternative(s.alternative));
        StatisticsResult sr;
        sr.test = s.test;
        sr.what = s.a + " - " + s.b + " (" + s.alternative + ")";
        std::tie(sr.point, sr.condition, sr.model, sr.metric) = key;
        sr.method = "*";
        sr.n = static_cast<index_t>(t.n);
        sr.statistic = t.t;
        sr.df1 = t.df;
        sr.p = t.p;
        sr.effect = t.cohens_dz;
        for (double v : x) sr.mean_a += v / static_cast<double>(x.size());
        for (double v : y) sr.mean_b += v / static_cast<double>(y.size());
        out.push_back(sr);
      }
      continue;
    }
    // ANOVAs: group the scores by everything but the factors.
    const bool over_methods =
        std::find(s.factors.begin(), s.factors.end(), "method") != s.factors.end();
    const bool over_conditions =
        std::find(s.factors.begin(), s.factors.end(), "condition") != s.factors.end();
    using Key = std::tuple<std::string, std::string, std::string, std::string, std::string>;
    std::map<Key, std::vector<const Record*>> groups;
    for (const Record* r : scores) {
      if ((over_methods || over_conditions) && !is_align_method(r->method)) continue;
      groups[{point_without(r->point, s.factors), over_conditions ? "*" : r->condition,
              over_methods ? "*" : r->method, r->model, r->metric}]
          .push_back(r);
    }
    std::string what = s.factors[0];
    if (s.factors.size() == 2) what += " x " + s.factors[1];
    for (const auto& [key, recs] : groups) {
      StatisticsResult base;
      base.test = s.test;
      base.what = what;
      std::tie(base.point, base.condition, base.method, base.model, base.metric) = key;
      base.n = static_cast<index_t>(recs.size());
      if (s.test == "anova1") {
        std::vector<std::string> levels;
        std::vector<std::vector<double>> values;
        for (const Record* r : recs) {
          const std::string level = factor_value(s.factors[0], *r);
          auto it = std::find(levels.begin(), levels.end(), level);
          if (it == levels.end()) {
            levels.push_back(level);
            values.emplace_back();
            it = levels.end() - 1;
          }
          values[static_cast<std::size_t>(it - levels.begin())].push_back(r->value);
        }
        if (levels.size() < 2) continue;
        const auto a = stats::one_way_anova(values);
        StatisticsResult sr = base;
        sr.statistic = a.F;
        sr.df1 = a.df_between;
        sr.df2 = a.df_within;
        sr.p = a.p;
        sr.effect = a.cohens_f;
        out.push_back(sr);
      } else {
        std::vector<double> y;
        std::vector<std::string> la, lb;
        for (const Record* r : recs) {
          y.push_back(r->value);
          la.push_back(factor_value(s.factors[0], *r));
          lb.push_back(factor_value(s.factors[1], *r));
        }
        if (std::set<std::string>(la.begin(), la.end()).size() < 2 ||
            std::set<std::string>(lb.begin(), lb.end()).size() < 2)
          continue;
        const auto a =
            stats::two_way_anova(y, la, lb, stats::parse_sum_of_squares(s.sum_of_squares));
        const std::pair<const stats::AnovaTerm*, std::string> terms[] = {
            {&a.a, s.factors[0]},
            {&a.b, s.factors[1]},
            {&a.interaction, s.factors[0] + ":" + s.factors[1]}};
        for (const auto& [term, name] : terms) {
          StatisticsResult sr = base;
          sr.term = name;
          sr.statistic = term->F;
          sr.df1 = term->df;
          sr.df2 = a.df_residual;
          sr.p = term->p;
          sr.effect = term->cohens_f;
          out.push_back(sr);
        }
      }
    }
  }
  return out;
}

}  // namespace dcalign::experiment
