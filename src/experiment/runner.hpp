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

namespace dcalign::experiment::detail {

class Runner {
 public:
  Runner(const Config& c, const Progress& progress)
      : c_(c), progress_(progress), data_(c, progress) {}

  /// Everything that can be checked before a trial: the keys, the dataset and the sizes.
  void prepare() { data_.prepare(); }
  Result run();

 private:
  // trial.cpp: the alignment backend and the LibTorch models' device, before any data is read.
  void open_devices();
  // trial.cpp: the protocols, the baselines and the models.
  void trial(index_t t, Result& res);
  void local(index_t t, const Split& sp, std::vector<Record>& out,
             const Matrix<double>* whole_Y = nullptr, const std::vector<double>* whole_y = nullptr);
  void nri_trial(index_t t, const Split& sp, std::vector<Record>& out);
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
    CommModel model;  // eq. 14's inputs, N set per model kind
  };
  void fit_and_record(index_t t, const std::string& cond, const std::string& method,
                      const Matrix<double>& X, const std::vector<double>& y,
                      const Matrix<double>& Y, const std::vector<double>& yY,
                      std::vector<Record>& out, const DcTraffic* traffic = nullptr);

  const Config& c_;
  const Progress& progress_;
  TrialData data_;  ///< the dataset and each trial's data
  std::shared_ptr<Backend> backend_;
};

}  // namespace dcalign::experiment::detail
