#pragma once
// The model h of a collaboration: trained by the job on the stacked X~_i G_i with the labels
// y_i, saved in the learning layer's format (include/dcalign/learn.hpp, Model::save) so that
// each participant predicts with `dcalign predict`. Built only with the learning layer
// (train.cpp); without it (train_none.cpp) a spec that asks for a model is refused.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "dcalign/matrix.hpp"
#include "dcalign/service/v1/analyst.pb.h"

namespace dcalign::service {

/// Throws InvalidInput unless the spec's model and num_classes are ones this server trains:
/// "none" with num_classes 0, or a model of the learning layer that takes the task
/// (num_classes 0: regression; 2 to 1000: classification).
void check_model_spec(const v1::CollaborationSpec& spec);

/// Fits h on the rows of every X[i] (the aligned X~_i G_i) with labels y[i] (n_i x 1) and saves
/// it as the directory `dir`. Returns a summary for the job's report.
nlohmann::json train_model(const v1::CollaborationSpec& spec, const std::vector<Matrix<double>>& X,
                           const std::vector<Matrix<double>>& y, const std::filesystem::path& dir);

}  // namespace dcalign::service
