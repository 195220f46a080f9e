// Paper 001's communication model against what an experiment run exchanges: each protocol's
// prediction, with its own model's parameter count (DC's h on the l aligned features, FedAvg's
// MLP on the m raw ones), equals the bytes the run counts from the arrays and tensors it sends.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "dcalign/comm.hpp"
#include "dcalign/experiment.hpp"

namespace dcalign {
namespace {

// 4 users of 50 synthetic rows (64 features, 10 classes), a = 80, l = 10; DC with an MLP and a
// logistic regression as h; FedAvg for 3 rounds at p = 0.5 (2 clients a round).
experiment::Config small_run() {
  experiment::Config c;
  c.name = "comm_sizes";
  c.dataset = "synthetic";
  c.users = 4;
  c.samples_per_user = 50;
  c.test_samples = 200;
  c.anchor_rows = 80;
  c.dim = 10;
  c.conditions = {SpanCondition::same_span_orth};
  c.methods = {"odc", "fedavg"};
  c.models = {"mlp", "logreg"};
  c.metrics = {"accuracy"};
  c.fedavg_configurations = {"1E16B"};
  c.fedavg_rounds = 3;
  c.fedavg_participation = 0.5;
  c.trials = 1;
  c.seed = 11;
  c.threads = 1;
  c.model_options.mlp.hidden_layers = {16};
  c.model_options.mlp.early_stopping = false;
  c.model_options.mlp.max_epochs = 2;
  return c;
}

TEST(CommExperiment, PredictedBytesUseEachProtocolsModelSize) {
  const auto res = experiment::run(small_run());
  std::map<std::tuple<std::string, std::string, std::string>, double> v;  // method, model, metric
  for (const auto& r : res.records) v[{r.method, r.model, r.metric}] = r.value;
  const auto at = [&v](const std::string& method, const std::string& model,
                       const std::string& metric) {
    const auto it = v.find({method, model, metric});
    EXPECT_NE(it, v.end()) << method << " " << model << " " << metric;
    return it == v.end() ? -1.0 : it->second;
  };
  // Parameter counts, by hand: FedAvg's MLP 64 -> 16 -> 10; DC's MLP 10 -> 16 -> 10 and its
  // logistic regression 10 -> 10.
  const double n_fl = (64 * 16 + 16) + (16 * 10 + 10);                                   // 1210
  const std::map<std::string, double> n_dc = {{"mlp", (10 * 16 + 16) + (16 * 10 + 10)},  // 346
                                              {"logreg", 10 * 10 + 10}};                 // 110

  // One model of both protocols, each with its own size. DC's arrays are doubles (q = 64), with
  // a seeded anchor (gamma = 0).
  CommModel cm;
  cm.users = 4;
  cm.samples = {50, 50, 50, 50};
  cm.anchor_rows = 80;
  cm.features = 64;
  cm.dim = 10;
  cm.bits = 64;
  cm.gamma = 0;
  cm.fl_model_parameters = n_fl;
  cm.participation = 0.5;
  cm.rounds = 3;
  for (const auto& [kind, n] : n_dc) {
    cm.dc_model_parameters = n;
    const CommEstimate e = estimate_communication(cm);
    EXPECT_DOUBLE_EQ(at("odc", kind, "predicted_bytes"), e.dc_bytes) << kind;
    // Counted: G_i (10 x 10) and h to each user, as doubles: eq. 11 exactly.
    EXPECT_DOUBLE_EQ(at("odc", kind, "downlink_bytes"), e.downlink_bytes) << kind;
    EXPECT_DOUBLE_EQ(at("odc", kind, "downlink_bytes"), 4 * (10 * 10 + n) * 8) << kind;
    // Counted uplink: eq. 10 plus the labels (8 bytes a training row), which eq. 14 leaves out.
    EXPECT_DOUBLE_EQ(at("odc", kind, "uplink_bytes"), e.uplink_bytes + 8 * 200) << kind;
    EXPECT_DOUBLE_EQ(at("odc", kind, "uplink_bytes"), 8.0 * (4 * (50 + 80) * 10 + 200)) << kind;
    // FedAvg's size in eq. 11 would overstate DC's downlink by 4 (n_fl - n) doubles.
    CommModel one_n = cm;
    one_n.dc_model_parameters.reset();
    one_n.fl_model_parameters.reset();
    one_n.model_parameters = n_fl;
    EXPECT_DOUBLE_EQ(estimate_communication(one_n).dc_bytes - e.dc_bytes, 4 * (n_fl - n) * 8);
  }
  // FedAvg moves float32 tensors: eq. 15 at q = 32 with N_FL, 2 R p c N_FL 4 bytes, split evenly
  // between the two directions.
  cm.bits = 32;
  const CommEstimate fl = estimate_communication(cm);
  const std::string fed = "fedavg-1E16B";
  EXPECT_DOUBLE_EQ(at(fed, "mlp", "predicted_bytes"), fl.fl_bytes);
  EXPECT_DOUBLE_EQ(fl.fl_bytes, 2 * 3 * 0.5 * 4 * n_fl * 4);
  EXPECT_DOUBLE_EQ(at(fed, "mlp", "uplink_bytes") + at(fed, "mlp", "downlink_bytes"), fl.fl_bytes);
  EXPECT_DOUBLE_EQ(at(fed, "mlp", "uplink_bytes"), 3 * 2 * n_fl * 4);
  EXPECT_DOUBLE_EQ(at(fed, "mlp", "downlink_bytes"), 3 * 2 * n_fl * 4);
  double counted = 0;  // the per-round curves count the same tensors
  for (const auto& rr : res.rounds) counted += rr.uplink_bytes + rr.downlink_bytes;
  EXPECT_DOUBLE_EQ(counted, fl.fl_bytes);
}

}  // namespace
}  // namespace dcalign
