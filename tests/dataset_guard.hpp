#pragma once
// Tests that read the real datasets (../shared/datasets, or $DCALIGN_DATA) skip visibly where
// those files are absent, naming what is missing; under CI=true the same absence is a failure,
// so that a CI run cannot pass with the dataset checks silently skipped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace dcalign::testing {

/// True when the environment says this is a CI run (CI=true or CI=1, as CI services set it).
inline bool ci_requires_datasets() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string v(ci);
  return v == "true" || v == "TRUE" || v == "True" || v == "1";
}

}  // namespace dcalign::testing

/// In a test body: when `missing` holds, fail under CI=true and skip otherwise, with `what`
/// (a stream expression) saying which files are missing and how to get them.
#define DCALIGN_REQUIRE_DATASET(missing, what)                                  \
  do {                                                                          \
    if (missing) {                                                              \
      if (::dcalign::testing::ci_requires_datasets())                           \
        FAIL() << what << " (CI=true: the datasets are required, not skipped)"; \
      GTEST_SKIP() << what;                                                     \
    }                                                                           \
  } while (0)
