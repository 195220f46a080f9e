// train.hpp with the learning layer (LibTorch, LIBSVM, XGBoost).
#include <algorithm>
#include <cmath>

#include "dcalign/error.hpp"
#include "dcalign/learn.hpp"
#include "service/train.hpp"

namespace dcalign::service {

namespace {
constexpr std::uint32_t kMaxClasses = 1000;
}

void check_model_spec(const v1::CollaborationSpec& spec) {
  const std::string& kind = spec.model();
  const std::uint32_t k = spec.num_classes();
  if (kind == "none") {
    if (k != 0) throw InvalidInput("spec.num_classes must be 0 when spec.model is \"none\"");
    return;
  }
  const auto names = learn::model_names();
  if (std::find(names.begin(), names.end(), kind) == names.end()) {
    std::string list = "none";
    for (const auto& n : names) list += ", " + n;
    throw InvalidInput("spec.model '" + kind + "' is not a model: expected one of " + list);
  }
  // Privacy: every participant fetches h. A kind whose saved state keeps training rows would hand
  // each participant the others' aligned rows X~_j G_j; its own F_i G_i maps into that same
  // space, so it could recover their private X_j. Such kinds are refused, with no opt-in.
  if (const std::string kept = learn::model_training_data(kind); !kept.empty()) {
    std::string allowed;
    for (const auto& n : names)
      if (learn::model_training_data(n).empty()) allowed += (allowed.empty() ? "" : ", ") + n;
    throw InvalidInput("spec.model '" + kind + "' is refused: a saved " + kind + " model keeps " +
                       kept + ", and every participant fetches the model, so each would receive " +
                       "the other participants' aligned data (and with its own basis, their " +
                       "private rows). Expected a model without training rows: none, " + allowed);
  }
  if (k == 1 || k > kMaxClasses)
    throw InvalidInput("spec.num_classes " + std::to_string(k) +
                       " is out of range: expected 0 (regression) or 2 to " +
                       std::to_string(kMaxClasses) + " (classification)");
  if (!learn::make_model(kind)->can_fit(static_cast<int>(k)))
    throw InvalidInput("spec.model '" + kind + "' does not do " +
                       (k == 0 ? std::string("regression") : std::string("classification")));
}

nlohmann::json train_model(const v1::CollaborationSpec& spec, const std::vector<Matrix<double>>& X,
                           const std::vector<Matrix<double>>& y, const std::filesystem::path& dir) {
  index_t rows = 0;
  for (const auto& m : X) rows += m.rows();
  const index_t l = X.front().cols();
  Matrix<double> all(rows, l);
  std::vector<double> labels;
  labels.reserve(static_cast<std::size_t>(rows));
  index_t at = 0;
  for (std::size_t i = 0; i < X.size(); ++i) {
    for (index_t j = 0; j < l; ++j)
      for (index_t r = 0; r < X[i].rows(); ++r) all(at + r, j) = X[i](r, j);
    at += X[i].rows();
    labels.insert(labels.end(), y[i].data(), y[i].data() + y[i].rows());
  }
  learn::ModelOptions opts;
  opts.seed = spec.seed();
  opts.standardize_target = spec.num_classes() == 0;
  auto model = learn::make_model(spec.model(), opts);
  model->fit(all, labels, static_cast<int>(spec.num_classes()));
  model->save(dir.string());
  // The fit on (at most kScoreRows evenly spaced) training rows, as a first sanity figure for
  // the analyst; bounded because k-NN's prediction costs rows x training rows.
  constexpr index_t kScoreRows = 2000;
  const index_t step = std::max<index_t>(1, rows / kScoreRows);
  const index_t m = (rows + step - 1) / step;
  Matrix<double> sample(m, l);
  std::vector<double> truth(static_cast<std::size_t>(m));
  for (index_t k = 0; k < m; ++k) {
    for (index_t j = 0; j < l; ++j) sample(k, j) = all(k * step, j);
    truth[static_cast<std::size_t>(k)] = labels[static_cast<std::size_t>(k * step)];
  }
  const std::vector<double> predicted = model->predict(sample);
  double score = 0;
  for (std::size_t k = 0; k < truth.size(); ++k) {
    const double d = predicted[k] - truth[k];
    score += spec.num_classes() == 0 ? d * d : (d == 0 ? 1.0 : 0.0);
  }
  score /= static_cast<double>(truth.size());
  nlohmann::json out = {{"kind", spec.model()},
                        {"num_classes", spec.num_classes()},
                        {"samples", rows},
                        {"features", l},
                        {"scored_rows", m}};
  if (spec.num_classes() == 0)
    out["training_rmse"] = std::sqrt(score);
  else
    out["training_accuracy"] = score;
  return out;
}

}  // namespace dcalign::service
