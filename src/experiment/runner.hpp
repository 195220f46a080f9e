#pragma once
// The experiment runner (trial.cpp): the DC protocol of paper 001, Algorithm 1 and section 7,
// NRI-DC of paper 004, Algorithm 1, and the baselines, on each trial's data. The data (the
// dataset, the checks that need it, each trial's split and anchor: TrialData, data_setup.hpp),
// the privacy and DP measurements (PrivacyEvaluator, privacy_eval.hpp) and FedAvg (FedAvgRun,
// fedavg.hpp) are types of their own. The checks on the Config
// alone are in config_checks.cpp, the summary table in summary.cpp and the output files in
// outputs.cpp.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/comm.hpp"
#include "dcalign/data.hpp"
#include "dcalign/experiment.hpp"
#include "dcalign/learn.hpp"
#include "dcalign/privacy_attacks.hpp"
#include "dcalign/user.hpp"
#include "experiment/common.hpp"
#include "experiment/data_setup.hpp"
#include "experiment/fedavg.hpp"
#include "experiment/privacy_eval.hpp"
#include "experiment/scheduler.hpp"

namespace dcalign::experiment::detail {

/// The CPU model and the hardware threads, for the results.
std::string machine_description();

class Runner {
 public:
  /// `workers`: the pool's threads, each with a backend of its own.
  Runner(const Config& c, const Progress& progress, int workers = 1)
      : c_(c), progress_(progress), data_(c, progress), workers_(workers) {}

  /// Everything that can be checked before a trial: the keys, the dataset and the sizes.
  void prepare() { data_.prepare(); }
  /// The devices (every worker's alignment backend, LibTorch's device check), then prepare().
  void open();
  /// Trial t: its own code runs on the calling worker, its models' fits are queued on `unit`'s
  /// pool, and every record goes into `unit`'s slots in the serial run's order.
  void trial(index_t t, UnitRun& unit);
  /// A fingerprint of the data the trials draw from (the dataset's values after loading).
  std::uint64_t data_fingerprint() const { return data_.fingerprint(); }

 private:
  void open_devices();
  // trial.cpp: the protocols, the baselines and the models.
  void local(index_t t, const Split& sp, UnitRun& unit, const Matrix<double>* whole_Y = nullptr,
             const std::vector<double>* whole_y = nullptr);
  void nri_trial(index_t t, const Split& sp, UnitRun& unit);
  std::vector<Matrix<double>> join_pairs(const std::vector<Matrix<double>>& m) const;
  learn::ModelOptions model_options(std::uint64_t seed) const {
    return trial_model_options(c_, seed);
  }
  std::unique_ptr<learn::Model> model(const std::string& kind, std::uint64_t seed) const;
  AlignOptions align_options(const std::string& method, index_t t) const;
  /// Every user's l_i in trial t: l for all, or as dim_per_user and dim_assignment say.
  std::vector<index_t> user_dims(index_t t) const;
  double evaluate_one(const learn::Model& h, const Matrix<double>& Y, const std::vector<double>& y,
                      const std::string& metric) const;
  // What a DC run exchanges, counted from the arrays (doubles, q = 64): per user the uplink of
  // X~_i, A_i and y_i, the downlink of G_i; the model h is added per model kind.
  struct DcTraffic {
    double uplink = 0, downlink_G = 0;
    CommModel model;  // eq. 14's inputs, N_DC set per model kind
  };
  /// The models of `method` on (X, y), scored on (Y, yY): one task per model kind.
  void fit_and_record(index_t t, const std::string& cond, const std::string& method,
                      Matrix<double> X, std::vector<double> y, Matrix<double> Y,
                      std::vector<double> yY, UnitRun& unit, const DcTraffic* traffic = nullptr);
  /// This worker's alignment backend.
  Backend& backend() const {
    return *backends_[static_cast<size_t>(TaskPool::current_worker()) % backends_.size()];
  }

  const Config& c_;
  const Progress& progress_;
  TrialData data_;  ///< the dataset and each trial's data
  int workers_;
  std::vector<std::shared_ptr<Backend>> backends_;  ///< one per worker
};

}  // namespace dcalign::experiment::detail
