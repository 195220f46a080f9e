#include "experiment/scheduler.hpp"

#include <algorithm>

namespace dcalign::experiment::detail {

namespace {
thread_local int worker_index = 0;
}  // namespace

int plan_workers(int threads, const std::string& device) {
  if (device != "cpu") return 1;
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return threads > 0 ? threads : hardware;
}

TaskPool::TaskPool(int workers) {
  for (int k = 0; k < std::max(1, workers); ++k) threads_.emplace_back([this, k] { work(k); });
}

TaskPool::~TaskPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

int TaskPool::current_worker() { return worker_index; }

void TaskPool::submit(std::uint64_t unit, std::uint64_t sequence, Task task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_ || stop_) return;
    queue_.emplace(std::make_pair(unit, sequence), std::move(task));
  }
  wake_.notify_one();
}

void TaskPool::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return (queue_.empty() && running_ == 0) || error_; });
  if (error_) {
    queue_.clear();
    idle_.wait(lock, [this] { return running_ == 0; });  // let the running tasks end
    std::rethrow_exception(error_);
  }
}

void TaskPool::work(int index) {
  worker_index = index;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Task task = std::move(queue_.begin()->second);
    queue_.erase(queue_.begin());
    ++running_;
    lock.unlock();
    std::exception_ptr failed;
    try {
      task();
    } catch (...) {
      failed = std::current_exception();
    }
    task = nullptr;  // what the task holds is freed outside the lock
    lock.lock();
    --running_;
    if (failed && !error_) {
      error_ = failed;
      queue_.clear();
    }
    if ((queue_.empty() && running_ == 0) || error_) idle_.notify_all();
  }
}

std::vector<Record>& TrialOut::now() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (slots_.empty() || !immediate_.back()) {
    slots_.emplace_back();
    immediate_.push_back(true);
  }
  return slots_.back().records;
}

TrialOut::Slot& TrialOut::later() {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_.emplace_back();
  immediate_.push_back(false);
  return slots_.back();
}

void TrialOut::collect(std::vector<Record>& records, std::vector<RoundRecord>& rounds) const {
  for (const auto& s : slots_) {
    records.insert(records.end(), s.records.begin(), s.records.end());
    rounds.insert(rounds.end(), s.rounds.begin(), s.rounds.end());
  }
}

void UnitRun::defer(std::function<void(TrialOut::Slot&)> task) {
  TrialOut::Slot& slot = out_.later();
  pending_.fetch_add(1);
  pool_.submit(unit_, sequence_.fetch_add(1), [this, &slot, task = std::move(task)] {
    task(slot);
    release();
  });
}

void UnitRun::release() {
  if (pending_.fetch_sub(1) == 1) finished_(*this);
}

}  // namespace dcalign::experiment::detail
