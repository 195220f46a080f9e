#pragma once
// FedAvg (paper 002) as a method of an experiment: the users' raw rows, one method per
// configuration "<E>E<B>B", with its per-round curves and the bytes it exchanged. A type of its
// own, holding what it needs of the run (the Config and the task's number of classes).
#include <cstdint>
#include <string>
#include <vector>

#include "dcalign/experiment.hpp"
#include "dcalign/learn.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment::detail {

class FedAvgRun {
 public:
  FedAvgRun(const Config& c, index_t num_classes) : c_(c), num_classes_(num_classes) {}
  /// One configuration "<E>E<B>B" in trial t on the split `sp` (whose data are trial
  /// `data_trial`'s): its records (scores and bytes) and its per-round curves.
  void run(index_t t, index_t data_trial, const Split& sp, const std::string& configuration,
           std::vector<Record>& records, std::vector<RoundRecord>& rounds) const;
  /// The learning layer's options of one configuration "<E>E<B>B" (InvalidInput naming the
  /// key for a malformed one).
  learn::FedAvgOptions options(const std::string& configuration) const;

 private:
  const Config& c_;
  index_t num_classes_;
};

}  // namespace dcalign::experiment::detail
