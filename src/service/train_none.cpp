// train.hpp without the learning layer: only "none".
#include "dcalign/error.hpp"
#include "service/train.hpp"

namespace dcalign::service {

void check_model_spec(const v1::CollaborationSpec& spec) {
  if (spec.model() != "none")
    throw InvalidInput("spec.model '" + spec.model() +
                       "' is not available: this server was built without the learning layer "
                       "(expected \"none\")");
  if (spec.num_classes() != 0)
    throw InvalidInput("spec.num_classes must be 0 when spec.model is \"none\"");
}

nlohmann::json train_model(const v1::CollaborationSpec&, const std::vector<Matrix<double>>&,
                           const std::vector<Matrix<double>>&, const std::filesystem::path&) {
  throw Error("this server was built without the learning layer");
}

}  // namespace dcalign::service
