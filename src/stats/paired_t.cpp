// Paired t-test and paired Cohen's d_z (001 section 8, Tables 13-14).
#include <cmath>
#include <limits>
#include <string>

#include "dcalign/error.hpp"
#include "dcalign/stats.hpp"
#include "stats/detail.hpp"

namespace dcalign::stats {

PairedTTest paired_t_test(const std::vector<double>& x, const std::vector<double>& y,
                          Alternative alternative, double confidence) {
  if (x.size() != y.size())
    throw InvalidInput("paired_t_test: x has " + std::to_string(x.size()) + " values and y has " +
                       std::to_string(y.size()) + "; expected one y for each x (paired samples)");
  if (x.size() < 2)
    throw InvalidInput("paired_t_test: " + std::to_string(x.size()) +
                       " pairs; expected at least 2 (the standard deviation needs n - 1 >= 1)");
  if (!(confidence > 0 && confidence < 1))
    throw InvalidInput("paired_t_test: confidence level " + std::to_string(confidence) +
                       "; expected a level in (0, 1), such as 0.95");
  const std::size_t n = x.size();
  std::vector<double> d(n);
  for (std::size_t i = 0; i < n; ++i) {
    detail::require_finite(x[i], "paired_t_test: x", i);
    detail::require_finite(y[i], "paired_t_test: y", i);
    d[i] = x[i] - y[i];
    if (!std::isfinite(d[i]))
      throw InvalidInput("paired_t_test: x[" + std::to_string(i) + "] - y[" + std::to_string(i) +
                         "] overflows; expected values whose difference is finite");
  }

  PairedTTest r;
  r.n = n;
  r.df = static_cast<double>(n - 1);
  r.alternative = alternative;
  r.confidence = confidence;

  bool constant = true;  // all differences identical: s_d is exactly 0 (the 0/0 rule)
  for (std::size_t i = 1; i < n && constant; ++i) constant = d[i] == d[0];
  if (constant) {
    r.mean_diff = d[0];
    r.sd_diff = 0;
    r.ci_lower = r.ci_upper = d[0];
    if (d[0] == 0) {
      r.t = r.cohens_dz = 0;
      r.p = 1;
    } else {
      r.t = r.cohens_dz = std::copysign(std::numeric_limits<double>::infinity(), d[0]);
      r.p = p_from_t(r.t, r.df, alternative);
    }
    return r;
  }

  // Two passes: the mean, then the squared deviations from it (no cancellation of sum d^2).
  double sum = 0;
  for (double v : d) sum += v;
  r.mean_diff = sum / static_cast<double>(n);
  double ss = 0;
  for (double v : d) ss += (v - r.mean_diff) * (v - r.mean_diff);
  r.sd_diff = std::sqrt(ss / r.df);
  if (!std::isfinite(r.mean_diff) || !std::isfinite(r.sd_diff))
    throw InvalidInput(
        "paired_t_test: the mean or standard deviation of the differences "
        "overflows; expected differences below about 1e150 in magnitude");
  const double se = r.sd_diff / std::sqrt(static_cast<double>(n));
  r.t = r.mean_diff / se;
  r.cohens_dz = r.mean_diff / r.sd_diff;
  r.p = p_from_t(r.t, r.df, alternative);
  const double q = detail::t_critical((1 - confidence) / 2, r.df);
  r.ci_lower = r.mean_diff - q * se;
  r.ci_upper = r.mean_diff + q * se;
  return r;
}

Alternative parse_alternative(const std::string& name) {
  if (name == "two-sided") return Alternative::two_sided;
  if (name == "less") return Alternative::less;
  if (name == "greater") return Alternative::greater;
  throw InvalidInput("unknown alternative '" + name + "'; expected two-sided, less or greater");
}

}  // namespace dcalign::stats
