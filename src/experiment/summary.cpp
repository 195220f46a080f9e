// The Markdown summary of an experiment: paper 001 Table 7's layout for "dc", paper 004's tables
// for "nri-dc", and the communication, privacy, statistics and alignment-time tables. The files
// are written in outputs.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "dcalign/align.hpp"
#include "dcalign/experiment.hpp"
#include "dcalign/privacy.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment {
namespace {

std::string percent_or_raw(const std::string& metric, double v) {
  char buf[64];
  if (metric == "rmse")
    std::snprintf(buf, sizeof buf, "%.4f", v);
  else
    std::snprintf(buf, sizeof buf, "%.1f", 100 * v);
  return buf;
}

// 004's tables: per metric and model, the summary statistics over trials in rows and Central,
// Local and the methods in columns; then the mean +- 95% CI and the constant workers.
// Paper 004's data preparation keys, when any differs from its default ("" otherwise, so the
// text of other runs is unchanged).
std::string data_preparation(const Config& c) {
  std::ostringstream os;
  if (c.emulate_duplicates > 0)
    os << ", EMULATED duplicates: the pool repeats the dataset's rows to " << c.emulate_duplicates
       << " rows (row k = row k mod n)";
  if (c.subsample > 0)
    os << ", per-trial " << (c.subsample_stratified ? "stratified " : "") << "subsample of "
       << c.subsample << " rows";
  if (c.test_split == "pooled")
    os << ", test set of " << c.test_samples
       << " rows drawn per trial from the pooled training and test rows";
  if (c.onehot != "full") os << ", one-hot " << c.onehot;
  if (c.heart_ca != "continuous") os << ", ca " << c.heart_ca;
  return os.str();
}

// The DP line of the summary ("" without DP): the mechanism, its parameters, sigma for
// Delta = r, and the mean sigma_i per condition where the F_i are not orthonormal.
std::string dp_description(const Result& r) {
  const auto& c = r.config;
  if (!c.dp_enabled()) return "";
  std::ostringstream os;
  os.precision(8);
  os << "Differential privacy (Analytic Gaussian Mechanism, Balle and Wang 2018): ";
  if (c.dp_target == "released")
    os << "noise on the released X~_i = X_i F_i + sigma_i W_i (paper 000, eq. 3; anchor "
          "representations without noise), Central and Local on the raw data";
  else
    os << "noise on the raw training rows X_i + sigma W_i (paper 001's DP baseline is Central on "
          "them; every method sees the noisy rows)";
  os << "; epsilon = " << c.dp_epsilon << ", delta = " << c.dp_delta
     << ", row range r = " << c.dp_row_range
     << ", sigma = " << analytic_gaussian_sigma(c.dp_epsilon, c.dp_delta, c.dp_row_range)
     << " for Delta = r";
  if (c.dp_target == "released") {
    os << " (orthonormal F_i); mean sigma_i over users and trials:";
    for (auto cond : c.conditions) {
      std::vector<double> v;
      for (const auto& rec : r.records)
        if (rec.metric == "dp_sigma" && rec.condition == to_string(cond)) v.push_back(rec.value);
      double mean = 0;
      for (double x : v) mean += x;
      os << " " << to_string(cond) << " ";
      if (v.empty())
        os << "n/a";
      else
        os << mean / static_cast<double>(v.size());
    }
  }
  os << ".\n\n";
  return os.str();
}

// The rows mean, std, min, 25%, 50%, 75% and max of 004's tables, one column per description.
template <typename Format>
void describe_rows(std::ostream& os, const std::vector<Description>& d, const Format& number) {
  const std::pair<const char*, double Description::*> rows[] = {
      {"mean", &Description::mean}, {"std", &Description::std}, {"min", &Description::min},
      {"25%", &Description::q25},   {"50%", &Description::q50}, {"75%", &Description::q75},
      {"max", &Description::max}};
  for (const auto& [label, field] : rows) {
    os << "| " << label << " |";
    for (const auto& x : d) os << " " << number(x.*field) << " |";
    os << "\n";
  }
}

std::string bytes_text(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", b);
  return buf;
}

// Bytes each method sent, counted from the arrays exchanged, beside paper 001's prediction
// (eq. 14 for DC with q = 64 and no anchor transfer, eq. 15 for FedAvg at its training
// precision); means over trials.
std::string communication_table(const Result& r, const std::vector<std::string>& dc,
                                const std::vector<std::string>& fed) {
  const auto& c = r.config;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<double>> g;
  for (const auto& rec : r.records)
    if (rec.metric == "uplink_bytes" || rec.metric == "downlink_bytes" ||
        rec.metric == "predicted_bytes")
      g[{rec.condition, rec.method, rec.model, rec.metric}].push_back(rec.value);
  auto mean = [&](const std::string& cond, const std::string& method, const std::string& model,
                  const std::string& metric) {
    auto it = g.find({cond, method, model, metric});
    if (it == g.end()) return std::nan("");
    double s = 0;
    for (double v : it->second) s += v;
    return s / static_cast<double>(it->second.size());
  };
  std::ostringstream os;
  os << "### Communication (bytes, mean over trials)\n\nCounted from the arrays exchanged: DC "
        "uploads X~_i, A_i and the labels y_i and downloads G_i and the model's parameters "
        "(doubles, q = 64; the anchor is regenerated from its seed); FedAvg moves the model's "
        "tensors both ways every round. Predicted: paper 001 eq. 14 (DC, gamma = 0; it has no "
        "term for the labels, 8 bytes per training row here) and eq. 15 (FedAvg).\n\n"
        "| condition | method | model | uplink | downlink | total | predicted |\n"
        "|---|---|---|---|---|---|---|\n";
  auto row = [&](const std::string& cond, const std::string& method, const std::string& model) {
    const double up = mean(cond, method, model, "uplink_bytes");
    if (std::isnan(up)) return;
    const double down = mean(cond, method, model, "downlink_bytes");
    os << "| " << cond << " | " << method << " | " << model << " | " << bytes_text(up) << " | "
       << bytes_text(down) << " | " << bytes_text(up + down) << " | "
       << bytes_text(mean(cond, method, model, "predicted_bytes")) << " |\n";
  };
  for (auto cond : c.conditions)
    for (const auto& m : dc)
      for (const auto& model : c.models) row(to_string(cond), m, model);
  for (const auto& f : fed) row("-", f, "mlp");
  os << "\n";
  return os.str();
}

// The privacy measurements per condition (mean +- 95% CI over trials); "" when none were asked.
std::string privacy_table(const Result& r) {
  const auto& c = r.config;
  if (c.privacy.empty()) return "";
  std::vector<std::string> metrics;
  const bool nri = c.protocol == "nri-dc";
  if (c.measures("collusion"))
    metrics.insert(metrics.end(), {"collusion_error", "collusion_row_error"});
  if (c.measures("collusion") && nri) metrics.push_back("collusion_identified");
  if (c.measures("dr"))
    metrics.insert(metrics.end(), {"dr_fraction_below", "dr_min_ratio", "dr_median_ratio"});
  if (c.privacy_defence) metrics.insert(metrics.end(), {"dr_dropped_rows", "dr_dropped_fraction"});
  std::map<std::pair<std::string, std::string>, std::vector<double>> g;
  for (const auto& rec : r.records)
    if (rec.method == "privacy") g[{rec.condition, rec.metric}].push_back(rec.value);
  std::ostringstream os;
  os << "### Privacy, " << c.trials << " trial(s), mean";
  if (c.trials > 1) os << " ± 95% CI";
  os << "\n\n";
  if (c.measures("collusion") && !nri)
    os << "Collusion: user 1 and the analyst reconstruct every other user's rows as "
       << "X~_j (A^+ A_j)^+ (paper 001 section 2.2"
       << (c.dp_target == "released" ? ", from the DP-noised X~_j" : "")
       << "); errors relative to the true rows, median over the attacked users. ";
  if (c.measures("collusion") && nri)
    os << "Collusion: worker 1 and the master reconstruct every other worker's released rows "
       << (c.centered() ? "by the affine attack, [F^_j; b^_j] = [A, 1]^+ A~_j and "
                          "(X~_j - 1 b^_j) F^_j^+"
                        : "as X~_j (A^+ A~_j)^+")
       << "; errors relative to the true rows in the released order, median over the attacked "
          "workers; identified: share of reconstructed rows whose nearest true row is the right "
          "one (P_j unknown to the attacker). ";
  if (c.measures("dr"))
    os << "epsilon-DR (paper 004 eq. 3): r(x) = ||x - x F_i F_i^+|| / ||x|| of every user's "
       << (nri ? "raw " : "")
       << "rows; below: share of rows with r < epsilon = " << c.privacy_dr_epsilon
       << (c.privacy_defence ? " (privacy_defence drops them before release: dr_dropped_rows, "
                               "dr_dropped_fraction)."
                             : " (the down-sampling defence would drop them).");
  os << "\n\n| condition |";
  for (const auto& m : metrics) os << " " << m << " |";
  os << "\n|---|";
  for (size_t k = 0; k < metrics.size(); ++k) os << "---|";
  os << "\n";
  std::vector<std::string> rows;  // NRI-DC has no conditions: its records carry "-"
  if (nri)
    rows = {"-"};
  else
    for (auto cond : c.conditions) rows.push_back(to_string(cond));
  for (const auto& cond : rows) {
    os << "| " << cond << " |";
    for (const auto& m : metrics) {
      auto it = g.find({cond, m});
      if (it == g.end()) {
        os << " n/a |";
        continue;
      }
      const auto s = learn::summarize(it->second);
      char buf[64];
      if (s.count > 1)
        std::snprintf(buf, sizeof buf, "%.3g ± %.2g", s.mean, s.half_width);
      else
        std::snprintf(buf, sizeof buf, "%.3g", s.mean);
      os << " " << buf << " |";
    }
    os << "\n";
  }
  os << "\n";
  return os.str();
}

// The [[statistics]] tests: one row per test and group; significance at 5%.
std::string statistics_table(const Result& r) {
  if (r.statistics.empty()) return "";
  std::ostringstream os;
  os << "### Statistics\n\nPaired t-tests (t, df, p, Cohen's d_z) and ANOVAs (F, df, p, "
        "Cohen's f); * p < 0.05. Groups: point / condition / method / model / metric, * where "
        "the test runs across them.\n\n"
        "| test | compared | term | group | n | mean a | mean b | statistic | df | p | effect |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& t : r.statistics) {
    char buf[256];
    const bool paired = t.test == "paired-t";
    std::snprintf(buf, sizeof buf, "%.4g", t.statistic);
    std::string stat = buf;
    std::snprintf(buf, sizeof buf, "%.3g%s", t.p, t.p < 0.05 ? "*" : "");
    std::string p = buf;
    std::snprintf(buf, sizeof buf, "%.3f", t.effect);
    std::string effect = buf;
    std::string df = paired ? std::to_string(static_cast<long long>(t.df1))
                            : std::to_string(static_cast<long long>(t.df1)) + ", " +
                                  std::to_string(static_cast<long long>(t.df2));
    os << "| " << t.test << " | " << t.what << " | " << (t.term.empty() ? "-" : t.term) << " | "
       << (t.point.empty() ? "" : t.point + " / ") << t.condition << " / " << t.method << " / "
       << t.model << " / " << t.metric << " | " << t.n << " | "
       << (paired ? percent_or_raw(t.metric, t.mean_a) : "-") << " | "
       << (paired ? percent_or_raw(t.metric, t.mean_b) : "-") << " | " << stat << " | " << df
       << " | " << p << " | " << effect << " |\n";
  }
  os << "\n";
  return os.str();
}

// The time to compute all G_i per method (paper 004's Tables 4, 8 and 12; paper 003 Table II's
// TIME row), from the align_seconds records, over trials, conditions and models; empty when
// there are none.
std::string alignment_time_table(const Result& r, const std::vector<std::string>& columns) {
  const Config& c = r.config;
  std::ostringstream os;
  std::vector<std::string> timed;
  std::map<std::string, std::vector<double>> ms;
  for (const auto& rec : r.records)
    if (rec.metric == "align_seconds") ms[rec.method].push_back(1e3 * rec.value);
  for (const auto& col : columns)
    if (ms.count(col)) timed.push_back(col);
  if (timed.empty()) return "";
  os << "### " << c.dataset << ", time to compute all G_i (milliseconds; papers 003 and 004 "
     << "print seconds), " << ms[timed.front()].size() << " alignment(s) per method\n\n|   |";
  for (const auto& col : timed) os << " " << col << " |";
  os << "\n|---|";
  for (size_t k = 0; k < timed.size(); ++k) os << "---|";
  os << "\n";
  std::vector<Description> d;
  for (const auto& col : timed) d.push_back(describe(ms[col]));
  describe_rows(os, d, [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return std::string(buf);
  });
  os << "\n";
  return os.str();
}

// uplink other than fp64: the mean orthogonality error and objective of the G_i per condition
// and method, from their records; empty without them.
std::string uplink_alignment_table(const Result& r, const std::vector<std::string>& columns) {
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> g;
  std::vector<std::string> conditions;
  for (const auto& rec : r.records)
    if (rec.metric == "orthogonality_error" || rec.metric == "objective") {
      g[{rec.condition, rec.method, rec.metric}].push_back(rec.value);
      if (std::find(conditions.begin(), conditions.end(), rec.condition) == conditions.end())
        conditions.push_back(rec.condition);
    }
  if (g.empty()) return "";
  std::ostringstream os;
  os << "### The G_i after a " << r.config.uplink
     << " uplink: orthogonality error max_i ||G_i^T G_i - I||_F / objective, mean over trials"
     << "\n\n| condition |";
  for (const auto& col : columns) os << " " << col << " |";
  os << "\n|---|";
  for (size_t k = 0; k < columns.size(); ++k) os << "---|";
  os << "\n";
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? NAN : sum / static_cast<double>(v.size());
  };
  for (const auto& cond : conditions) {
    os << "| " << cond << " |";
    for (const auto& col : columns) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " %.3g / %.6g |", mean(g[{cond, col, "orthogonality_error"}]),
                    mean(g[{cond, col, "objective"}]));
      os << buf;
    }
    os << "\n";
  }
  os << "\n";
  return os.str();
}

std::string nri_summary_table(const Result& r) {
  const auto& c = r.config;
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> g;
  for (const auto& rec : r.records) g[{rec.method, rec.model, rec.metric}].push_back(rec.value);
  std::vector<std::string> columns;
  for (const char* b : {"central", "local"})
    if (std::find(c.methods.begin(), c.methods.end(), b) != c.methods.end()) columns.push_back(b);
  for (const auto& m : c.methods)
    if (is_align_method(m)) columns.push_back(m);
  auto number = [](double v, const char* fmt = "%.3f") {
    if (std::isnan(v)) return std::string("n/a");
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return std::string(buf);
  };
  const index_t scored = c.holder() == "first" ? 1 : c.users;
  std::ostringstream os;
  os << "NRI-DC (paper 004, Algorithm 1): " << c.users << " workers of " << c.samples_per_user
     << " samples, test set " << c.holder() << ", anchor " << c.anchor << " with " << c.anchor_rows
     << " rows, delta = " << c.nri_delta << ", PCA " << (c.centered() ? "centred" : "not centred")
     << ", permutation " << (c.nri_permute ? "on" : "off") << data_preparation(c)
     << ". Summary statistics over trials of the metric "
     << "averaged over workers (std with n - 1, quartiles by linear interpolation, as "
     << "pandas' describe()).\n\n";
  for (const auto& metric : c.metrics) {
    for (const auto& model : c.models) {
      os << "### " << c.dataset << ", " << metric << ", " << model << ", " << c.trials
         << " trial(s)\n\n|   |";
      for (const auto& col : columns) os << " " << col << " |";
      os << "\n|---|";
      for (size_t k = 0; k < columns.size(); ++k) os << "---|";
      os << "\n";
      std::vector<Description> d;
      for (const auto& col : columns) {
        auto it = g.find({col, model, metric});
        d.push_back(it == g.end() ? Description{0, NAN, NAN, NAN, NAN, NAN, NAN, NAN}
                                  : describe(it->second));
      }
      describe_rows(os, d, number);
      os << "| mean ± 95% CI |";
      for (const auto& col : columns) {
        auto it = g.find({col, model, metric});
        if (it == g.end()) {
          os << " n/a |";
          continue;
        }
        const auto s = learn::summarize(it->second);
        os << " " << number(s.mean) << (s.count > 1 ? " ± " + number(s.half_width) : "") << " |";
      }
      os << "\n| constant t_i |";
      for (const auto& col : columns) {
        auto it = g.find({col, model, "constant_workers"});
        if (it == g.end()) {
          os << " - |";
          continue;
        }
        double total = 0;
        for (double v : it->second) total += v;
        os << " " << number(total, "%.0f") << " of "
           << scored * static_cast<index_t>(it->second.size()) << " |";
      }
      os << "\n\n";
    }
  }
  os << alignment_time_table(r, columns);
  return os.str();
}

}  // namespace

double quantile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) throw InvalidInput("quantile: empty sample");
  if (!(p >= 0 && p <= 1)) throw InvalidInput("quantile: p must be in [0, 1]");
  const double pos = p * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Description describe(const std::vector<double>& values) {
  if (values.empty()) throw InvalidInput("describe: empty sample");
  std::vector<double> v = values;
  std::sort(v.begin(), v.end());
  Description d;
  d.count = static_cast<index_t>(v.size());
  for (double x : v) d.mean += x;
  d.mean /= static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - d.mean) * (x - d.mean);
    d.std = std::sqrt(ss / static_cast<double>(v.size() - 1));
  } else {
    d.std = NAN;
  }
  d.min = v.front();
  d.q25 = quantile_sorted(v, 0.25);
  d.q50 = quantile_sorted(v, 0.5);
  d.q75 = quantile_sorted(v, 0.75);
  d.max = v.back();
  return d;
}

std::string summary_table(const Result& r) {
  const auto& c = r.config;
  if (!c.sweep.empty()) {  // one summary per point, then the tests
    std::ostringstream os;
    for (const auto& [label, pc] : sweep_points(c)) {
      Result sub;
      sub.config = pc;
      for (const auto& rec : r.records)
        if (rec.point == label) sub.records.push_back(rec);
      os << "## Point " << label << "\n\n" << summary_table(sub);
    }
    os << statistics_table(r);
    return os.str();
  }
  if (c.protocol == "nri-dc") return nri_summary_table(r) + privacy_table(r) + statistics_table(r);
  // (condition, method, model, metric) -> values over trials
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<double>> g;
  for (const auto& rec : r.records)
    g[{rec.condition, rec.method, rec.model, rec.metric}].push_back(rec.value);
  auto cell = [&](const std::string& cond, const std::string& method, const std::string& model,
                  const std::string& metric, bool with_ci) -> std::string {
    auto it = g.find({cond, method, model, metric});
    if (it == g.end()) return "n/a";
    const auto s = learn::summarize(it->second);
    std::string out = percent_or_raw(metric, s.mean);
    if (with_ci && s.count > 1) {
      const double hw = metric == "rmse" ? s.half_width : 100 * s.half_width;
      char buf[32];
      std::snprintf(buf, sizeof buf, metric == "rmse" ? " ± %.4f" : " ± %.1f", hw);
      out += buf;
    }
    return out;
  };
  std::vector<std::string> dc, fed;
  for (const auto& m : c.methods)
    if (is_align_method(m)) dc.push_back(m);
  if (std::find(c.methods.begin(), c.methods.end(), "fedavg") != c.methods.end())
    for (const auto& conf : c.fedavg_configurations) fed.push_back("fedavg-" + conf);
  std::ostringstream os;
  os << dp_description(r);
  if (!fed.empty())
    os << "FedAvg: " << c.fedavg_rounds << " rounds, participation " << c.fedavg_participation
       << ", the MLP of the mlp row (its own columns; E local epochs of batch B per round).\n\n";
  for (const auto& metric : c.metrics) {
    os << "### " << c.dataset << ", " << metric << (metric == "rmse" ? "" : " (%)") << ", "
       << c.trials << " trial(s), mean";
    if (c.trials > 1) os << " ± 95% CI";
    os << "\n\nDC cells list ";
    for (size_t k = 0; k < dc.size(); ++k) os << (k ? " / " : "") << dc[k];
    os << ".\n\n| model |";
    for (auto cond : c.conditions) os << " " << to_string(cond) << " |";
    os << " Central | Local |";
    for (const auto& f : fed) os << " " << f << " |";
    os << "\n|---|";
    for (size_t k = 0; k < c.conditions.size() + 2 + fed.size(); ++k) os << "---|";
    os << "\n";
    for (const auto& model : c.models) {
      os << "| " << model << " |";
      for (auto cond : c.conditions) {
        os << " ";
        for (size_t k = 0; k < dc.size(); ++k)
          os << (k ? " / " : "") << cell(to_string(cond), dc[k], model, metric, dc.size() == 1);
        os << " |";
      }
      os << " " << cell("-", "central", model, metric, true) << " | "
         << cell("-", "local", model, metric, true) << " |";
      for (const auto& f : fed)
        os << " " << (model == "mlp" ? cell("-", f, model, metric, true) : "-") << " |";
      os << "\n";
    }
    if (dc.size() > 1 && c.trials > 1) {
      os << "\nHalf-widths of the 95% CIs of the DC cells:\n\n| model |";
      for (auto cond : c.conditions) os << " " << to_string(cond) << " |";
      os << "\n|---|";
      for (size_t k = 0; k < c.conditions.size(); ++k) os << "---|";
      os << "\n";
      for (const auto& model : c.models) {
        os << "| " << model << " |";
        for (auto cond : c.conditions) {
          os << " ";
          for (size_t k = 0; k < dc.size(); ++k) {
            auto it = g.find({to_string(cond), dc[k], model, metric});
            const double hw = it == g.end() ? NAN : learn::summarize(it->second).half_width;
            os << (k ? " / " : "") << percent_or_raw(metric, hw);
          }
          os << " |";
        }
        os << "\n";
      }
    }
    os << "\n";
  }
  if (!fed.empty()) os << communication_table(r, dc, fed);
  os << alignment_time_table(r, dc);
  os << uplink_alignment_table(r, dc);
  os << privacy_table(r);
  os << statistics_table(r);
  return os.str();
}

}  // namespace dcalign::experiment
