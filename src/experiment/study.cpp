// Studies on top of the runner: every point of a [sweep] grid runs as its own config (all checked
// before the first trial), its trials and their models side by side on the run's workers
// (scheduler.hpp), each finished trial saved to the checkpoint (checkpoint.hpp), then the tests
// of the [[statistics]] section (statistics.cpp).
#include "experiment/study.hpp"

#include <algorithm>
#include <condition_variable>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "base/host_blas.hpp"
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

namespace detail {
namespace {

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

// OpenBLAS's threads are the process's, and its results depend on their number (it picks other
// kernels for a call split over threads: a FedAvg record moved by 0.2 points between 1 and 2
// threads). Every run holds it to one thread, as every task is, so that the records are the
// same at any worker count and on any number of cores; and several workers calling it with its
// default count oversubscribed the cores (a trial's own SVDs ran 6x slower beside one fit on 2
// cores).
class BlasHold {
 public:
  explicit BlasHold(const Config& c) {
    if (c.device == "cpu") one_.emplace(1);
  }

 private:
  std::optional<base::BlasThreads> one_;
};

}  // namespace

Study::Study(const Config& config, const RunOptions& options)
    : config_(config), options_(options), points_(sweep_points(config)) {
  // Messages come from the workers: one at a time.
  if (options_.progress)
    progress_ = [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mutex_);
      options_.progress(m);
    };
  workers_ = plan_workers(config_.threads, config_.device);
  t0_ = Clock::now();
}

Study::~Study() = default;

std::vector<UnitKey> Study::open(bool checkpoint) {
  // Every point is checked (its keys, the dataset and the sizes) before the first trial; the
  // data's fingerprints are the checkpoint's. The points that start first stay open.
  const bool keep = checkpoint && !options_.checkpoint_dir.empty();
  runners_.resize(points_.size());
  std::vector<std::uint64_t> data;
  for (std::size_t k = 0; k < points_.size(); ++k) {
    if (k < static_cast<std::size_t>(workers_)) {
      runner(k);
      if (keep) data.push_back(runners_[k]->data_fingerprint());
    } else {
      Runner r(points_[k].second, silent_);
      r.prepare();
      if (keep) data.push_back(r.data_fingerprint());
    }
  }
  if (keep) {
    checkpoint_ = std::make_unique<Checkpoint>(options_.checkpoint_dir, config_, data);
    if (options_.resume) {
      for (auto& u : checkpoint_->load())
        if (u.point < points_.size() && u.trial < points_[u.point].second.trials)
          done_[{u.point, u.trial}] = std::move(u);
      checkpoint_->write_manifest();
    } else {
      checkpoint_->start(options_.restart);
    }
  }
  std::vector<UnitKey> todo;
  for (std::size_t k = 0; k < points_.size(); ++k) {
    const index_t trials = points_[k].second.trials;
    total_ += static_cast<std::size_t>(trials);
    point_total_.push_back(static_cast<std::size_t>(trials));
    point_done_.push_back(0);
    pending_points_.push_back(0);
    for (index_t t = 0; t < trials; ++t)
      if (done_.count({k, t})) {
        ++point_done_[k];
      } else {
        ++pending_points_[k];
        todo.emplace_back(k, t);
      }
    if (pending_points_[k] == 0) runners_[k].reset();  // every trial resumed
  }
  resumed_ = finished_ = done_.size();
  if (resumed_ > 0 && progress_)
    progress_("resuming: " + std::to_string(resumed_) + " of " + std::to_string(total_) +
              " trial(s) read back from " + options_.checkpoint_dir);
  return todo;
}

Result Study::run() {
  const auto todo = open(true);
  const BlasHold blas(config_);
  std::vector<std::shared_ptr<UnitRun>> units;
  {
    TaskPool pool(workers_);
    for (const auto& [k, t] : todo) {
      const std::uint64_t unit = units.size();
      auto run = std::make_shared<UnitRun>(pool, unit, [this, k = k, t = t](UnitRun& u) {
        UnitResult r;
        r.point = k;
        r.trial = t;
        u.out().collect(r.records, r.rounds);
        finished(std::move(r));
      });
      units.push_back(run);
      pool.submit(unit, 0, [this, k = k, t = t, run] {
        runner(k)->trial(t, *run);
        run->release();
      });
    }
    pool.wait();
  }
  return result();
}

UnitResult Study::run_unit(const UnitKey& unit) {
  const BlasHold blas(config_);
  UnitResult r;
  r.point = unit.first;
  r.trial = unit.second;
  TaskPool pool(workers_);
  UnitRun run(pool, 0, [&r](UnitRun& u) { u.out().collect(r.records, r.rounds); });
  pool.submit(0, 0, [this, &run, &unit] {
    runner(unit.first)->trial(unit.second, run);
    run.release();
  });
  pool.wait();
  return r;
}

void Study::accept(UnitResult u) { finished(std::move(u)); }

// Point k's runner, opened (devices, dataset) by the first trial of the point that starts.
std::shared_ptr<Runner> Study::runner(std::size_t k) {
  std::lock_guard<std::mutex> lock(open_mutex_);
  if (!runners_[k]) {
    if (points_.size() > 1 && progress_)
      progress_("point " + std::to_string(k + 1) + " of " + std::to_string(points_.size()) + ": " +
                points_[k].first);
    auto r = std::make_shared<Runner>(points_[k].second, progress_, workers_);
    r->open();
    runners_[k] = std::move(r);
  }
  return runners_[k];
}

void Study::finished(UnitResult r) {
  if (checkpoint_) checkpoint_->save(r);
  const std::size_t k = r.point;
  std::shared_ptr<Runner> last;  // the point's runner, once its last trial is done
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++finished_;
    ++run_here_;
    ++point_done_[k];
    const bool point_done = pending_points_[k] > 0 && --pending_points_[k] == 0;
    const index_t t = r.trial;
    done_[{k, t}] = std::move(r);
    if (options_.on_trial) {
      ProgressReport p;
      p.done = finished_;
      p.total = total_;
      p.resumed = resumed_;
      p.point = k;
      p.points = points_.size();
      p.point_label = points_[k].first;
      p.point_done = point_done_[k];
      p.point_total = point_total_[k];
      p.elapsed = since(t0_);
      p.remaining =
          p.elapsed / static_cast<double>(run_here_) * static_cast<double>(total_ - finished_);
      options_.on_trial(p);
    }
    if (!point_done) return;
  }
  // The point's data go (the finishing task has left the runner's code). Not under mutex_:
  // runner() takes open_mutex_ and then reports through progress_, which takes mutex_.
  std::lock_guard<std::mutex> open(open_mutex_);
  last = std::move(runners_[k]);
}

Result Study::result() {
  Result res;
  res.config = config_;
  res.machine = machine_description() + ", " + std::to_string(workers_) + " worker(s)";
  res.workers = workers_;
  res.resumed_trials = resumed_;
  for (auto& [key, u] : done_) {
    for (auto& rec : u.records) {
      rec.point = points_[key.first].first;
      res.records.push_back(rec);
    }
    res.rounds.insert(res.rounds.end(), u.rounds.begin(), u.rounds.end());
  }
  res.method_seconds = method_seconds(res.records);
  res.statistics = run_statistics(config_, res.records);
  res.wall_seconds = since(t0_);
  return res;
}

}  // namespace detail

Result run(const Config& config, const RunOptions& options) {
  detail::validate_statistics(config);
  detail::Study study(config, options);
  return study.run();
}

Result run(const Config& config, const Progress& progress) {
  RunOptions o;
  o.progress = progress;
  if (progress) o.on_trial = [&progress](const ProgressReport& p) { progress(progress_line(p)); };
  return run(config, o);
}

std::string format_duration(double seconds) {
  std::ostringstream os;
  if (seconds < 60) {
    os.setf(std::ios::fixed);
    os.precision(1);
    os << seconds << " s";
    return os.str();
  }
  const long long s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600)
    os << s / 3600 << " h " << (s % 3600) / 60 << " min";
  else
    os << s / 60 << " min " << s % 60 << " s";
  return os.str();
}

std::string progress_line(const ProgressReport& p) {
  std::ostringstream os;
  os << "trial " << p.done << " of " << p.total << " done";
  if (p.points > 1)
    os << " (point " << p.point + 1 << " of " << p.points << ", " << p.point_label << ": "
       << p.point_done << " of " << p.point_total << ")";
  os << ", elapsed " << format_duration(p.elapsed);
  if (p.done < p.total) os << ", about " << format_duration(p.remaining) << " left";
  return os.str();
}

}  // namespace dcalign::experiment
