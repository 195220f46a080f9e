// FedAvg (paper 002) as a method of an experiment (experiment/fedavg.hpp).
#include "experiment/fedavg.hpp"

#include <cmath>
#include <tuple>

#include "dcalign/comm.hpp"

namespace dcalign::experiment::detail {

learn::FedAvgOptions FedAvgRun::options(const std::string& configuration) const {
  learn::FedAvgOptions fo;
  try {
    std::tie(fo.local_epochs, fo.batch_size) = parse_fedavg_configuration(configuration);
  } catch (const InvalidInput& e) {
    key_error(c_, "fedavg.configurations", std::string("is invalid: ") + e.what());
  }
  fo.rounds = c_.fedavg_rounds;
  fo.participation = c_.fedavg_participation;
  return fo;
}

// FedAvg on the users' raw training rows, scored on the test data as Central is; one method
// per configuration "<E>E<B>B", with its per-round curves and the bytes it exchanged.
void FedAvgRun::run(index_t t, index_t data_trial, const Split& sp,
                    const std::string& configuration, std::vector<Record>& records,
                    std::vector<RoundRecord>& rounds) const {
  const Matrix<double> X_all = vstack(sp.X), Y_all = vstack(sp.Y);
  const std::vector<double> y_all = concat(sp.y), yY_all = concat(sp.yY);
  const int K = static_cast<int>(num_classes_);
  {
    const learn::FedAvgOptions fo = options(configuration);
    const std::string method = "fedavg-" + configuration;
    const auto t0 = Clock::now();
    double curve_seconds = 0, downlink = 0, uplink = 0;
    const auto after_round = [&](const learn::FedAvgRound& r, const learn::Model& h) {
      const auto e0 = Clock::now();
      RoundRecord rr;
      rr.trial = t;
      rr.method = method;
      rr.round = r.round;
      rr.train_loss = r.train_loss;
      rr.train_accuracy = K > 0 ? learn::accuracy(y_all, h.predict(X_all)) : NAN;
      rr.test_value =
          score(h, Y_all, yY_all, {c_.metrics.front()}, num_classes_).at(c_.metrics.front());
      rr.downlink_bytes = r.downlink_bytes;
      rr.uplink_bytes = r.uplink_bytes;
      downlink += r.downlink_bytes;
      uplink += r.uplink_bytes;
      rounds.push_back(rr);
      curve_seconds += since(e0);
    };
    const auto h = learn::fit_fedavg(
        sp.X, sp.y, K,
        trial_model_options(c_, derive(c_.seed, 13, static_cast<std::uint64_t>(data_trial))), fo,
        after_round);
    const auto values = score(*h, Y_all, yY_all, c_.metrics, num_classes_);
    const double secs = since(t0) - curve_seconds;  // training and the final scoring
    for (const auto& [metric, v] : values)
      records.push_back({t, "-", method, "mlp", metric, v, secs});
    CommModel cm;
    cm.users = c_.users;
    cm.fl_model_parameters = static_cast<double>(h->parameters().size());  // eq. 15's N_FL
    cm.bits = c_.model_options.mlp.float64 ? 64 : 32;
    cm.rounds = fo.rounds;
    cm.participation = fo.participation;
    records.push_back({t, "-", method, "mlp", "uplink_bytes", uplink, 0});
    records.push_back({t, "-", method, "mlp", "downlink_bytes", downlink, 0});
    records.push_back(
        {t, "-", method, "mlp", "predicted_bytes", estimate_communication(cm).fl_bytes, 0});
  }
}

}  // namespace dcalign::experiment::detail
