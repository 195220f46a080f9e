#pragma once
// Helpers shared by the statistics sources (not installed).
#include <cstddef>
#include <string>

namespace dcalign::stats::detail {

/// Throws InvalidInput when v is NaN or infinite, naming `what` and index i.
void require_finite(double v, const std::string& what, std::size_t i);

/// The t with P(T_df >= t) = upper_tail (Boost.Math's quantile; failures as NumericalError).
double t_critical(double upper_tail, double df);

/// F test of an effect against an error term, with the 0/0 rule of stats.hpp.
struct FTest {
  double F = 0;
  double p = 1;
  double eta_squared = 0;  ///< ss_effect / (ss_effect + ss_error)
  double cohens_f = 0;     ///< sqrt(ss_effect / ss_error)
};
FTest f_test(double ss_effect, double df_effect, double ss_error, double df_error);

}  // namespace dcalign::stats::detail
