#pragma once
// Experiment files written from a string and read with load_config, for the config tests of
// test_experiment and test_nri_dc. One file per test and process: CTest runs cases in parallel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dcalign/experiment.hpp"

namespace dcalign::testing {

/// `toml` written to a file named after the current test (and `tag`); returns its path.
inline std::string write_config(const std::string& toml, const std::string& tag) {
  const auto path = (std::filesystem::temp_directory_path() /
                     ("dcalign_" + tag + "_" + std::to_string(::getpid()) + "_" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".toml"))
                        .string();
  std::ofstream(path) << toml;
  return path;
}

/// load_config on `toml`.
inline experiment::Config load_toml(const std::string& toml) {
  return experiment::load_config(write_config(toml, "config_ok"));
}

/// load_config on `toml` must throw InvalidInput naming the file and containing every fragment.
inline void expect_config_error(const std::string& toml,
                                const std::vector<std::string>& fragments) {
  const std::string path = write_config(toml, "config_bad");
  try {
    experiment::load_config(path);
    ADD_FAILURE() << "no exception for:\n" << toml;
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const auto& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' missing in: " << msg;
  }
}

/// experiment::run(c) must throw InvalidInput containing `fragment`, within `max_seconds` (the
/// checks run before any data is drawn or trained on).
inline void expect_run_error(const experiment::Config& c, const std::string& fragment,
                             double max_seconds = 5.0) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    experiment::run(c);
    ADD_FAILURE() << "no exception for " << fragment;
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
            max_seconds)
      << fragment;
}

}  // namespace dcalign::testing
