#pragma once
// Running an experiment's independent work side by side: a pool of worker threads that takes
// tasks in a fixed priority order (the lowest (unit, sequence) first, so that the trials that
// started first finish first and few are held in memory at once), and, per trial, the ordered
// slots its records go into, so that the records of a parallel run come out in the order of the
// serial one whatever order the tasks finish in.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "dcalign/experiment.hpp"

namespace dcalign::experiment::detail {

/// The workers of a run: `threads` (0: the hardware threads) caps them, and so the total, since
/// every task runs on one thread. The GPU runs its tasks one at a time (one worker).
int plan_workers(int threads, const std::string& device);

class TaskPool {
 public:
  using Task = std::function<void()>;
  /// `workers` >= 1 threads, started at once.
  explicit TaskPool(int workers);
  /// Waits for the workers (after cancelling what is still queued).
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  int workers() const { return static_cast<int>(threads_.size()); }
  /// Queues `task` under the key (unit, sequence); the smallest key runs first. Tasks may submit
  /// tasks. Nothing is queued once a task has failed.
  void submit(std::uint64_t unit, std::uint64_t sequence, Task task);
  /// Blocks until every task has run, or one has thrown: then the rest are dropped and the
  /// first exception is rethrown here.
  void wait();
  /// The index (0 .. workers - 1) of the worker running the calling task; 0 outside the pool.
  static int current_worker();

 private:
  void work(int index);

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, Task> queue_;
  int running_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

/// What one trial produces, in the order the serial run produces it: slots filled either at once
/// (records made by the trial's own code) or by a task of their own (a model's fit), in the
/// order they were opened. Slots live in a deque, so a task's slot never moves.
class TrialOut {
 public:
  struct Slot {
    std::vector<Record> records;
    std::vector<RoundRecord> rounds;
  };
  /// The slot for records made now: the last slot if it is one of these, else a new one.
  std::vector<Record>& now();
  /// A new slot for a task to fill (the caller submits the task; the slot is its alone).
  Slot& later();
  /// Every record and round, slot after slot.
  void collect(std::vector<Record>& records, std::vector<RoundRecord>& rounds) const;

 private:
  std::mutex mutex_;  // slots are opened by the trial's own code while tasks fill earlier ones
  std::deque<Slot> slots_;
  std::deque<bool> immediate_;
};

/// One trial under way: its slots, the tasks it has queued and what to do once the trial's own
/// code and every task of it have run.
class UnitRun {
 public:
  UnitRun(TaskPool& pool, std::uint64_t unit, std::function<void(UnitRun&)> finished)
      : pool_(pool), unit_(unit), finished_(std::move(finished)) {}
  TrialOut& out() { return out_; }
  const TrialOut& out() const { return out_; }
  /// Queues `task` on its own slot (in the order of the calls).
  void defer(std::function<void(TrialOut::Slot&)> task);
  /// The trial's own code, or one task, is done; the last one calls `finished`.
  void release();

 private:
  TaskPool& pool_;
  std::uint64_t unit_;
  std::function<void(UnitRun&)> finished_;
  TrialOut out_;
  std::atomic<int> pending_{1};  // the trial's own code, then +1 per task
  std::atomic<std::uint64_t> sequence_{1};
};

}  // namespace dcalign::experiment::detail
