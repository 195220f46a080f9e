// Evaluation metrics and the summary statistics of repeated runs (mean +- t-based confidence
// half-width), including the Student t quantile from the regularized incomplete beta function.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "dcalign/learn.hpp"

namespace dcalign::learn {

namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void check_pair(size_t a, size_t b, const std::string& where) {
  if (a != b)
    throw InvalidInput(where + ": " + std::to_string(a) + " true values but " + std::to_string(b) +
                       " predictions; expected equal lengths");
  if (a == 0) throw InvalidInput(where + ": no samples; expected at least one");
}

void check_finite(const std::vector<double>& v, const char* which, const std::string& where) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw InvalidInput(where + ": " + which + "[" + std::to_string(i) + "] is " + fmt(v[i]) +
                         "; expected finite values");
}

void check_binary(const std::vector<double>& y, const std::string& where) {
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i] != 0.0 && y[i] != 1.0)
      throw InvalidInput(where + ": y_true[" + std::to_string(i) + "] = " + fmt(y[i]) +
                         "; expected binary labels 0 or 1");
}

// Positions of `score` sorted by score; ties keep index order, which makes every tie-group
// computation independent of the sort algorithm.
std::vector<size_t> order_by(const std::vector<double>& score, bool descending) {
  std::vector<size_t> idx(score.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return descending ? score[a] > score[b] : score[a] < score[b];
  });
  return idx;
}

double binary_auc(const std::vector<double>& y, const std::vector<double>& score,
                  const std::string& where) {
  check_pair(y.size(), score.size(), where);
  check_binary(y, where);
  check_finite(score, "score", where);
  double pos = 0.0;
  for (double v : y) pos += v;
  const double neg = static_cast<double>(y.size()) - pos;
  if (pos == 0.0 || neg == 0.0)
    throw InvalidInput(where + ": y_true holds only class " + std::string(pos == 0.0 ? "0" : "1") +
                       "; ROC-AUC expects both classes present");
  // Mann-Whitney: AUC = (sum of positive ranks - P(P+1)/2) / (P N), tied scores sharing
  // their average rank, which counts each positive-negative tie as one half.
  const auto idx = order_by(score, false);
  double rank_sum = 0.0;
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j < idx.size() && score[idx[j]] == score[idx[i]]) ++j;
    const double avg_rank = 0.5 * static_cast<double>(i + 1 + j);  // ranks i+1..j
    for (size_t t = i; t < j; ++t) rank_sum += y[idx[t]] * avg_rank;
    i = j;
  }
  return (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg);
}

double binary_ap(const std::vector<double>& y, const std::vector<double>& score,
                 const std::string& where) {
  check_pair(y.size(), score.size(), where);
  check_binary(y, where);
  check_finite(score, "score", where);
  double pos = 0.0;
  for (double v : y) pos += v;
  if (pos == 0.0)
    throw InvalidInput(where +
                       ": y_true has no positive sample; average precision expects "
                       "class 1 present");
  // Walk the thresholds from the highest score down; a group of tied scores is one threshold.
  const auto idx = order_by(score, true);
  double tp = 0.0, fp = 0.0, recall_prev = 0.0, ap = 0.0;
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j < idx.size() && score[idx[j]] == score[idx[i]]) {
      tp += y[idx[j]];
      fp += 1.0 - y[idx[j]];
      ++j;
    }
    const double recall = tp / pos;
    ap += (recall - recall_prev) * (tp / (tp + fp));
    recall_prev = recall;
    i = j;
  }
  return ap;
}

// One-vs-rest reduction shared by the matrix forms of ROC-AUC and average precision.
template <typename Binary>
double one_vs_rest(const std::vector<double>& y, const Matrix<double>& proba,
                   const std::string& where, Binary binary) {
  if (proba.cols() < 2)
    throw InvalidInput(where + ": probability matrix has " + std::to_string(proba.cols()) +
                       " columns; expected one per class, at least 2");
  check_pair(y.size(), static_cast<size_t>(proba.rows()), where);
  const index_t k = proba.cols();
  for (size_t i = 0; i < y.size(); ++i)
    if (!(y[i] >= 0 && y[i] < static_cast<double>(k) && y[i] == std::floor(y[i])))
      throw InvalidInput(where + ": y_true[" + std::to_string(i) + "] = " + fmt(y[i]) +
                         "; expected a class index in 0.." + std::to_string(k - 1));
  auto column = [&](index_t c) {
    return std::vector<double>(proba.data() + c * proba.rows(),
                               proba.data() + (c + 1) * proba.rows());
  };
  if (k == 2) return binary(y, column(1), where);
  double sum = 0.0;
  for (index_t c = 0; c < k; ++c) {
    std::vector<double> is_c(y.size());
    for (size_t i = 0; i < y.size(); ++i) is_c[i] = y[i] == static_cast<double>(c) ? 1.0 : 0.0;
    sum += binary(is_c, column(c), where + " (class " + std::to_string(c) + " vs rest)");
  }
  return sum / static_cast<double>(k);
}

}  // namespace

double accuracy(const std::vector<double>& y_true, const std::vector<double>& y_pred) {
  check_pair(y_true.size(), y_pred.size(), "accuracy");
  size_t hits = 0;
  for (size_t i = 0; i < y_true.size(); ++i) hits += y_true[i] == y_pred[i] ? 1 : 0;
  return static_cast<double>(hits) / static_cast<double>(y_true.size());
}

double rmse(const std::vector<double>& y_true, const std::vector<double>& y_pred) {
  check_pair(y_true.size(), y_pred.size(), "rmse");
  check_finite(y_true, "y_true", "rmse");
  check_finite(y_pred, "y_pred", "rmse");
  double s = 0.0;
  for (size_t i = 0; i < y_true.size(); ++i) s += (y_true[i] - y_pred[i]) * (y_true[i] - y_pred[i]);
  return std::sqrt(s / static_cast<double>(y_true.size()));
}

double roc_auc(const std::vector<double>& y_true, const std::vector<double>& score) {
  return binary_auc(y_true, score, "roc_auc");
}

double roc_auc_ovr(const std::vector<double>& y_true, const Matrix<double>& proba) {
  return one_vs_rest(y_true, proba, "roc_auc_ovr", binary_auc);
}

double average_precision(const std::vector<double>& y_true, const std::vector<double>& score) {
  return binary_ap(y_true, score, "average_precision");
}

double average_precision_ovr(const std::vector<double>& y_true, const Matrix<double>& proba) {
  return one_vs_rest(y_true, proba, "average_precision_ovr", binary_ap);
}

// ---------------------------------------------------------------------------------------------
// Student t.

namespace {

// Continued fraction of I_x(a, b) (the even/odd terms d_2m, d_2m+1 of the classical
// expansion), evaluated with the modified Lentz method. Converges quickly for
// x < (a + 1) / (a + b + 2); the caller uses the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) otherwise.
double beta_fraction(double x, double a, double b) {
  const double tiny = 1e-300, eps = 1e-16;
  auto guard = [tiny](double v) { return std::fabs(v) < tiny ? tiny : v; };
  double c = 1.0;
  double d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double dm = static_cast<double>(m);
    const double even = dm * (b - dm) * x / ((a + 2 * dm - 1) * (a + 2 * dm));
    d = 1.0 / guard(1.0 + even * d);
    c = guard(1.0 + even / c);
    h *= d * c;
    const double odd = -(a + dm) * (a + b + dm) * x / ((a + 2 * dm) * (a + 2 * dm + 1));
    d = 1.0 / guard(1.0 + odd * d);
    c = guard(1.0 + odd / c);
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < eps) return h;
  }
  throw NumericalError("incomplete_beta: continued fraction did not converge for x = " + fmt(x) +
                       ", a = " + fmt(a) + ", b = " + fmt(b));
}

// I_x(a, b) given both x and y = 1 - x, so callers that know 1 - x exactly (the t tail)
// avoid the cancellation of forming it.
double ibeta(double x, double y, double a, double b) {
  if (x <= 0.0) return 0.0;
  if (y <= 0.0) return 1.0;
  const double log_front =
      a * std::log(x) + b * std::log(y) + std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b);
  if (x < (a + 1.0) / (a + b + 2.0)) return std::exp(log_front) * beta_fraction(x, a, b) / a;
  return 1.0 - std::exp(log_front) * beta_fraction(y, b, a) / b;
}

// P(T > t) for t >= 0: 0.5 * I_{v/(v+t^2)}(v/2, 1/2).
double t_upper_tail(double t, double dof) {
  const double t2 = t * t;
  return 0.5 * ibeta(dof / (dof + t2), t2 / (dof + t2), 0.5 * dof, 0.5);
}

}  // namespace

double incomplete_beta(double x, double a, double b) {
  if (!(a > 0 && b > 0 && std::isfinite(a) && std::isfinite(b)))
    throw InvalidInput("incomplete_beta: a = " + fmt(a) + ", b = " + fmt(b) +
                       "; expected positive finite parameters");
  if (!(x >= 0 && x <= 1))
    throw InvalidInput("incomplete_beta: x = " + fmt(x) + "; expected 0 <= x <= 1");
  return ibeta(x, 1.0 - x, a, b);
}

double student_t_cdf(double t, double dof) {
  if (!(dof > 0 && std::isfinite(dof)))
    throw InvalidInput("student_t_cdf: dof = " + fmt(dof) + "; expected positive finite dof");
  if (std::isnan(t)) throw InvalidInput("student_t_cdf: t is NaN");
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  const double tail = t_upper_tail(std::fabs(t), dof);
  return t >= 0 ? 1.0 - tail : tail;
}

double student_t_quantile(double p, double dof) {
  if (!(dof > 0 && std::isfinite(dof)))
    throw InvalidInput("student_t_quantile: dof = " + fmt(dof) + "; expected positive finite dof");
  if (!(p > 0 && p < 1))
    throw InvalidInput("student_t_quantile: p = " + fmt(p) + "; expected 0 < p < 1");
  if (p == 0.5) return 0.0;
  // Solve P(T > t) = q for t >= 0 with q the smaller tail, which is exact for p > 0.5
  // (1 - p has no rounding error there) and keeps precision far in the tails.
  const double q = p < 0.5 ? p : 1.0 - p;
  double lo = 0.0, hi = 1.0;
  while (t_upper_tail(hi, dof) > q) {
    lo = hi;
    hi *= 2.0;
    if (!std::isfinite(hi))
      throw NumericalError("student_t_quantile: no finite quantile for p = " + fmt(p));
  }
  // The tail is monotone in t: bisect down to a relative bracket width of a few ulps.
  for (int it = 0; it < 2000 && hi - lo > 4 * std::numeric_limits<double>::epsilon() * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (t_upper_tail(mid, dof) > q)
      lo = mid;
    else
      hi = mid;
  }
  const double t = 0.5 * (lo + hi);
  return p < 0.5 ? -t : t;
}

Summary summarize(const std::vector<double>& values, double level) {
  if (values.empty()) throw InvalidInput("summarize: no values; expected at least one");
  if (!(level > 0 && level < 1))
    throw InvalidInput("summarize: level = " + fmt(level) + "; expected 0 < level < 1");
  check_finite(values, "values", "summarize");
  Summary s;
  s.count = static_cast<index_t>(values.size());
  const double n = static_cast<double>(values.size());
  for (double v : values) s.mean += v;
  s.mean /= n;
  if (values.size() < 2) {
    s.half_width = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  double ss = 0.0;
  for (double v : values) ss += (v - s.mean) * (v - s.mean);
  const double sd = std::sqrt(ss / (n - 1.0));
  s.half_width = student_t_quantile(0.5 + 0.5 * level, n - 1.0) * sd / std::sqrt(n);
  return s;
}

}  // namespace dcalign::learn
