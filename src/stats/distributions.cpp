// p-values and effect sizes from the t and F distributions (Boost.Math), and the F test that the
// ANOVAs share.
#include <boost/math/distributions/fisher_f.hpp>
#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <string>

#include "dcalign/error.hpp"
#include "dcalign/stats.hpp"
#include "stats/detail.hpp"

namespace dcalign::stats {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void require_df(double df, const char* fn, const char* name) {
  if (!(std::isfinite(df) && df > 0))
    throw InvalidInput(std::string(fn) + ": " + name + " = " + std::to_string(df) +
                       "; expected a finite number of degrees of freedom > 0");
}

void require_F(double F, const char* fn) {
  if (std::isnan(F) || F < 0)
    throw InvalidInput(std::string(fn) + ": F = " + std::to_string(F) +
                       "; expected F >= 0 (not NaN)");
}

// Boost.Math reports failures (its default policy) as std exceptions; they become
// NumericalError here and nowhere else.
template <typename Fn>
double boost_call(const char* what, Fn fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    throw NumericalError(std::string(what) + ": Boost.Math failed: " + e.what());
  }
}

}  // namespace

double p_from_F(double F, double df1, double df2) {
  require_F(F, "p_from_F");
  require_df(df1, "p_from_F", "df1");
  require_df(df2, "p_from_F", "df2");
  if (F == kInf) return 0;
  // The upper tail through complement() keeps its relative accuracy where 1 - cdf would be 0.
  return boost_call("p_from_F", [&] {
    return boost::math::cdf(boost::math::complement(boost::math::fisher_f(df1, df2), F));
  });
}

double f_from_F(double F, double df_effect, double df_error) {
  require_F(F, "f_from_F");
  require_df(df_effect, "f_from_F", "df_effect");
  require_df(df_error, "f_from_F", "df_error");
  return std::sqrt(F * df_effect / df_error);
}

double p_from_t(double t, double df, Alternative alternative) {
  if (std::isnan(t)) throw InvalidInput("p_from_t: t is NaN; expected a number");
  require_df(df, "p_from_t", "df");
  const boost::math::students_t dist(df);
  // Each tail is computed directly (never as 1 - the other) so that small p stay accurate.
  auto upper = [&](double v) {
    if (v == kInf) return 0.0;
    if (v == -kInf) return 1.0;
    return boost_call("p_from_t",
                      [&] { return boost::math::cdf(boost::math::complement(dist, v)); });
  };
  auto lower = [&](double v) {
    if (v == kInf) return 1.0;
    if (v == -kInf) return 0.0;
    return boost_call("p_from_t", [&] { return boost::math::cdf(dist, v); });
  };
  switch (alternative) {
    case Alternative::less:
      return lower(t);
    case Alternative::greater:
      return upper(t);
    case Alternative::two_sided:
      break;
  }
  return std::min(1.0, 2 * upper(std::fabs(t)));
}

namespace detail {

double t_critical(double upper_tail, double df) {
  return boost_call("t_critical", [&] {
    return boost::math::quantile(boost::math::complement(boost::math::students_t(df), upper_tail));
  });
}

void require_finite(double v, const std::string& what, std::size_t i) {
  if (!std::isfinite(v))
    throw InvalidInput(what + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                       "; expected a finite number (NaN and infinity are not observations)");
}

FTest f_test(double ss_effect, double df_effect, double ss_error, double df_error) {
  FTest r;
  if (ss_error == 0) {
    // The 0/0 rule (stats.hpp): no effect and no error is no evidence; an effect with no error
    // is certain.
    if (ss_effect == 0) return r;
    r.F = kInf;
    r.p = 0;
    r.eta_squared = 1;
    r.cohens_f = kInf;
    return r;
  }
  r.F = (ss_effect / df_effect) / (ss_error / df_error);
  r.p = p_from_F(r.F, df_effect, df_error);
  r.eta_squared = ss_effect / (ss_effect + ss_error);
  // sqrt(eta^2 / (1 - eta^2)) without forming 1 - eta^2.
  r.cohens_f = std::sqrt(ss_effect / ss_error);
  if (!std::isfinite(r.F))
    throw NumericalError(
        "F test: the mean squares overflow (ss_effect = " + std::to_string(ss_effect) +
        ", ss_error = " + std::to_string(ss_error) + ")");
  return r;
}

}  // namespace detail
}  // namespace dcalign::stats
