// The privacy measurements on what the users release (the collusion attack, the epsilon-DR
// ratios, what the defence dropped) and the DP noise of a released X_i F_i.
#include <algorithm>
#include <cmath>

#include "dcalign/privacy.hpp"
#include "experiment/privacy_eval.hpp"

namespace dcalign::experiment::detail {

void PrivacyEvaluator::measure(index_t t, const std::string& condition,
                               const std::vector<Matrix<double>>& clean,
                               const std::vector<ReleaseView>& views,
                               const CollusionAttacker* attacker, std::vector<Record>& out) const {
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return quantile_sorted(v, 0.5);
  };
  const auto record = [&](const char* metric, double v) {
    out.push_back({t, condition, "privacy", "-", metric, v, 0});
  };
  if (attacker) {
    const auto t0 = Clock::now();
    std::vector<double> frobenius, rows, identified;
    for (index_t j = 1; j < c_.users; ++j) {
      const ReleaseView& v = views[static_cast<size_t>(j)];
      const Matrix<double> Xh = attacker->reconstruct(*v.anchor, *v.data);
      // The evaluator knows which row each released row is (NRI-DC: P_j; DC: the rows kept).
      const auto e = reconstruction_error(
          v.origin.empty() ? clean[j] : data::take_rows(clean[j], v.origin), Xh);
      frobenius.push_back(e.relative);
      rows.push_back(e.median_row);
      // The attacker does not: can it pair each reconstruction with its true row?
      if (nri_) identified.push_back(match_rows(clean[j], Xh, v.origin).identified_fraction);
    }
    const double secs = since(t0);
    out.push_back({t, condition, "privacy", "-", "collusion_error", median(frobenius), secs});
    record("collusion_row_error", median(rows));
    if (nri_) record("collusion_identified", median(identified));
  }
  if (c_.measures("dr")) {
    double fraction = 0, lowest = 1;
    std::vector<double> medians;
    for (index_t i = 0; i < c_.users; ++i) {
      const auto s =
          dr_privacy(clean[i], *views[static_cast<size_t>(i)].basis, c_.privacy_dr_epsilon);
      fraction += s.fraction_below;
      lowest = std::min(lowest, s.min);
      medians.push_back(s.median);
    }
    record("dr_fraction_below", fraction / static_cast<double>(c_.users));
    record("dr_min_ratio", lowest);
    record("dr_median_ratio", median(medians));
  }
  if (c_.privacy_defence) {
    index_t dropped = 0, total = 0;
    for (index_t i = 0; i < c_.users; ++i) {
      total += clean[i].rows();
      dropped += clean[i].rows() - views[static_cast<size_t>(i)].data->rows();
    }
    record("dr_dropped_rows", static_cast<double>(dropped));
    record("dr_dropped_fraction", static_cast<double>(dropped) / static_cast<double>(total));
  }
}

// sigma_i for user i's released X_i F_i: Delta_i = r ||F_i||_2 (paper 000, eq. 4), which is r
// for orthonormal F_i.
double PrivacyEvaluator::released_sigma(const User<double>& user, SpanCondition cond) const {
  if (orthonormal_mixing(cond)) return dp_sigma_;
  const Matrix<double>& F = user.reveal_secret_basis();  // the user's own, never released
  const Matrix<double> v = top_right_singular_vectors(F, 1, false);
  double norm2 = 0;
  for (index_t i = 0; i < F.rows(); ++i) {
    double fv = 0;
    for (index_t j = 0; j < F.cols(); ++j) fv += F(i, j) * v(j, 0);
    norm2 += fv * fv;
  }
  return analytic_gaussian_sigma(c_.dp_epsilon, c_.dp_delta, c_.dp_row_range * std::sqrt(norm2));
}

}  // namespace dcalign::experiment::detail
