#include <nlohmann/json.hpp>

#include <cmath>

#include "dcalign/align.hpp"

namespace dcalign {

void AlignReport::add_phase(const std::string& name, double s) {
  seconds.emplace_back(name, s);
  total_seconds += s;
}

std::string AlignReport::to_json(int indent) const {
  nlohmann::ordered_json j;
  j["method"] = method;
  j["device"] = device;
  j["precision"] = precision;
  j["users"] = users;
  j["anchor_rows"] = anchor_rows;
  j["dim"] = dim;
  j["evaluated"] = evaluated;
  // JSON has no NaN: metrics that were not computed are null.
  auto metric = [&](double v) { return evaluated ? nlohmann::ordered_json(v) : nullptr; };
  j["objective"] = metric(objective);
  j["consensus_objective"] =
      std::isnan(consensus_objective) ? nullptr : metric(consensus_objective);
  j["orthogonality_error"] = metric(orthogonality_error);
  j["constraint_error"] = metric(constraint_error);
  j["min_rank_ratio"] = min_rank_ratio;
  if (!svd.empty()) j["svd"] = svd;
  j["iterations"] = iterations;
  j["promoted_users"] = promoted_users;
  j["converged"] = converged;
  j["stop_reason"] =
      stop_reason.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(stop_reason);
  j["gradient_norm"] = std::isnan(gradient_norm) ? nullptr : nlohmann::ordered_json(gradient_norm);
  if (!objective_history.empty()) j["objective_history"] = objective_history;
  j["blas"] = {{"library", blas.library}, {"kernels", blas.kernels}, {"chosen_by", blas.chosen_by},
               {"reason", blas.reason},   {"cpu", blas.cpu},         {"threads", blas.threads}};
  nlohmann::ordered_json s = nlohmann::ordered_json::object();
  for (const auto& [name, sec] : seconds) s[name] = sec;
  s["total"] = total_seconds;
  j["seconds"] = s;
  return j.dump(indent);
}

}  // namespace dcalign
