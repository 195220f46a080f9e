#pragma once
// dcalign-server's metadata in SQLite (WAL mode, synchronous=FULL: a committed change survives
// a crash of the process or the machine): collaborations, participants and the SHA-256 hashes
// of their tokens, upload progress and jobs. Matrices are files in the data directory (their
// paths: State's collaboration_dir, upload_dir and results_dir, service/state.hpp); this store
// records how far each is acknowledged. Every method is one
// transaction, serialised on one connection.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

struct sqlite3;

namespace dcalign::service {

/// Who a token belongs to.
struct Principal {
  std::string collaboration;
  std::string participant;
};

struct PartRecord {
  int part = 0;  ///< dcalign.service.v1.Part
  std::uint64_t rows = 0, cols = 0, total = 0, received = 0;
  std::string sha256;
  bool complete = false;
};

/// A job: a collaboration's alignment (participant empty) or the enrolment of a late participant.
struct JobKey {
  std::string collaboration, participant;
  bool operator<(const JobKey& o) const {
    return std::tie(collaboration, participant) < std::tie(o.collaboration, o.participant);
  }
  bool operator==(const JobKey& o) const {
    return collaboration == o.collaboration && participant == o.participant;
  }
};

struct JobRecord {
  std::string state = "none";  ///< none, queued, running, done, failed
  int attempts = 0;
  std::string error, report;
};

class Store {
 public:
  /// Opens (creating) the database file `path`. Throws IoError naming it.
  explicit Store(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// `spec` is the serialised CollaborationSpec; `participants` (name, token hash) pairs.
  void create_collaboration(const std::string& id, const std::string& spec,
                            const std::vector<std::pair<std::string, std::string>>& participants);
  /// The serialised spec, or nothing for an unknown id.
  std::optional<std::string> spec(const std::string& id);
  std::vector<std::string> participants(const std::string& id);
  /// Removes every row of the collaboration (its tokens become unknown) and records its id as
  /// deleted (a tombstone), in one transaction.
  void delete_collaboration(const std::string& id);
  std::vector<std::string> collaborations();
  /// The tombstones: collaborations deleted whose directory may still be on disk.
  std::vector<std::string> deleted_collaborations();
  void forget_deleted(const std::string& id);

  std::optional<Principal> find_token(const std::string& token_hash);
  bool token_revoked(const std::string& token_hash);
  /// Replaces the participant's token hash, keeping the old one as revoked.
  bool replace_token(const std::string& id, const std::string& participant,
                     const std::string& new_hash);

  std::optional<PartRecord> part(const std::string& id, const std::string& participant, int part);
  std::vector<PartRecord> parts(const std::string& id, const std::string& participant);
  /// Starts (or restarts from 0) the upload of a part.
  void start_part(const std::string& id, const std::string& participant, const PartRecord& r);
  /// false when the part's row is gone (the collaboration or the release was deleted).
  bool set_received(const std::string& id, const std::string& participant, int part,
                    std::uint64_t received);
  bool complete_part(const std::string& id, const std::string& participant, int part);
  void delete_part(const std::string& id, const std::string& participant, int part);
  void delete_parts(const std::string& id, const std::string& participant);

  /// The collaboration's alignment job, or with `enrolment` the enrolment of that late
  /// participant.
  JobRecord job(const std::string& id, const std::string& enrolment = "");
  void set_job(const std::string& id, const JobRecord& j, const std::string& enrolment = "");
  /// Atomically moves a job from one of `from` to `to` (attempts + 1 when `to` is "running");
  /// false when the job was in none of them.
  bool transition_job(const std::string& id, const std::vector<std::string>& from,
                      const std::string& to, const std::string& enrolment = "");
  /// The jobs in `state`, oldest change first.
  std::vector<JobKey> jobs_in(const std::string& state);

  /// Adds a participant who joins after the run (with its enrolment job, state none); false
  /// when the collaboration already has one of that name.
  bool add_late_participant(const std::string& id, const std::string& name,
                            const std::string& token_hash);
  std::vector<std::string> late_participants(const std::string& id);
  bool is_late(const std::string& id, const std::string& participant);

  /// The schema version this server writes; it opens versions 1 to this one (older ones are
  /// upgraded in place, in one transaction) and refuses newer ones.
  static constexpr int kSchemaVersion = 2;

 private:
  void exec(const char* sql);
  void migrate();
  sqlite3* db_ = nullptr;
  std::string path_;
  std::mutex mu_;
};

}  // namespace dcalign::service
