// The job workers: each runs one job at a time on its device (service/workers.hpp says which
// job it takes), persisted in the store; job_runs.cpp computes and publishes. A job interrupted
// by a crash is queued again at the next start and recomputed from its inputs (recover()).
#include <algorithm>
#include <chrono>
#include <vector>

#include "core/model_file.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/error.hpp"
#include "service/common.hpp"
#include "service/state.hpp"

namespace dcalign::service {
namespace {

/// A job that crashed the server this many times is failed instead of retried again.
constexpr int kMaxAttempts = 3;

// The memory a job needs (job_bytes with its participants' rows; an enrolment: one
// participant's anchor), kept in the State while it is queued or runs. Under s.mu.
std::uint64_t queued_job_bytes(State& s, const JobKey& k) {
  if (const auto it = s.job_bytes.find(k); it != s.job_bytes.end()) return it->second;
  v1::CollaborationSpec spec;
  if (!s.load_spec(k.collaboration, &spec)) return 0;
  if (!k.participant.empty()) return s.job_bytes[k] = job_bytes(spec, 1, 0);
  std::uint64_t members = 0, rows = 0;
  for (const auto& p : spec.participants()) {
    if (!s.uploaded(k.collaboration, spec, p)) continue;
    ++members;
    if (const auto data = s.store->part(k.collaboration, p, v1::PART_DATA)) rows += data->rows;
  }
  return s.job_bytes[k] = job_bytes(spec, members, rows);
}

// What worker `w` can give a job now: its limit, less the estimates of the jobs running on its
// device (the CPU workers share the host's memory), and no more than the device has free.
std::uint64_t free_for_job(State& s, const WorkerSpec& w) {
  std::uint64_t reserved = 0;
  for (const auto& [key, worker] : s.job_workers) {
    const WorkerSpec& o = s.workers[worker];
    if (o.device == w.device && o.device_id == w.device_id) reserved += s.job_bytes[key];
  }
  std::uint64_t free = w.job_limit > reserved ? w.job_limit - reserved : 0;
  try {
    free = std::min(free, device_memory(w.device, w.device_id).free);
  } catch (const std::exception& e) {
    log_event("warning", "device_memory_unknown", {{"worker", w.name}, {"error", e.what()}});
  }
  return free;
}

// Records the seconds since `key` was queued and since its last upload (the metrics' queue and
// upload_to_run phases).
void observe_waits(State& s, const JobKey& key) {
  std::lock_guard<std::mutex> times(s.times_mu);
  const auto now = std::chrono::steady_clock::now();
  const auto since = [&](auto& map, const char* phase) {
    const auto it = map.find(key);
    if (it == map.end()) return;
    s.metrics.job_phase(phase, std::chrono::duration<double>(now - it->second).count());
    map.erase(it);
  };
  since(s.queued_since, "queue");
  since(s.last_upload, "upload_to_run");
}

// The next job for worker `w`, marked running; nothing when the server stops. Under `lock`.
std::optional<JobKey> take_job(State& s, std::size_t w, std::unique_lock<std::mutex>& lock) {
  const WorkerSpec& worker = s.workers[w];
  std::string waiting_logged;
  for (;;) {
    if (s.stopping) return std::nullopt;
    std::vector<QueuedJob> queued;
    const auto waiting = s.store->jobs_in("queued");
    for (std::size_t k = 0; k < waiting.size(); ++k) {
      const JobKey& key = waiting[k];
      const std::uint64_t bytes = queued_job_bytes(s, key);
      std::string why;
      if (!fits_some_worker(s.workers, bytes, &why)) {
        // It would wait for ever: it fails now, with the reason (Run retries it).
        JobRecord j = s.store->job(key.collaboration, key.participant);
        j.state = "failed";
        j.error = "the job was not started: " + why;
        s.store->set_job(key.collaboration, j, key.participant);
        s.job_bytes.erase(key);
        s.metrics.job_finished(false);
        log_event(
            "error", "job_refused",
            {{"collaboration", key.collaboration}, {"job", s.job_id(key)}, {"error", j.error}});
        continue;
      }
      queued.push_back({key.collaboration, static_cast<double>(k), bytes, key.participant});
    }
    const std::uint64_t free = free_for_job(s, worker);
    const auto pick = pick_job(queued, s.running_jobs, s.last_served, free);
    if (pick) {
      const JobKey key{queued[*pick].collaboration, queued[*pick].participant};
      if (!s.store->transition_job(key.collaboration, {"queued"}, "running", key.participant))
        continue;
      s.running_jobs.insert(key.collaboration);
      s.job_workers[key] = w;
      s.last_served[key.collaboration] = ++s.served_count;
      observe_waits(s, key);
      return key;
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
                 {"free", free}});
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
    std::optional<JobKey> taken;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      taken = take_job(s, w, lock);
      if (!taken) return;
    }
    const JobKey key = *taken;
    const std::string& id = key.collaboration;
    const JobRecord started = s.store->job(id, key.participant);
    log_event("info", "job_started",
              {{"collaboration", id},
               {"job", s.job_id(key)},
               {"attempt", started.attempts},
               {"worker", worker.name}});
    JobRecord end = started;
    const auto began = std::chrono::steady_clock::now();
    try {
      if (!backend) backend = make_backend(worker.device, bo);
      end.report = key.participant.empty()
                       ? run_alignment_job(s, id, worker, *backend)
                       : run_enrolment_job(s, id, key.participant, worker, *backend);
      end.state = "done";
      end.error.clear();
    } catch (const std::exception& e) {
      end.state = "failed";
      // The store's copy is what callers read: without the server's paths (the log has them).
      end.error = out_of_space(e) ? "the server ran out of disk space while it ran the job "
                                    "(Run retries it once space is freed)"
                                  : redact_paths(e.what());
      log_event("error", "job_error",
                {{"collaboration", id},
                 {"job", s.job_id(key)},
                 {"worker", worker.name},
                 {"error", e.what()}});
    }
    s.metrics.worker_busy(
        worker.name,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    std::lock_guard<std::mutex> lock(s.mu);
    s.store->set_job(id, end, key.participant);
    s.metrics.job_finished(end.state == "done");
    // Said once the store holds it: a job_done line is a job that is never run again.
    log_event(end.state == "done" ? "info" : "error",
              end.state == "done" ? "job_done" : "job_failed",
              {{"collaboration", id}, {"job", s.job_id(key)}, {"worker", worker.name}});
    s.running_jobs.erase(id);
    s.job_workers.erase(key);
    s.job_bytes.erase(key);
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
            log_event("error", "part_missing",
                      {{"collaboration", id}, {"participant_index", s.participant_index(id, p)}});
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
          log_event("error", "part_short",
                    {{"collaboration", id}, {"participant_index", s.participant_index(id, p)}});
          s.store->set_received(id, p, r.part, 0);
          fs::resize_file(partial, 0);
        } else if (size > r.received) {
          fs::resize_file(partial, r.received);  // written, never acknowledged
        }
      }
  }
  // Interrupted jobs (alignments and enrolments) are queued again, up to kMaxAttempts.
  for (const JobKey& key : s.store->jobs_in("running")) {
    JobRecord j = s.store->job(key.collaboration, key.participant);
    if (j.attempts >= kMaxAttempts) {
      j.state = "failed";
      j.error = "the job was interrupted " + std::to_string(j.attempts) +
                " times (a crash of the server while it ran); Run retries it";
    } else {
      j.state = "queued";
      s.note_queued(key);
    }
    s.store->set_job(key.collaboration, j, key.participant);
    log_event("warning", "job_recovered",
              {{"collaboration", key.collaboration}, {"job", s.job_id(key)}, {"state", j.state}});
  }
}

}  // namespace dcalign::service
