// The job workers: each runs one job at a time on its device (service/workers.hpp says which
// job it takes), persisted in the store. A job's results are written under a temporary name and
// published by one rename before the job is marked done, so a fetch never sees part of them; a job
// interrupted by a crash is queued again at the next start and recomputed from its inputs
// (recover()).
#include <algorithm>
#include <cerrno>
#include <fstream>
#include <vector>

#include "core/model_file.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/user.hpp"
#include "service/common.hpp"
#include "service/state.hpp"
#include "service/train.hpp"

namespace dcalign::service {
namespace {

/// A job that crashed the server this many times is failed instead of retried again.
constexpr int kMaxAttempts = 3;
constexpr const char* kResultsTag = "results";

Matrix<double> read_part(const fs::path& file, index_t rows, index_t cols) {
  Matrix<double> m(rows, cols);
  std::ifstream in(file, std::ios::binary);
  const auto bytes = static_cast<std::streamsize>(m.size() * sizeof(double));
  if (!in.read(reinterpret_cast<char*>(m.data()), bytes) || in.peek() != EOF)
    throw IoError("the stored part " + file.string() + " does not hold " + std::to_string(rows) +
                  " x " + std::to_string(cols) + " float64 values");
  return m;
}

template <typename T>
std::pair<std::vector<Matrix<double>>, AlignReport> align_as(const std::vector<Matrix<double>>& A,
                                                             const AlignOptions& opts,
                                                             Backend& backend) {
  std::vector<Matrix<T>> cast;
  for (const auto& m : A) {
    Matrix<T> t(m.rows(), m.cols());
    std::transform(m.data(), m.data() + m.size(), t.data(), [](double v) { return T(v); });
    cast.push_back(std::move(t));
  }
  Alignment<T> result = align(Stack<T>::from_matrices(cast), opts, backend);
  std::vector<Matrix<double>> G;
  for (index_t k = 0; k < result.G.count(); ++k) {
    const Matrix<T> g = result.G.matrix(k);
    Matrix<double> d(g.rows(), g.cols());
    std::copy(g.data(), g.data() + g.size(), d.data());
    G.push_back(std::move(d));
  }
  return {std::move(G), std::move(result.report)};
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw OsError("cannot write " + p.string(), errno ? errno : EIO);
}

// Runs the job of `id` and publishes its results; returns the report (JSON).
std::string run_job(State& s, const std::string& id, const WorkerSpec& worker, Backend& backend) {
  v1::CollaborationSpec spec;
  if (!s.load_spec(id, &spec)) throw Error("the collaboration was deleted");
  bool float32 = false;
  const AlignOptions opts = align_options(spec, &float32);
  const auto a = static_cast<index_t>(spec.anchor().rows());
  const auto l = static_cast<index_t>(spec.dim());
  // The participants whose release is in: everyone when the last upload queued the job, those
  // who had uploaded when the analyst ran it early (uploads are closed once it is queued).
  std::vector<std::string> members;
  for (const auto& p : spec.participants())
    if (s.uploaded(id, spec, p)) members.push_back(p);
  if (members.empty()) throw Error("no participant has uploaded a release");
  std::vector<Matrix<double>> anchors;
  for (const auto& p : members)
    anchors.push_back(read_part(s.part_file(id, p, v1::PART_ANCHOR, true), a, l));
  barrier_point("job.align");
  crash_point("job.align");
  const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto phase_start = std::chrono::steady_clock::now();
  auto [G, report] =
      float32 ? align_as<float>(anchors, opts, backend) : align_as<double>(anchors, opts, backend);
  s.metrics.job_phase("align", seconds_since(phase_start));
  nlohmann::ordered_json report_json = nlohmann::ordered_json::parse(report.to_json());
  report_json["participants"] = members;
  report_json["worker"] = worker.name;

  const fs::path dir = s.collaboration_dir(id);
  const fs::path tmp = model_file::sibling(dir, kResultsTag, "tmp");
  if (!fs::create_directory(tmp)) throw IoError("cannot create " + tmp.string());
  // A job that fails removes its temporary results at once (not at the next start).
  struct RemoveUnlessPublished {
    const fs::path& tmp;
    ~RemoveUnlessPublished() {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    }
  } remove_tmp{tmp};
  if (spec.model() != "none") {
    // h on the stacked X~_i G_i: every participant's data and labels, checked against each other.
    std::vector<Matrix<double>> X, y;
    for (std::size_t k = 0; k < members.size(); ++k) {
      const std::string& p = members[k];
      const auto data = s.store->part(id, p, v1::PART_DATA);
      const auto labels = s.store->part(id, p, v1::PART_LABELS);
      if (!data || !labels || !data->complete || !labels->complete)
        throw Error("participant " + p + " has no complete data and labels");
      if (data->rows != labels->rows)
        throw InvalidInput("participant " + p + " uploaded " + std::to_string(data->rows) +
                           " rows of data but " + std::to_string(labels->rows) + " labels");
      const Matrix<double> Xt =
          read_part(s.part_file(id, p, v1::PART_DATA, true), static_cast<index_t>(data->rows), l);
      X.push_back(apply_change_of_basis(Xt, G[static_cast<std::size_t>(k)]));
      y.push_back(read_part(s.part_file(id, p, v1::PART_LABELS, true),
                            static_cast<index_t>(labels->rows), 1));
    }
    crash_point("job.train");
    phase_start = std::chrono::steady_clock::now();
    report_json["model"] = train_model(spec, X, y, tmp / kModelDir);
    s.metrics.job_phase("train", seconds_since(phase_start));
  }
  const std::string report_text = report_json.dump(2);

  phase_start = std::chrono::steady_clock::now();
  fault_point("job.write");
  for (std::size_t k = 0; k < members.size(); ++k) {
    const fs::path pdir = tmp / members[k];
    fs::create_directory(pdir);
    write_npy(pdir / "G.npy", G[static_cast<std::size_t>(k)].view());
    write_file(pdir / "report.json", report_text);
    model_file::fsync_path(pdir / "G.npy", false);
    model_file::fsync_path(pdir / "report.json", false);
    model_file::fsync_path(pdir, true);
    crash_point("job.write");
  }
  model_file::fsync_path(tmp, true);
  model_file::publish(tmp, s.results_dir(id));
  model_file::fsync_path(dir, true);
  s.metrics.job_phase("publish", seconds_since(phase_start));
  crash_point("job.publish");
  return report_text;
}

// The memory the job of `id` needs (job_bytes with its participants' rows), kept in the State
// while it is queued or runs. Under s.mu.
std::uint64_t queued_job_bytes(State& s, const std::string& id) {
  if (const auto it = s.job_bytes.find(id); it != s.job_bytes.end()) return it->second;
  v1::CollaborationSpec spec;
  if (!s.load_spec(id, &spec)) return 0;
  std::uint64_t members = 0, rows = 0;
  for (const auto& p : spec.participants()) {
    if (!s.uploaded(id, spec, p)) continue;
    ++members;
    if (const auto data = s.store->part(id, p, v1::PART_DATA)) rows += data->rows;
  }
  return s.job_bytes[id] = job_bytes(spec, members, rows);
}

// What worker `w` can give a job now: its limit, less the estimates of the jobs running on its
// device (the CPU workers share the host's memory), and no more than the device has free.
std::uint64_t free_for_job(State& s, const WorkerSpec& w) {
  std::uint64_t reserved = 0;
  for (const auto& [id, worker] : s.job_workers) {
    const WorkerSpec& o = s.workers[worker];
    if (o.device == w.device && o.device_id == w.device_id) reserved += s.job_bytes[id];
  }
  std::uint64_t free = w.job_limit > reserved ? w.job_limit - reserved : 0;
  try {
    free = std::min(free, device_memory(w.device, w.device_id).free);
  } catch (const std::exception& e) {
    log_event("warning", "device_memory_unknown", {{"worker", w.name}, {"error", e.what()}});
  }
  return free;
}

// The next job for worker `w`, marked running; empty when the server stops. Under `lock`.
std::string take_job(State& s, std::size_t w, std::unique_lock<std::mutex>& lock) {
  const WorkerSpec& worker = s.workers[w];
  std::string waiting_logged;
  for (;;) {
    if (s.stopping) return {};
    std::vector<QueuedJob> queued;
    const auto ids = s.store->jobs_in("queued");
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const std::uint64_t bytes = queued_job_bytes(s, ids[k]);
      std::string why;
      if (!fits_some_worker(s.workers, bytes, &why)) {
        // It would wait for ever: it fails now, with the reason (Run retries it).
        JobRecord j = s.store->job(ids[k]);
        j.state = "failed";
        j.error = "the job was not started: " + why;
        s.store->set_job(ids[k], j);
        s.job_bytes.erase(ids[k]);
        s.metrics.job_finished(false);
        log_event("error", "job_refused", {{"collaboration", ids[k]}, {"error", j.error}});
        continue;
      }
      queued.push_back({ids[k], static_cast<double>(k), bytes});
    }
    const auto pick = pick_job(queued, s.running_jobs, s.last_served, free_for_job(s, worker));
    if (pick) {
      const std::string id = queued[*pick].collaboration;
      if (!s.store->transition_job(id, {"queued"}, "running")) continue;
      s.running_jobs.insert(id);
      s.job_workers[id] = w;
      s.last_served[id] = ++s.served_count;
      {
        std::lock_guard<std::mutex> times(s.times_mu);
        const auto now = std::chrono::steady_clock::now();
        const auto since = [&](auto& map, const char* phase) {
          const auto it = map.find(id);
          if (it == map.end()) return;
          s.metrics.job_phase(phase, std::chrono::duration<double>(now - it->second).count());
          map.erase(it);
        };
        since(s.queued_since, "queue");
        since(s.last_upload, "upload_to_run");
      }
      return id;
    }
    if (!queued.empty() && s.running_jobs.empty() &&
        waiting_logged != queued.front().collaboration) {
      // Nothing runs, yet nothing fits what this worker's device has free now (other processes
      // hold it): the jobs wait, and the log says why once.
      waiting_logged = queued.front().collaboration;
      log_event("warning", "job_waits_for_memory",
                {{"collaboration", waiting_logged},
                 {"worker", worker.name},
                 {"needs", queued.front().bytes},
                 {"free", free_for_job(s, worker)}});
    }
    s.cv.wait_for(lock, std::chrono::seconds(5));
  }
}

}  // namespace

void run_job_worker(State& s, std::size_t w) {
  const WorkerSpec& worker = s.workers[w];
  BackendOptions bo;
  bo.threads = worker.threads;
  bo.device_id = worker.device_id;
  std::shared_ptr<Backend> backend;
  for (;;) {
    std::string id;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      id = take_job(s, w, lock);
      if (id.empty()) return;
    }
    const JobRecord started = s.store->job(id);
    log_event("info", "job_started",
              {{"collaboration", id},
               {"job", id},
               {"attempt", started.attempts},
               {"worker", worker.name}});
    JobRecord end = started;
    const auto began = std::chrono::steady_clock::now();
    try {
      if (!backend) backend = make_backend(worker.device, bo);
      end.report = run_job(s, id, worker, *backend);
      end.state = "done";
      end.error.clear();
    } catch (const std::exception& e) {
      end.state = "failed";
      // The store's copy is what callers read: without the server's paths (the log has them).
      end.error = out_of_space(e) ? "the server ran out of disk space while it ran the job "
                                    "(Run retries it once space is freed)"
                                  : redact_paths(e.what());
      log_event("error", "job_error",
                {{"collaboration", id}, {"job", id}, {"worker", worker.name}, {"error", e.what()}});
    }
    s.metrics.worker_busy(
        worker.name,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    std::lock_guard<std::mutex> lock(s.mu);
    s.store->set_job(id, end);
    s.metrics.job_finished(end.state == "done");
    // Said once the store holds it: a job_done line is a job that is never run again.
    log_event(end.state == "done" ? "info" : "error",
              end.state == "done" ? "job_done" : "job_failed",
              {{"collaboration", id}, {"job", id}, {"worker", worker.name}});
    s.running_jobs.erase(id);
    s.job_workers.erase(id);
    s.job_bytes.erase(id);
    // Another worker may take this collaboration's next job, or the memory it held.
    s.cv.notify_all();
  }
}

void recover(State& s) {
  std::error_code ec;
  // trash/ holds only what DeleteCollaboration moved there after the rows were gone.
  fs::remove_all(s.trash_dir(), ec);
  fs::create_directories(s.root / "collaborations");
  const auto ids = s.store->collaborations();
  const auto deleted = s.store->deleted_collaborations();
  const auto known = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  // A directory is removed only when the store proves it an orphan: a deletion cut short left it
  // behind its tombstone. Any other unknown directory is kept, and said; with no collaboration
  // in the store at all, it is an error (an empty database beside data: check_database_present
  // covers a missing or empty file, this a database emptied some other way).
  std::vector<std::string> unknown;
  for (const auto& e : fs::directory_iterator(s.root / "collaborations")) {
    const std::string name = e.path().filename().string();
    if (known(ids, name)) continue;
    if (known(deleted, name)) {
      fs::remove_all(e.path(), ec);
      log_event("warning", "orphan_removed", {{"collaboration", name}});
    } else {
      unknown.push_back(name);
    }
  }
  for (const auto& id : deleted)
    if (!fs::exists(s.collaboration_dir(id))) s.store->forget_deleted(id);
  if (!unknown.empty() && ids.empty())
    throw IoError("the database " + (s.root / "dcalign.db").string() +
                  " holds no collaboration, but " + (s.root / "collaborations").string() +
                  " holds " + std::to_string(unknown.size()) + " (" + unknown.front() +
                  (unknown.size() > 1 ? ", ..." : "") +
                  "): the server does not start on a database that does not know its data. "
                  "Restore dcalign.db from a backup; or, to give those collaborations up, move "
                  "their directories out of the data directory and start again");
  for (const auto& name : unknown)
    log_event("warning", "unknown_directory_kept",
              {{"collaboration", name},
               {"why", "the database does not know it and holds no record of its deletion"}});
  for (const auto& id : ids) {
    const fs::path dir = s.collaboration_dir(id);
    fs::create_directories(dir / "uploads");
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind(std::string(".") + kResultsTag + ".tmp", 0) == 0)
        fs::remove_all(e.path(), ec);
    // Uploads: cut every part back to what was acknowledged.
    for (const auto& p : s.store->participants(id))
      for (const auto& r : s.store->parts(id, p)) {
        const fs::path partial = s.part_file(id, p, r.part, false);
        const fs::path done = s.part_file(id, p, r.part, true);
        if (r.complete) {
          if (!fs::exists(done)) {
            log_event("error", "part_missing", {{"collaboration", id}, {"participant", p}});
            s.store->delete_part(id, p, r.part);
          }
          continue;
        }
        // Verified and renamed, but the crash came before the store recorded it: verify again
        // when the participant resumes.
        if (!fs::exists(partial) && fs::exists(done)) fs::rename(done, partial);
        if (!fs::exists(partial)) {
          s.store->set_received(id, p, r.part, 0);
          continue;
        }
        const auto size = fs::file_size(partial);
        if (size < r.received) {
          log_event("error", "part_short", {{"collaboration", id}, {"participant", p}});
          s.store->set_received(id, p, r.part, 0);
          fs::resize_file(partial, 0);
        } else if (size > r.received) {
          fs::resize_file(partial, r.received);  // written, never acknowledged
        }
      }
    JobRecord j = s.store->job(id);
    if (j.state == "running") {
      if (j.attempts >= kMaxAttempts) {
        j.state = "failed";
        j.error = "the job was interrupted " + std::to_string(j.attempts) +
                  " times (a crash of the server while it ran); Run retries it";
      } else {
        j.state = "queued";
        s.note_queued(id);
      }
      s.store->set_job(id, j);
      log_event("warning", "job_recovered", {{"collaboration", id}, {"state", j.state}});
    }
  }
}

}  // namespace dcalign::service
