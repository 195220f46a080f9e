// FedAvg as a method of the experiment runner: one record per configuration, the per-round
// curves, the bytes counted against paper 001's communication model, and the [fedavg] keys,
// whose bad values fail before any training.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "dcalign/comm.hpp"
#include "dcalign/experiment.hpp"
#include "experiment/config_files.hpp"

namespace dcalign {
namespace {

experiment::Config synthetic_fedavg() {
  experiment::Config c;
  c.name = "fedavg_smoke";
  c.dataset = "synthetic";  // 64 features, 10 classes, generated
  c.users = 3;
  c.samples_per_user = 60;
  c.test_samples = 300;
  c.anchor_rows = 100;
  c.dim = 10;
  c.conditions = {SpanCondition::same_span_orth};
  c.methods = {"central", "odc", "fedavg"};
  c.models = {"mlp", "knn"};
  c.metrics = {"accuracy"};
  c.fedavg_configurations = {"1E16B", "2E16B"};
  c.fedavg_rounds = 4;
  c.trials = 2;
  c.seed = 3;
  c.threads = 1;
  c.model_options.mlp.hidden_layers = {16, 8};
  c.model_options.mlp.early_stopping = false;
  c.model_options.mlp.max_epochs = 4;
  c.model_options.mlp.learning_rate = 1e-2;  // few steps per client: a larger step learns
  return c;
}

TEST(FedAvgExperiment, RecordsCurvesAndCountedBytes) {
  const auto c = synthetic_fedavg();
  const auto res = experiment::run(c);
  // (trial, method, model, metric) -> value
  std::map<std::tuple<index_t, std::string, std::string, std::string>, double> v;
  for (const auto& r : res.records) v[{r.trial, r.method, r.model, r.metric}] = r.value;
  const auto at = [&v](index_t t, const std::string& method, const std::string& model,
                       const std::string& metric) {
    return v[{t, method, model, metric}];
  };
  // MLP: 64 -> 16 -> 8 -> 10 (FedAvg on the raw rows); float32 tensors.
  const double N = (64 * 16 + 16) + (16 * 8 + 8) + (8 * 10 + 10);
  for (index_t t = 0; t < 2; ++t) {
    for (const std::string m : {"fedavg-1E16B", "fedavg-2E16B"}) {
      ASSERT_TRUE(v.count({t, m, "mlp", "accuracy"})) << m;
      const double acc = at(t, m, "mlp", "accuracy");
      EXPECT_GT(acc, 0.4) << m;  // well above chance (0.1) on the synthetic classes
      EXPECT_LE(acc, 1.0);
      // R rounds x c clients x N floats, each way; the prediction of eq. 15 is the same.
      EXPECT_EQ(at(t, m, "mlp", "uplink_bytes"), 4 * 3 * N * 4);
      EXPECT_EQ(at(t, m, "mlp", "downlink_bytes"), 4 * 3 * N * 4);
      EXPECT_DOUBLE_EQ(at(t, m, "mlp", "predicted_bytes"), 2 * 4 * 3 * N * 4);
    }
    EXPECT_FALSE(v.count({t, "fedavg-1E16B", "knn", "accuracy"}));  // FedAvg trains its MLP only
    // DC with the MLP as h: the arrays it exchanged (doubles) are eq. 14's bytes at q = 64 with
    // no anchor transfer, plus the labels (8 bytes per training row), which eq. 14 leaves out.
    CommModel cm;
    cm.users = 3;
    cm.samples = {60, 60, 60};
    cm.anchor_rows = 100;
    cm.features = 64;
    cm.dim = 10;
    cm.bits = 64;
    cm.gamma = 0;
    cm.model_parameters = (10 * 16 + 16) + (16 * 8 + 8) + (8 * 10 + 10);  // h on l = 10 features
    const double predicted = estimate_communication(cm).dc_bytes;
    const std::string cond = "SameSpan-Orth";
    std::map<std::string, double> dc;
    for (const auto& r : res.records)
      if (r.trial == t && r.condition == cond && r.method == "odc" && r.model == "mlp")
        dc[r.metric] = r.value;
    EXPECT_DOUBLE_EQ(dc.at("predicted_bytes"), predicted);
    EXPECT_DOUBLE_EQ(dc.at("uplink_bytes") + dc.at("downlink_bytes"), predicted + 8 * 180);
    EXPECT_DOUBLE_EQ(dc.at("uplink_bytes"), 8.0 * (3 * (60 * 10 + 100 * 10) + 180));
  }
  // Curves: trials x configurations x rounds, in order, with the counted bytes per round.
  ASSERT_EQ(res.rounds.size(), 2u * 2u * 4u);
  for (size_t k = 0; k < res.rounds.size(); ++k) {
    const auto& rr = res.rounds[k];
    EXPECT_EQ(rr.round, static_cast<int>(k % 4) + 1);
    EXPECT_EQ(rr.trial, static_cast<index_t>(k / 8));
    EXPECT_EQ(rr.method, (k / 4) % 2 ? "fedavg-2E16B" : "fedavg-1E16B");
    EXPECT_TRUE(std::isfinite(rr.train_loss) && rr.train_loss > 0);
    EXPECT_TRUE(rr.train_accuracy >= 0 && rr.train_accuracy <= 1);
    EXPECT_EQ(rr.uplink_bytes, 3 * N * 4);
  }
  // The last round's test value is the method's record (the same model, scored the same way).
  EXPECT_DOUBLE_EQ(res.rounds[3].test_value, (at(0, "fedavg-1E16B", "mlp", "accuracy")));
  // Training on 2 local epochs per round fits the training rows at least as well by the end.
  EXPECT_LT(res.rounds[7].train_loss, res.rounds[3].train_loss);
  // The summary shows the FedAvg columns and the communication table.
  const std::string md = experiment::summary_table(res);
  EXPECT_NE(md.find("| fedavg-1E16B | fedavg-2E16B |"), std::string::npos) << md;
  EXPECT_NE(md.find("### Communication"), std::string::npos) << md;
}

TEST(FedAvgExperiment, OneUserOneRoundIsCentralsMlp) {
  // Central fits the MLP on the same rows from the same seed: with one user, one round and
  // E = max_epochs, FedAvg is the same training.
  auto c = synthetic_fedavg();
  c.users = 1;
  c.samples_per_user = 120;
  c.methods = {"central", "fedavg"};
  c.models = {"mlp"};
  c.fedavg_configurations = {"4E32B"};
  c.fedavg_rounds = 1;
  c.model_options.mlp.batch_size = 32;
  c.model_options.mlp.n_iter_no_change = 100;
  c.trials = 1;
  const auto res = experiment::run(c);
  double central = -1, fed = -2;
  for (const auto& r : res.records) {
    if (r.metric != "accuracy") continue;
    if (r.method == "central") central = r.value;
    if (r.method == "fedavg-4E32B") fed = r.value;
  }
  EXPECT_EQ(central, fed);
}

TEST(FedAvgExperiment, BadFedAvgSettingsFailBeforeTraining) {
  using testing::expect_config_error;
  const std::string base =
      "dataset = \"synthetic\"\nusers = 3\nsamples_per_user = 60\ntest_samples = 300\n"
      "anchor_rows = 100\ndim = 10\nmethods = [\"central\", \"fedavg\"]\n";
  expect_config_error(base + "[fedavg]\nparticipation = 0\n", {"fedavg.participation", "(0, 1]"});
  expect_config_error(base + "[fedavg]\nparticipation = 1.5\n", {"fedavg.participation"});
  expect_config_error(base + "[fedavg]\nrounds = 0\n", {"fedavg.rounds", "from 1"});
  expect_config_error(base + "[fedavg]\nconfigurations = [\"1E0B\"]\n",
                      {"fedavg.configurations", "1E0B"});
  expect_config_error(base + "[fedavg]\nconfigurations = [\"32B\"]\n", {"32B", "malformed"});
  expect_config_error(base + "[fedavg]\nconfigurations = []\n", {"fedavg.configurations"});
  expect_config_error(base + "[fedavg]\nlocal_epochs = 2\n", {"unknown key 'fedavg.local_epochs'"});
  expect_config_error(base + "fedavg = 3\n", {"key 'fedavg' must be a table"});
  expect_config_error("dataset = \"synthetic\"\nmethods = [\"central\"]\n[fedavg]\nrounds = 2\n",
                      {"key 'fedavg'", "unless \"fedavg\" is in methods"});
  expect_config_error(
      "dataset = \"synthetic\"\nprotocol = \"nri-dc\"\nmethods = [\"odc\", \"fedavg\"]\n",
      {"key 'methods'", "needs protocol \"dc\""});
  expect_config_error(base + "mlp_hidden_layers = [512, 0]\n", {"mlp_hidden_layers", "from 1"});
  expect_config_error(base + "mlp_hidden = 5\nmlp_hidden_layers = [4]\n", {"mlp_hidden_layers"});
  expect_config_error(base + "svm_gamma = 0\n", {"svm_gamma"});

  // Read correctly.
  const auto c = testing::load_toml(base +
                                    "mlp_hidden_layers = [512, 128]\nmlp_n_iter_no_change = 30\n"
                                    "svm_gamma = 0.01\n[fedavg]\nconfigurations = [\"1E32B\", "
                                    "\"3E32B\"]\nrounds = 24\nparticipation = 0.5\n");
  EXPECT_EQ(c.fedavg_configurations, (std::vector<std::string>{"1E32B", "3E32B"}));
  EXPECT_EQ(c.fedavg_rounds, 24);
  EXPECT_EQ(c.fedavg_participation, 0.5);
  EXPECT_EQ(c.model_options.mlp.hidden_layers, (std::vector<int>{512, 128}));
  EXPECT_EQ(c.model_options.mlp.n_iter_no_change, 30);
  EXPECT_EQ(c.model_options.svm.gamma, 0.01);
  EXPECT_EQ(experiment::parse_fedavg_configuration("3E32B"), (std::pair<int, int>{3, 32}));

  // A Config built in code is checked by run() before any trial.
  auto bad = synthetic_fedavg();
  bad.fedavg_participation = 0;
  EXPECT_THROW(experiment::run(bad), InvalidInput);
  bad = synthetic_fedavg();
  bad.fedavg_rounds = 0;
  EXPECT_THROW(experiment::run(bad), InvalidInput);
  bad = synthetic_fedavg();
  bad.fedavg_configurations = {"1E32B", "1E32B"};
  EXPECT_THROW(experiment::run(bad), InvalidInput);
  bad = synthetic_fedavg();
  bad.protocol = "nri-dc";
  try {
    experiment::run(bad);
    ADD_FAILURE() << "no error for FedAvg under nri-dc";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("needs protocol \"dc\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dcalign
