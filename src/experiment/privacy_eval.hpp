#pragma once
// The privacy measurements on what the users release (the collusion attack, the epsilon-DR
// ratios, what the defence dropped) and the DP noise of a released X_i F_i: a type of its own,
// holding what it needs of the run (the Config, whether the protocol is NRI-DC, the DP sigma).
#include <string>
#include <vector>

#include "dcalign/experiment.hpp"
#include "dcalign/privacy_attacks.hpp"
#include "dcalign/user.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment::detail {

/// What the evaluator holds of one user's release for the privacy measurements.
struct ReleaseView {
  const Matrix<double>* data;    ///< X~_j as released (after the defence, noise, P_j)
  const Matrix<double>* anchor;  ///< A~_j
  const Matrix<double>* basis;   ///< F_j, never released
  /// Released row k is row origin[k] of the user's rows; empty: all of them, in order.
  std::vector<index_t> origin;
};

class PrivacyEvaluator {
 public:
  /// `dp_sigma`: the AGM sigma for Delta = dp_row_range (0 without DP).
  PrivacyEvaluator(const Config& c, bool nri, double dp_sigma)
      : c_(c), nri_(nri), dp_sigma_(dp_sigma) {}
  /// Per trial and condition ("-" for NRI-DC), after the releases: the collusion attack of
  /// user 1 and the analyst on every other user, the epsilon-DR ratios of every user's rows
  /// under its own basis, and what the defence dropped. `clean`: each user's training rows as
  /// it holds them, before "raw" noise and the defence.
  void measure(index_t t, const std::string& condition, const std::vector<Matrix<double>>& clean,
               const std::vector<ReleaseView>& views, const CollusionAttacker* attacker,
               std::vector<Record>& out) const;
  /// sigma_i for user i's released X_i F_i.
  double released_sigma(const User<double>& user, SpanCondition cond) const;

 private:
  const Config& c_;
  bool nri_;
  double dp_sigma_;
};

}  // namespace dcalign::experiment::detail
