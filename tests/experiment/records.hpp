#pragma once
// Looking up one record of an experiment's result in the tests of the runner.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "dcalign/experiment.hpp"

namespace dcalign::testing {

/// The value of the first record of trial `trial` with this condition ("-" for the baselines and
/// the per-trial records), method and metric, whatever its model; a test failure and NaN when
/// there is none.
inline double record_value(const experiment::Result& r, const std::string& condition,
                           const std::string& method, const std::string& metric,
                           index_t trial = 0) {
  for (const auto& rec : r.records)
    if (rec.trial == trial && rec.condition == condition && rec.method == method &&
        rec.metric == metric)
      return rec.value;
  ADD_FAILURE() << "no record " << condition << " " << method << " " << metric << " in trial "
                << trial + 1;
  return NAN;
}

}  // namespace dcalign::testing
