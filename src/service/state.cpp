// The State's paths and queries (service/state.hpp).
#include "service/state.hpp"

#include <algorithm>
#include <fstream>

#include "dcalign/error.hpp"
#include "service/common.hpp"

namespace dcalign::service {

Matrix<double> read_stored_part(const fs::path& file, index_t rows, index_t cols) {
  Matrix<double> m(rows, cols);
  std::ifstream in(file, std::ios::binary);
  const auto bytes = static_cast<std::streamsize>(m.size() * sizeof(double));
  if (!in.read(reinterpret_cast<char*>(m.data()), bytes) || in.peek() != EOF)
    throw IoError("the stored part " + file.string() + " does not hold " + std::to_string(rows) +
                  " x " + std::to_string(cols) + " float64 values");
  return m;
}

State::State(ServerOptions o)
    : opts(std::move(o)), root(opts.data_dir), analyst_hash(sha256_hex(opts.analyst_token)) {}

std::string State::analyst_token_hash() const {
  std::lock_guard<std::mutex> lock(token_mu);
  return analyst_hash;
}

void State::set_analyst_token(const std::string& token) {
  const std::string hash = sha256_hex(token);
  std::lock_guard<std::mutex> lock(token_mu);
  analyst_hash = hash;
}

fs::path State::collaboration_dir(const std::string& id) const {
  return root / "collaborations" / id;
}
fs::path State::upload_dir(const std::string& id, const std::string& participant) const {
  return collaboration_dir(id) / "uploads" / participant;
}
fs::path State::part_file(const std::string& id, const std::string& participant, int part,
                          bool complete) const {
  return upload_dir(id, participant) /
         (std::string(part_name(part)) + (complete ? ".f64" : ".partial"));
}
fs::path State::results_dir(const std::string& id) const {
  return collaboration_dir(id) / "results";
}
fs::path State::trash_dir() const { return root / "trash"; }

bool State::load_spec(const std::string& id, v1::CollaborationSpec* spec) {
  const auto blob = store->spec(id);
  if (!blob) return false;
  if (!spec->ParseFromString(*blob)) throw IoError("the stored spec of " + id + " is corrupt");
  return true;
}

bool State::uploaded(const std::string& id, const v1::CollaborationSpec& spec,
                     const std::string& participant) {
  int needed = 0, have = 0;
  for (int p : {v1::PART_ANCHOR, v1::PART_DATA, v1::PART_LABELS})
    if (needs_part(spec, static_cast<v1::Part>(p))) ++needed;
  for (const auto& r : store->parts(id, participant))
    if (r.complete && needs_part(spec, static_cast<v1::Part>(r.part))) ++have;
  return have == needed;
}

void State::queue_if_complete(const std::string& id) {
  v1::CollaborationSpec spec;
  if (!load_spec(id, &spec)) return;
  for (const auto& p : spec.participants())
    if (!uploaded(id, spec, p)) return;
  if (store->transition_job(id, {"none"}, "queued")) {
    note_queued({id, ""});
    log_event("info", "job_queued", {{"collaboration", id}, {"job", id}, {"by", "last upload"}});
    notify();
  }
}

void State::note_queued(const JobKey& job) {
  std::lock_guard<std::mutex> lock(times_mu);
  queued_since[job] = std::chrono::steady_clock::now();
}

void State::note_uploaded(const JobKey& job) {
  std::lock_guard<std::mutex> lock(times_mu);
  last_upload[job] = std::chrono::steady_clock::now();
}

JobKey State::release_job(const std::string& id, const std::string& participant) {
  return {id, store->is_late(id, participant) ? participant : std::string()};
}

void State::queue_enrolment(const std::string& id, const std::string& participant) {
  if (store->transition_job(id, {"none"}, "queued", participant)) {
    note_queued({id, participant});
    log_event("info", "job_queued",
              {{"collaboration", id}, {"job", job_id({id, participant})}, {"by", "late upload"}});
    notify();
  }
}

long State::participant_index(const std::string& id, const std::string& participant) {
  const auto all = store->participants(id);
  const auto it = std::find(all.begin(), all.end(), participant);
  return it == all.end() ? -1 : static_cast<long>(it - all.begin());
}

std::string State::job_id(const JobKey& job) {
  if (job.participant.empty()) return job.collaboration;
  return job.collaboration + "/enrol/" +
         std::to_string(participant_index(job.collaboration, job.participant));
}

void State::notify() {
  std::lock_guard<std::mutex> lock(mu);
  cv.notify_all();
}

}  // namespace dcalign::service
