// What a job computes: a collaboration's alignment (and model h), or the enrolment of a
// participant who joined after it. Each writes its results under a temporary name and publishes
// them by one rename before the job is marked done, so a fetch never sees part of them.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <vector>

#include "core/model_file.hpp"
#include "dcalign/aligner.hpp"
#include "dcalign/error.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/user.hpp"
#include "service/common.hpp"
#include "service/mpi_job.hpp"
#include "service/state.hpp"
#include "service/train.hpp"

namespace dcalign::service {
namespace {

template <typename T>
Matrix<T> cast_to(const Matrix<double>& m) {
  Matrix<T> t(m.rows(), m.cols());
  std::transform(m.data(), m.data() + m.size(), t.data(), [](double v) { return T(v); });
  return t;
}

template <typename T>
Matrix<double> to_double(const Matrix<T>& g) {
  Matrix<double> d(g.rows(), g.cols());
  std::copy(g.data(), g.data() + g.size(), d.data());
  return d;
}

// The alignment in precision T, fitted by an Aligner that is saved to `model` (a model
// directory of dcalign enroll) for the participants who join later.
template <typename T>
std::pair<std::vector<Matrix<double>>, AlignReport> align_as(const std::vector<Matrix<double>>& A,
                                                             const AlignOptions& opts,
                                                             Backend& backend,
                                                             const fs::path& model) {
  std::vector<Matrix<T>> cast;
  for (const auto& m : A) cast.push_back(cast_to<T>(m));
  Aligner<T> aligner;
  Alignment<T> result = aligner.fit(Stack<T>::from_matrices(cast), opts, backend);
  aligner.save(model.string());
  std::vector<Matrix<double>> G;
  for (index_t k = 0; k < result.G.count(); ++k) {
    G.push_back(to_double(result.G.matrix(k)));
  }
  return {std::move(G), std::move(result.report)};
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw OsError("cannot write " + p.string(), errno ? errno : EIO);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A new directory beside a collaboration's results (".results.tmp-*", which recover() removes
// after a crash): a job's results while they are written, or the MPI path's staging. Removed at
// the end of its scope, so a job that fails leaves nothing (results published by a rename are
// no longer there to remove).
struct JobTempDir {
  explicit JobTempDir(const fs::path& collaboration_dir)
      : path(model_file::sibling(collaboration_dir, kResultsTag, "tmp")) {
    if (!fs::create_directory(path)) throw IoError("cannot create " + path.string());
  }
  ~JobTempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  JobTempDir(const JobTempDir&) = delete;
  JobTempDir& operator=(const JobTempDir&) = delete;
  const fs::path path;
};

// Writes a participant's result G.npy and report.json into `pdir` (created), flushed.
void write_result(const fs::path& pdir, const Matrix<double>& G, const std::string& report) {
  fs::create_directory(pdir);
  write_npy(pdir / "G.npy", G.view());
  write_file(pdir / "report.json", report);
  model_file::fsync_path(pdir / "G.npy", false);
  model_file::fsync_path(pdir / "report.json", false);
  model_file::fsync_path(pdir, true);
}

}  // namespace

std::string run_alignment_job(State& s, const std::string& id, const WorkerSpec& worker,
                              Backend& backend) {
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
  // The results are written under a temporary name, removed at once if the job fails.
  const fs::path dir = s.collaboration_dir(id);
  const JobTempDir results_tmp(dir);
  const fs::path& tmp = results_tmp.path;
  barrier_point("job.align");
  crash_point("job.align");
  auto phase_start = std::chrono::steady_clock::now();
  std::vector<Matrix<double>> G;
  nlohmann::ordered_json report_json;
  if (spec.distributed().ranks() > 0) {
    // Over MPI: the ranks read the anchors from the data directory; the aligner is not kept
    // (it would need every anchor in one process), so late participants cannot join.
    const JobTempDir work(dir);
    std::vector<fs::path> files;
    for (const auto& p : members) files.push_back(s.part_file(id, p, v1::PART_ANCHOR, true));
    MpiAlignment m = align_over_mpi(s.opts, spec, files, work.path);
    log_event("info", "job_mpi", {{"collaboration", id}, {"job", id}, {"command", m.command}});
    G = std::move(m.G);
    report_json = nlohmann::ordered_json::parse(m.report);
    report_json["ranks"] = spec.distributed().ranks();
  } else {
    std::vector<Matrix<double>> anchors;
    for (const auto& p : members)
      anchors.push_back(read_stored_part(s.part_file(id, p, v1::PART_ANCHOR, true), a, l));
    auto [g, report] = float32 ? align_as<float>(anchors, opts, backend, tmp / kAlignerDir)
                               : align_as<double>(anchors, opts, backend, tmp / kAlignerDir);
    G = std::move(g);
    report_json = nlohmann::ordered_json::parse(report.to_json());
  }
  s.metrics.job_phase("align", seconds_since(phase_start));
  report_json["participants"] = members;
  report_json["worker"] = worker.name;

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
      const Matrix<double> Xt = read_stored_part(s.part_file(id, p, v1::PART_DATA, true),
                                                 static_cast<index_t>(data->rows), l);
      X.push_back(apply_change_of_basis(Xt, G[k]));
      y.push_back(read_stored_part(s.part_file(id, p, v1::PART_LABELS, true),
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
    write_result(tmp / members[k], G[k], report_text);
    crash_point("job.write");
  }
  model_file::fsync_path(tmp, true);
  model_file::publish(tmp, s.results_dir(id));
  model_file::fsync_path(dir, true);
  s.metrics.job_phase("publish", seconds_since(phase_start));
  crash_point("job.publish");
  return report_text;
}

template <typename T>
std::pair<Matrix<double>, EnrolmentReport> enroll_as(const fs::path& model, const Matrix<double>& A,
                                                     Backend& backend) {
  const Aligner<T> aligner = Aligner<T>::load(model.string());
  Enrolment<T> e = aligner.enroll(cast_to<T>(A), backend);
  return {to_double(e.G), std::move(e.report)};
}

std::string run_enrolment_job(State& s, const std::string& id, const std::string& participant,
                              const WorkerSpec& worker, Backend& backend) {
  v1::CollaborationSpec spec;
  if (!s.load_spec(id, &spec)) throw Error("the collaboration was deleted");
  if (s.store->job(id).state != "done")
    throw Error(
        "the collaboration's alignment is not done: a late participant is enrolled "
        "against its results");
  const fs::path results = s.results_dir(id);
  const fs::path model = results / kAlignerDir;
  if (!fs::is_directory(model))
    throw Error(
        "the collaboration's results hold no aligner to enrol against (a run over MPI keeps "
        "none, nor did the dcalign-servers of data directories of schema version 1)");
  const auto part = s.store->part(id, participant, v1::PART_ANCHOR);
  if (!part || !part->complete) throw Error("participant " + participant + " has no anchor");
  const Matrix<double> A = read_stored_part(s.part_file(id, participant, v1::PART_ANCHOR, true),
                                            static_cast<index_t>(spec.anchor().rows()),
                                            static_cast<index_t>(spec.dim()));
  barrier_point("job.enroll");
  crash_point("job.enroll");
  auto phase_start = std::chrono::steady_clock::now();
  // The model's precision decides (the alignment's); a float32 model needs float.
  const bool float32 = read_model_info(model.string()).precision == "float32";
  auto [G, report] =
      float32 ? enroll_as<float>(model, A, backend) : enroll_as<double>(model, A, backend);
  s.metrics.job_phase("align", seconds_since(phase_start));
  nlohmann::ordered_json report_json = nlohmann::ordered_json::parse(report.to_json());
  report_json["participant"] = participant;
  report_json["enrolled"] = true;
  report_json["worker"] = worker.name;
  const std::string report_text = report_json.dump(2);

  // Written beside the results and renamed in: the others' results are never touched.
  phase_start = std::chrono::steady_clock::now();
  const fs::path dir = s.collaboration_dir(id);
  const JobTempDir results_tmp(dir);
  const fs::path& tmp = results_tmp.path;
  write_result(tmp / participant, G, report_text);
  crash_point("job.enroll_write");
  // An earlier attempt that published but was not recorded (a crash between the two) left the
  // same result there: publish swaps it out.
  model_file::publish(tmp / participant, results / participant);
  model_file::fsync_path(results, true);
  s.metrics.job_phase("publish", seconds_since(phase_start));
  crash_point("job.enroll_publish");
  return report_text;
}

}  // namespace dcalign::service
