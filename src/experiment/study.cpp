// Studies on top of the runner: every point of a [sweep] grid runs as its own config (all checked
// before the first trial), its trials and their models side by side on the run's workers
// (scheduler.hpp), each finished trial saved to the checkpoint (checkpoint.hpp), then the tests
// of the [[statistics]] section (statistics.cpp).
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

#include "base/host_blas.hpp"
#include "dcalign/experiment.hpp"
#include "experiment/checkpoint.hpp"
#include "experiment/common.hpp"
#include "experiment/runner.hpp"
#include "experiment/scheduler.hpp"

namespace dcalign::experiment {

std::size_t check(const Config& config) {
  detail::validate_statistics(config);
  const auto points = sweep_points(config);
  for (const auto& [label, c] : points) detail::prepare_point(c, {});
  return points.size();
}

namespace {

using detail::Clock;
using detail::UnitResult;

// The time each method's models took: every fit's records share its seconds, so each
// (point, trial, condition, method, model) counts once.
std::vector<std::pair<std::string, double>> method_seconds(const std::vector<Record>& records) {
  std::set<std::tuple<std::string, index_t, std::string, std::string, std::string>> seen;
  std::map<std::string, double> sum;
  std::vector<std::string> order;
  for (const auto& r : records) {
    if (r.seconds <= 0) continue;
    if (!seen.emplace(r.point, r.trial, r.condition, r.method, r.model).second) continue;
    if (!sum.count(r.method)) order.push_back(r.method);
    sum[r.method] += r.seconds;
  }
  std::vector<std::pair<std::string, double>> out;
  for (const auto& m : order) out.emplace_back(m, sum[m]);
  return out;
}

// One run: its points, its workers, its checkpoint and where it stands.
class Study {
 public:
  Study(const Config& config, const RunOptions& options)
      : config_(config), options_(options), points_(sweep_points(config)) {
    // Messages come from the workers: one at a time.
    if (options_.progress)
      progress_ = [this](const std::string& m) {
        std::lock_guard<std::mutex> lock(mutex_);
        options_.progress(m);
      };
  }

  Result run() {
    const auto t0 = Clock::now();
    t0_ = t0;
    // Every point is checked (its keys, the dataset and the sizes) before the first trial; the
    // data's fingerprints are the checkpoint's. The points that start first stay open.
    const int workers = detail::plan_workers(config_.threads, config_.device);
    runners_.resize(points_.size());
    std::vector<std::uint64_t> data;
    for (std::size_t k = 0; k < points_.size(); ++k) {
      if (k < static_cast<std::size_t>(workers)) {
        runner(k, workers);
      } else {
        detail::Runner r(points_[k].second, silent_);
        r.prepare();
        if (!options_.checkpoint_dir.empty()) data.push_back(r.data_fingerprint());
        continue;
      }
      if (!options_.checkpoint_dir.empty()) data.push_back(runners_[k]->data_fingerprint());
    }
    std::map<std::pair<std::size_t, index_t>, UnitResult> done;
    if (!options_.checkpoint_dir.empty()) {
      checkpoint_ = std::make_unique<detail::Checkpoint>(options_.checkpoint_dir, config_, data);
      if (options_.resume) {
        for (auto& u : checkpoint_->load())
          if (u.point < points_.size() && u.trial < points_[u.point].second.trials)
            done[{u.point, u.trial}] = std::move(u);
        checkpoint_->write_manifest();
      } else {
        checkpoint_->start(options_.restart);
      }
    }
    // The units still to run, point by point, trial by trial.
    total_ = 0;
    for (std::size_t k = 0; k < points_.size(); ++k) {
      const index_t trials = points_[k].second.trials;
      total_ += static_cast<std::size_t>(trials);
      point_total_.push_back(static_cast<std::size_t>(trials));
      point_done_.push_back(0);
      pending_points_.push_back(0);
      for (index_t t = 0; t < trials; ++t)
        if (done.count({k, t}))
          ++point_done_[k];
        else
          ++pending_points_[k];
    }
    resumed_ = done.size();
    done_ = done.size();
    if (resumed_ > 0 && progress_)
      progress_("resuming: " + std::to_string(resumed_) + " of " + std::to_string(total_) +
                " trial(s) read back from " + options_.checkpoint_dir);
    for (std::size_t k = 0; k < points_.size(); ++k)
      if (pending_points_[k] == 0) runners_[k].reset();  // every trial resumed
    {
      // OpenBLAS's threads are the process's, and its results depend on their number (it picks
      // other kernels for a call split over threads: a FedAvg record moved by 0.2 points
      // between 1 and 2 threads). Every run holds it to one thread, as every task is, so that
      // the records are the same at any worker count and on any number of cores; and several
      // workers calling it with its default count oversubscribed the cores (a trial's own SVDs
      // ran 6x slower beside one fit on 2 cores).
      std::optional<base::BlasThreads> one_blas_thread;
      if (config_.device == "cpu") one_blas_thread.emplace(1);
      detail::TaskPool pool(workers);
      std::uint64_t unit = 0;
      for (std::size_t k = 0; k < points_.size(); ++k)
        for (index_t t = 0; t < points_[k].second.trials; ++t, ++unit) {
          if (done.count({k, t})) continue;
          auto run = std::make_shared<detail::UnitRun>(
              pool, unit, [this, k, t](detail::UnitRun& u) { finished(k, t, u); });
          units_.push_back(run);
          pool.submit(unit, 0, [this, k, t, run, workers] {
            runner(k, workers)->trial(t, *run);
            run->release();
          });
        }
      pool.wait();
    }
    for (auto& [key, u] : finished_) done[key] = std::move(u);
    Result res;
    res.config = config_;
    res.machine = detail::machine_description() + ", " + std::to_string(workers) + " worker(s)";
    res.workers = workers;
    res.resumed_trials = resumed_;
    for (auto& [key, u] : done) {
      for (auto& rec : u.records) {
        rec.point = points_[key.first].first;
        res.records.push_back(std::move(rec));
      }
      res.rounds.insert(res.rounds.end(), u.rounds.begin(), u.rounds.end());
    }
    res.method_seconds = method_seconds(res.records);
    res.statistics = run_statistics(config_, res.records);
    res.wall_seconds = detail::since(t0);
    return res;
  }

 private:
  // Point k's runner, opened (devices, dataset) by the first trial of the point that starts.
  std::shared_ptr<detail::Runner> runner(std::size_t k, int workers) {
    std::lock_guard<std::mutex> lock(open_mutex_);
    if (!runners_[k]) {
      if (points_.size() > 1 && progress_)
        progress_("point " + std::to_string(k + 1) + " of " + std::to_string(points_.size()) +
                  ": " + points_[k].first);
      auto r = std::make_shared<detail::Runner>(points_[k].second, progress_, workers);
      r->open();
      runners_[k] = std::move(r);
    }
    return runners_[k];
  }

  void finished(std::size_t k, index_t t, detail::UnitRun& u) {
    UnitResult r;
    r.point = k;
    r.trial = t;
    u.out().collect(r.records, r.rounds);
    if (checkpoint_) checkpoint_->save(r);
    std::lock_guard<std::mutex> lock(mutex_);
    ++done_;
    ++run_here_;
    ++point_done_[k];
    if (--pending_points_[k] == 0) {
      // The point's data go once its last trial is done (the tasks hold the runner until then).
      std::lock_guard<std::mutex> open(open_mutex_);
      runners_[k].reset();
    }
    finished_[{k, t}] = std::move(r);
    if (options_.on_trial) {
      ProgressReport p;
      p.done = done_;
      p.total = total_;
      p.resumed = resumed_;
      p.point = k;
      p.points = points_.size();
      p.point_label = points_[k].first;
      p.point_done = point_done_[k];
      p.point_total = point_total_[k];
      p.elapsed = detail::since(t0_);
      p.remaining =
          p.elapsed / static_cast<double>(run_here_) * static_cast<double>(total_ - done_);
      options_.on_trial(p);
    }
  }

  const Config& config_;
  const RunOptions& options_;
  const std::vector<std::pair<std::string, Config>> points_;
  Progress progress_;
  const Progress silent_;  // the Runner holds a reference: never a temporary
  std::unique_ptr<detail::Checkpoint> checkpoint_;
  std::mutex mutex_, open_mutex_;
  std::vector<std::shared_ptr<detail::Runner>> runners_;
  std::vector<std::shared_ptr<detail::UnitRun>> units_;
  std::map<std::pair<std::size_t, index_t>, UnitResult> finished_;
  std::vector<std::size_t> point_total_, point_done_, pending_points_;
  std::size_t total_ = 0, done_ = 0, resumed_ = 0, run_here_ = 0;
  Clock::time_point t0_;
};

}  // namespace

Result run(const Config& config, const RunOptions& options) {
  detail::validate_statistics(config);
  Study study(config, options);
  Result res = study.run();
  return res;
}

Result run(const Config& config, const Progress& progress) {
  RunOptions o;
  o.progress = progress;
  return run(config, o);
}

}  // namespace dcalign::experiment
