// Studies on top of the runner: every point of a [sweep] grid runs as its own config (all checked
// before the first trial), then the tests of the [[statistics]] section (statistics.cpp).
#include "dcalign/experiment.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment {

std::size_t check(const Config& config) {
  detail::validate_statistics(config);
  const auto points = sweep_points(config);
  for (const auto& [label, c] : points) detail::prepare_point(c, {});
  return points.size();
}

Result run(const Config& config, const Progress& progress) {
  detail::validate_statistics(config);
  const auto points = sweep_points(config);
  Result res;
  if (config.sweep.empty()) {
    res = detail::run_point(config, progress);
  } else {
    // Every point is checked (its keys, the dataset and the sizes) before the first trial.
    for (const auto& [label, c] : points) detail::prepare_point(c, {});
    res.config = config;
    for (std::size_t k = 0; k < points.size(); ++k) {
      const auto& [label, c] = points[k];
      if (progress)
        progress("point " + std::to_string(k + 1) + " of " + std::to_string(points.size()) + ": " +
                 label);
      Result r = detail::run_point(c, progress);
      for (auto& rec : r.records) {
        rec.point = label;
        res.records.push_back(std::move(rec));
      }
      res.rounds.insert(res.rounds.end(), r.rounds.begin(), r.rounds.end());
      res.wall_seconds += r.wall_seconds;
      res.machine = r.machine;
    }
    res.config = config;
  }
  res.statistics = run_statistics(config, res.records);
  return res;
}

}  // namespace dcalign::experiment
