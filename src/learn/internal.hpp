#pragma once
// Pieces shared by the learning-layer translation units. LibTorch is confined to
// torch_models.cpp, LIBSVM to svm.cpp and svm_rbf.cpp, and XGBoost to forest.cpp; this header
// includes none.
#include <memory>
#include <string>
#include <vector>

#include "dcalign/learn.hpp"

namespace dcalign::learn::detail {

// Constructors of the concrete models; options are validated by make_model() beforehand,
// except the device, which only the LibTorch side can check.
std::unique_ptr<Model> make_mlp(const ModelOptions& options);
std::unique_ptr<Model> make_logreg(const ModelOptions& options);
std::unique_ptr<Model> make_svm(const ModelOptions& options);
std::unique_ptr<Model> make_knn(const ModelOptions& options);
std::unique_ptr<Model> make_forest(const ModelOptions& options);
std::unique_ptr<Model> make_linear(const ModelOptions& options);

/// `inner` behind ModelOptions::standardize_target: regression fits see standardised targets,
/// predictions come back in the targets' units. fit_fedavg passes a trained central model with
/// the scaling it was trained under (mean, sd).
std::unique_ptr<Model> scale_targets(std::unique_ptr<Model> inner);
std::unique_ptr<Model> scale_targets(std::unique_ptr<Model> inner, int num_features, double mean,
                                     double sd);
/// A read-only view of the trained `inner` in the targets' units (it must outlive the view).
std::unique_ptr<Model> scaled_view(const Model& inner, int num_features, double mean, double sd);
/// Mean and standard deviation (population; 1 where it is 0) of the targets of every client.
void target_moments(const std::vector<std::vector<double>>& y, double& mean, double& sd);

// The checks of Model::fit on a training set (shape, finite features, valid labels), with
// `where` leading every message; and make_model's check of the options of model `kind`.
void check_training_data(const Matrix<double>& X, const std::vector<double>& y, int num_classes,
                         const std::string& where);
void validate_options(const std::string& kind, const ModelOptions& options);

/// LIBSVM's svm_predict row by row on a model from make_svm (which predicts through
/// RbfPredictor, svm_rbf.hpp); the tests compare the two.
std::vector<double> svm_predict_with_libsvm(const Model& svm, const Matrix<double>& X);
/// Whether that model predicts through RbfPredictor (false: through svm_predict).
bool svm_predicts_in_blocks(const Model& svm);

// ModelOptions::threads resolved: the given count, or all hardware threads when it is 0.
int resolve_threads(int requested);

}  // namespace dcalign::learn::detail
