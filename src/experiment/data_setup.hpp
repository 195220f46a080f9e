#pragma once
// An experiment's data: the dataset (a named one, or the synthetic stand-in), the checks that
// need it or another layer's tables, the public anchor pool, and each trial's split and anchor;
// with what the run decides from the Config before any trial (protocol, DP sigma, dimensions).
#include <cstdint>
#include <string>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/data.hpp"
#include "dcalign/experiment.hpp"
#include "dcalign/user.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment::detail {

class TrialData {
 public:
  TrialData(const Config& c, const Progress& progress) : c_(c), progress_(progress) {}
  /// The keys, the other layers' names, the dataset and the sizes: everything that can be
  /// checked before a trial.
  void prepare();

  const data::Dataset& train() const { return train_; }
  /// A 64-bit hash of every value the trials draw from (the training and test sets as loaded,
  /// the public anchor pool): what a resumed run checks against the one it continues.
  std::uint64_t fingerprint() const;
  index_t l() const { return l_; }
  index_t l_user_max() const { return l_user_max_; }  ///< the largest l_i a user can have
  bool nri() const { return nri_; }
  bool fedavg() const { return fedavg_; }
  bool vertical() const { return vertical_; }
  bool joined() const { return joined_; }        ///< users k and k + c/2 share their rows
  double dp_sigma() const { return dp_sigma_; }  ///< the AGM sigma for Delta = dp_row_range
  KawakamiForm kawakami_form() const { return kawakami_form_; }
  /// The two feature blocks of a vertical partition.
  const std::vector<std::vector<index_t>>& blocks() const { return blocks_; }

  Matrix<double> anchor(index_t t) const;
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

 private:
  void check_other_layers() const;
  void load();
  void load_public_anchor(const data::LoadOptions& lo);
  void validate_sizes();
  void check_all_rows_partition();
  void validate_vertical();

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
};

}  // namespace dcalign::experiment::detail
