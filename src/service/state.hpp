#pragma once
// What the RPC handlers (rpc.cpp), the job worker (jobs.cpp) and the server's lifecycle
// (server.cpp) share. Internal to src/service.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/options.hpp"
#include "dcalign/service/v1/analyst.grpc.pb.h"
#include "service/data_dir.hpp"
#include "service/limits.hpp"
#include "service/metrics.hpp"
#include "service/server.hpp"
#include "service/store.hpp"
#include "service/workers.hpp"

namespace dcalign::service {

namespace fs = std::filesystem;

/// The directory of the model h in a job's results (shared by the participants; a participant's
/// name starts with a letter or digit, so it is never this).
inline constexpr const char* kModelDir = "_model";
/// The directory of the fitted Aligner in a job's results (a model directory of dcalign enroll):
/// what the enrolment of a late participant starts from. Never fetched by a participant.
inline constexpr const char* kAlignerDir = "_aligner";
/// The name a job's temporary results start with: "." kResultsTag ".tmp" (removed at start).
inline constexpr const char* kResultsTag = "results";

/// The bounds a collaboration spec must keep (check_spec).
struct SpecLimits {
  static constexpr std::uint64_t kMaxDim = 4096;
  static constexpr std::uint64_t kMaxAnchorRows = 1000000;
  static constexpr std::uint64_t kMaxFeatures = 1000000;
  static constexpr int kMaxParticipants = 1000;
  static constexpr std::uint64_t kMaxRows = 100000000;
  static constexpr std::uint32_t kMaxRanks = 1024;
};

/// Throws InvalidInput naming the field when `spec` is not a collaboration the server can run:
/// names, method, anchor, shapes within SpecLimits and `part_limit` bytes per part, options.
void check_spec(const v1::CollaborationSpec& spec, std::uint64_t part_limit);
/// What a spec asks of the alignment: its method, seed and options (the schema's spec keys,
/// dcalign/options.hpp), each checked; throws InvalidInput naming "spec.options.<key>".
AlignRequest align_request(const v1::CollaborationSpec& spec);
/// The alignment options of a checked spec. `float32` receives whether it asks for float32.
AlignOptions align_options(const v1::CollaborationSpec& spec, bool* float32);
/// Whether the collaboration needs `part` from every participant (data and labels only when
/// it trains a model).
bool needs_part(const v1::CollaborationSpec& spec, v1::Part part);
const char* part_name(int part);

struct State {
  explicit State(ServerOptions o);

  ServerOptions opts;
  fs::path root;
  /// SHA-256 of the analyst's token; replaced while the server runs (token rotation).
  std::string analyst_token_hash() const;
  void set_analyst_token(const std::string& token);
  std::unique_ptr<DataDirLock> lock;  ///< held from before the store is opened
  std::unique_ptr<Store> store;
  std::unique_ptr<ConnectionGuard> connections;
  std::unique_ptr<StreamWatchdog> watchdog;

  /// Answers of CreateCollaboration and ReissueToken by request id, kept in memory for
  /// kRetryWindowSeconds so that a retry gets the same tokens (analyst.proto, request_id).
  static constexpr double kRetryWindowSeconds = 600;
  static constexpr std::size_t kMaxAnswers = 10000;
  struct Answer {
    std::string request;   ///< the serialised request it answered
    std::string response;  ///< the serialised response
    std::chrono::steady_clock::time_point expires;
  };
  std::mutex answers_mu;
  std::map<std::string, Answer> answers;

  Metrics metrics;
  mutable std::mutex token_mu;
  std::string analyst_hash;  ///< under token_mu
  /// When each queued job was queued, and when each collaboration's last part was stored (for
  /// the metrics' queue and upload_to_run phases; lost at a restart).
  std::mutex times_mu;
  std::map<JobKey, std::chrono::steady_clock::time_point> queued_since, last_upload;
  void note_queued(const JobKey& job);
  void note_uploaded(const JobKey& job);

  std::mutex mu;  ///< guards everything below
  std::condition_variable cv;
  bool stopping = false;
  std::set<std::string> active_parts;  ///< "<id>/<participant>/<part>" being uploaded
  int upload_streams = 0;
  int fetch_streams = 0;
  std::map<std::string, int> streams_by_peer;  ///< Upload and Fetch streams by address
  std::set<std::string> running_jobs;          ///< the collaborations whose job runs now
  /// Round-robin across collaborations (pick_job): when each was last served, by a counter.
  std::map<std::string, std::uint64_t> last_served;
  std::uint64_t served_count = 0;
  std::map<JobKey, std::uint64_t> job_bytes;  ///< job_bytes of queued and running jobs
  std::map<JobKey, std::size_t> job_workers;  ///< running job -> the worker running it
  std::vector<WorkerSpec> workers;            ///< set at start (plan_workers)

  fs::path collaboration_dir(const std::string& id) const;
  fs::path upload_dir(const std::string& id, const std::string& participant) const;
  fs::path part_file(const std::string& id, const std::string& participant, int part,
                     bool complete) const;
  fs::path results_dir(const std::string& id) const;
  fs::path trash_dir() const;

  /// The stored spec (NOT_FOUND-worthy nullopt for an unknown id is the caller's).
  bool load_spec(const std::string& id, v1::CollaborationSpec* spec);
  /// Every part the collaboration needs is complete for `participant`.
  bool uploaded(const std::string& id, const v1::CollaborationSpec& spec,
                const std::string& participant);
  /// Queues the job when every participant has uploaded and it is not queued, running or done.
  void queue_if_complete(const std::string& id);
  /// The job that takes `participant`'s release: the collaboration's alignment, or, for a
  /// participant who joined late, its own enrolment.
  JobKey release_job(const std::string& id, const std::string& participant);
  /// Queues the enrolment of late participant `participant` once its anchor is in.
  void queue_enrolment(const std::string& id, const std::string& participant);
  /// The participant's index in its collaboration (the spec's order, then late participants in
  /// the order they joined), or -1: what the log names a participant by (never a token, nor a
  /// name an institution chose).
  long participant_index(const std::string& id, const std::string& participant);
  /// A job's id in the log: the collaboration's id for its alignment, "<id>/enrol/<index>" for
  /// the enrolment of its participant of that index.
  std::string job_id(const JobKey& job);
  /// Wakes the job worker.
  void notify();
};

/// Job worker `worker` (of state.workers): runs the jobs it picks (pick_job), one at a time,
/// until state.stopping. Its own thread.
void run_job_worker(State& state, std::size_t worker);
/// A stored part (raw column-major float64, as uploaded) of `rows` x `cols`; IoError naming the
/// file when it does not hold exactly that.
Matrix<double> read_stored_part(const fs::path& file, index_t rows, index_t cols);

/// Runs the alignment of `id` (and fits the model h) on `backend`, and publishes the results
/// with the fitted Aligner; returns the report (JSON).
std::string run_alignment_job(State& state, const std::string& id, const WorkerSpec& worker,
                              Backend& backend);
/// Enrols late participant `participant` of `id` against the published Aligner and publishes
/// its G_i beside the others' (which it does not touch); returns the report (JSON).
std::string run_enrolment_job(State& state, const std::string& id, const std::string& participant,
                              const WorkerSpec& worker, Backend& backend);
/// At start: an interrupted job (state running) is queued again; results.tmp.* and orphan
/// directories are removed; uploads in progress are cut back to their acknowledged length.
void recover(State& state);
/// The gRPC service.
std::unique_ptr<v1::Analyst::Service> make_service(State& state);

}  // namespace dcalign::service
