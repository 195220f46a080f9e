// The job worker: one alignment at a time (one device), persisted in the store. A job's
// results are written under a temporary name and published by one rename before the job is
// marked done, so a fetch never sees part of them; a job interrupted by a crash is queued again
// at the next start and recomputed from its inputs (recover()).
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

std::shared_ptr<Backend> job_backend(const std::string& device) {
  if (device == "cpu") return make_backend(Device::cpu);
  if (device == "cuda" || cuda_available()) return make_backend(Device::cuda);
  return make_backend(Device::cpu);
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
std::string run_job(State& s, const std::string& id) {
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
  auto backend = job_backend(s.opts.device);
  crash_point("job.align");
  auto [G, report] = float32 ? align_as<float>(anchors, opts, *backend)
                             : align_as<double>(anchors, opts, *backend);
  nlohmann::ordered_json report_json = nlohmann::ordered_json::parse(report.to_json());
  report_json["participants"] = members;

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
    report_json["model"] = train_model(spec, X, y, tmp / kModelDir);
  }
  const std::string report_text = report_json.dump(2);

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
  crash_point("job.publish");
  return report_text;
}

}  // namespace

void run_job_worker(State& s) {
  for (;;) {
    std::string id;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      for (;;) {
        if (s.stopping) return;
        const auto queued = s.store->jobs_in("queued");
        if (!queued.empty()) {
          id = queued.front();
          break;
        }
        s.cv.wait_for(lock, std::chrono::seconds(5));
      }
      if (!s.store->transition_job(id, {"queued"}, "running")) continue;
      s.running_job = id;
    }
    const JobRecord started = s.store->job(id);
    log_event("info", "job_started", {{"collaboration", id}, {"attempt", started.attempts}});
    JobRecord end = started;
    try {
      end.report = run_job(s, id);
      end.state = "done";
      end.error.clear();
      log_event("info", "job_done", {{"collaboration", id}});
    } catch (const std::exception& e) {
      end.state = "failed";
      // The store's copy is what callers read: without the server's paths (the log has them).
      end.error = out_of_space(e) ? "the server ran out of disk space while it ran the job "
                                    "(Run retries it once space is freed)"
                                  : redact_paths(e.what());
      log_event("error", "job_failed", {{"collaboration", id}, {"error", e.what()}});
    }
    std::lock_guard<std::mutex> lock(s.mu);
    s.store->set_job(id, end);
    s.running_job.clear();
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
      }
      s.store->set_job(id, j);
      log_event("warning", "job_recovered", {{"collaboration", id}, {"state", j.state}});
    }
  }
}

}  // namespace dcalign::service
