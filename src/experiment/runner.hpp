#pragma once
// The experiment runner over two units: data_setup.cpp (the dataset, the checks that need it,
// and each trial's data) and trial.cpp (the DC protocol of paper 001, Algorithm 1 and section 7,
// NRI-DC of paper 004, Algorithm 1, and the baselines). The privacy and DP measurements
// (PrivacyEvaluator, privacy_eval.hpp) and FedAvg (FedAvgRun, fedavg.hpp) are types of their
// own, built from the Config and what the runner's set-up decided. The checks on the Config
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
#include "experiment/fedavg.hpp"
#include "experiment/privacy_eval.hpp"

namespace dcalign::experiment::detail {

class Runner {
 public:
  Runner(const Config& c, const Progress& progress) : c_(c), progress_(progress) {}

  /// Everything that can be checked before a trial: the keys, the dataset and the sizes.
  void prepare();
  Result run();

 private:
  // trial.cpp: the alignment backend and the LibTorch models' device, before any data is read.
  void open_devices();
  // data_setup.cpp: the dataset, its checks against the config, and each trial's data.
  void check_other_layers() const;
  void load();
  void load_public_anchor(const data::LoadOptions& lo);
  Matrix<double> anchor(index_t t) const;
  void validate_sizes();
  void check_all_rows_partition();
  void validate_vertical();
  // The trial whose data (split, secret bases, anchor, noise, model seeds) trial t uses: t, or 0
  // when only the alignment's random factors are redrawn (redraw = "alignment", paper 001
  // section 8's design).
  index_t data_trial(index_t t) const { return c_.redraw == "alignment" ? 0 : t; }
  Split make_split(index_t t) const;
  // The feature block user i holds (vertical partitions), or -1 for all features.
  int block_of(index_t i) const { return vertical_ ? (i < c_.users / 2 ? 0 : 1) : -1; }
  // The row set of the split user i holds (users k and k + c/2 share theirs when joined).
  index_t rows_of(index_t i) const { return joined_ ? i % (c_.users / 2) : i; }
  Matrix<double> block(const Matrix<double>& X, int b) const {
    return b < 0 ? X : data::take_columns(X, blocks_[static_cast<size_t>(b)]);
  }
  Split user_view(const Split& sp) const;

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
  data::Dataset train_, test_;
  bool split_per_trial_ = false, nri_ = false, fedavg_ = false, vertical_ = false, joined_ = false;
  std::vector<std::vector<index_t>> blocks_;  ///< the two feature blocks of a vertical partition
  KawakamiForm kawakami_form_ = KawakamiForm::qr_svd;
  index_t l_ = 0, n_test_ = 0;
  index_t l_user_max_ = 0;  ///< the largest l_i a user can have (l without dim_per_user)
  double dp_sigma_ = 0;     ///< the AGM sigma for Delta = dp_row_range
  AnchorKind anchor_kind_ = AnchorKind::uniform;
  std::string public_anchor_;   ///< the dataset of "public:<dataset>" anchors, else ""
  Matrix<double> public_pool_;  ///< its rows that are not in the task's data
  std::shared_ptr<Backend> backend_;
};

}  // namespace dcalign::experiment::detail
