#pragma once
// One run of an experiment (study.cpp): its points, its workers, its checkpoint and where it
// stands. run() is the whole run in this process; a distributed run (the MPI driver of
// dcalign-experiment-mpi) uses the pieces: open() on every rank, run_unit() on the ranks that
// compute, accept() and result() on the rank that writes.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dcalign/experiment.hpp"
#include "experiment/checkpoint.hpp"

namespace dcalign::experiment::detail {

class Runner;

/// A trial of a point: (point index, trial index).
using UnitKey = std::pair<std::size_t, index_t>;

class Study {
 public:
  Study(const Config& config, const RunOptions& options);
  ~Study();
  Study(const Study&) = delete;
  Study& operator=(const Study&) = delete;

  /// The whole run here: open(), every unit on this process's workers, result().
  Result run();

  /// Checks every point (keys, dataset, sizes) and, with `checkpoint` and a checkpoint
  /// directory, resumes or starts it. Returns the trials still to run, in order.
  std::vector<UnitKey> open(bool checkpoint);
  /// One trial on this process's workers (its fits side by side); waits for it.
  UnitResult run_unit(const UnitKey& unit);
  /// A finished trial: into the checkpoint, the results and the progress.
  void accept(UnitResult u);
  /// Every trial's records (resumed ones included) in order, with the statistics.
  Result result();
  int workers() const { return workers_; }

 private:
  std::shared_ptr<Runner> runner(std::size_t k);
  void finished(UnitResult r);

  const Config& config_;
  const RunOptions& options_;
  const std::vector<std::pair<std::string, Config>> points_;
  Progress progress_;
  const Progress silent_;  // the Runner holds a reference: never a temporary
  int workers_ = 1;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::mutex mutex_, open_mutex_;
  std::vector<std::shared_ptr<Runner>> runners_;
  std::map<UnitKey, UnitResult> done_;
  std::vector<std::size_t> point_total_, point_done_, pending_points_;
  std::size_t total_ = 0, finished_ = 0, resumed_ = 0, run_here_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace dcalign::experiment::detail
