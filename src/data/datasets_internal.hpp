#pragma once
// The data layer's dataset units: the table and the IDX sets (datasets.cpp), the tabular sets
// (tabular_datasets.cpp) and the Standardizer (standardizer.cpp).
#include <string>
#include <vector>

#include "dcalign/data.hpp"

namespace dcalign::data::detail {

/// The mean of x[0], x[stride], ..., x[(n-1) stride], computed on the values divided by a power
/// of two near the largest magnitude (exact), so that sums near the largest double cannot
/// overflow.
double scaled_mean(const double* x, index_t n, index_t stride);

/// "pixel_<r>_<c>" for every pixel of a rows x cols image, row by row.
std::vector<std::string> pixel_names(index_t rows, index_t cols);
/// "0" to "9".
std::vector<std::string> digit_class_names();

/// The tabular sets, from <dir>/ (the files dataset_files names).
TrainTest load_adult(const std::string& dir, const LoadOptions& opts);
TrainTest load_pima(const std::string& dir, const LoadOptions& opts);
TrainTest load_heart(const std::string& dir, const LoadOptions& opts);
TrainTest load_german(const std::string& dir, const LoadOptions& opts);
TrainTest load_digits(const std::string& dir);
TrainTest load_breast_cancer(const std::string& dir, const LoadOptions& opts);
/// Regression: num_classes = 0, the target a real number.
TrainTest load_diabetes(const std::string& dir, const LoadOptions& opts);

}  // namespace dcalign::data::detail
