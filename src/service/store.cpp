#include "service/store.hpp"

#include <sqlite3.h>

#include <chrono>

#include <cerrno>

#include "dcalign/error.hpp"
#include "service/common.hpp"

namespace dcalign::service {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A failed SQLite call of `db`: a full disk (SQLITE_FULL) as ENOSPC, which callers report as
// RESOURCE_EXHAUSTED, anything else as IoError.
[[noreturn]] void database_failure(sqlite3* db, const std::string& message) {
  if (sqlite3_errcode(db) == SQLITE_FULL) throw OsError(message, ENOSPC);
  throw IoError(message);
}

// One prepared statement: bind by position (1-based), step, read columns.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) fail("prepare");
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind_text(int i, const std::string& v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(s_, i, v));
    return *this;
  }
  /// True while a row is available.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail("step");
  }
  void run() {
    while (step()) {
    }
  }
  std::int64_t integer(int c) const { return sqlite3_column_int64(s_, c); }
  std::string blob(int c) const {
    const void* p = sqlite3_column_blob(s_, c);
    const int n = sqlite3_column_bytes(s_, c);
    return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
  }
  std::string text(int c) const {
    const unsigned char* p = sqlite3_column_text(s_, c);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail("bind");
  }
  [[noreturn]] void fail(const char* what) {
    database_failure(db_, "database " + path_ + ": " + what + " failed: " + sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  const std::string& path_;
};

// Version 2 of the schema (PRAGMA user_version). Version 1 (dcalign 0.2 and 0.3, which set no
// user_version) had one job per collaboration and no late participants; migrate() brings it
// here. A database of a later version is refused (a newer server wrote it).
constexpr const char* kSchema = R"sql(
CREATE TABLE collaborations (
  id TEXT PRIMARY KEY, spec BLOB NOT NULL, created REAL NOT NULL);
CREATE TABLE participants (
  collaboration TEXT NOT NULL, name TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
  late INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (collaboration, name));
CREATE TABLE revoked_tokens (token_hash TEXT PRIMARY KEY, collaboration TEXT);
CREATE TABLE parts (
  collaboration TEXT NOT NULL, participant TEXT NOT NULL, part INTEGER NOT NULL,
  rows INTEGER NOT NULL, cols INTEGER NOT NULL, total INTEGER NOT NULL,
  received INTEGER NOT NULL, sha256 TEXT NOT NULL, complete INTEGER NOT NULL,
  PRIMARY KEY (collaboration, participant, part));
CREATE TABLE deleted_collaborations (id TEXT PRIMARY KEY, deleted REAL NOT NULL);
CREATE TABLE jobs (
  collaboration TEXT NOT NULL, participant TEXT NOT NULL, state TEXT NOT NULL,
  attempts INTEGER NOT NULL, error TEXT NOT NULL, report TEXT NOT NULL, updated REAL NOT NULL,
  PRIMARY KEY (collaboration, participant));
PRAGMA user_version = 2;
)sql";

// Version 1 to 2: jobs gain the participant they enrol ('' for a collaboration's alignment),
// participants whether they joined late.
constexpr const char* kVersion1To2 = R"sql(
CREATE TABLE jobs_v2 (
  collaboration TEXT NOT NULL, participant TEXT NOT NULL, state TEXT NOT NULL,
  attempts INTEGER NOT NULL, error TEXT NOT NULL, report TEXT NOT NULL, updated REAL NOT NULL,
  PRIMARY KEY (collaboration, participant));
INSERT INTO jobs_v2 SELECT collaboration, '', state, attempts, error, report, updated FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v2 RENAME TO jobs;
ALTER TABLE participants ADD COLUMN late INTEGER NOT NULL DEFAULT 0;
PRAGMA user_version = 2;
)sql";

}  // namespace

Store::Store(const std::string& path) : path_(path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw IoError("cannot open the database " + path + ": " + msg);
  }
  // A constructor that throws runs no destructor: the connection is closed here instead (a
  // database of a newer schema, a failed upgrade, a full disk).
  try {
    sqlite3_busy_timeout(db_, 5000);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
    exec("PRAGMA foreign_keys=ON");
    migrate();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void Store::migrate() {
  exec("BEGIN IMMEDIATE");
  try {
    int version = 0;
    bool empty = true;
    {
      Stmt v(db_, "PRAGMA user_version", path_);
      if (v.step()) version = static_cast<int>(v.integer(0));
      Stmt t(db_, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'collaborations'",
             path_);
      empty = !t.step();
    }
    if (version > kSchemaVersion)
      throw IoError("the database " + path_ + " has schema version " + std::to_string(version) +
                    ", written by a newer dcalign-server; this one reads versions 1 to " +
                    std::to_string(kSchemaVersion) +
                    ". Run the newer server, or restore a backup this version wrote");
    if (empty) {
      exec(kSchema);
    } else if (version < 2) {  // 0: version 1, which set no user_version
      exec(kVersion1To2);
      log_event("info", "database_upgraded", {{"from", 1}, {"to", kSchemaVersion}});
    }
    exec("COMMIT");
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
}

Store::~Store() { sqlite3_close(db_); }

void Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = "database " + path_ + ": " + (err ? err : "unknown error");
    sqlite3_free(err);
    database_failure(db_, msg);
  }
}

void Store::create_collaboration(
    const std::string& id, const std::string& spec,
    const std::vector<std::pair<std::string, std::string>>& participants) {
  std::lock_guard<std::mutex> lock(mu_);
  exec("BEGIN IMMEDIATE");
  try {
    Stmt(db_, "INSERT INTO collaborations VALUES (?, ?, ?)", path_)
        .bind_text(1, id)
        .bind(2, spec)
        .bind(3, now())
        .run();
    for (const auto& [name, hash] : participants)
      Stmt(db_, "INSERT INTO participants VALUES (?, ?, ?, 0)", path_)
          .bind_text(1, id)
          .bind_text(2, name)
          .bind_text(3, hash)
          .run();
    Stmt(db_, "INSERT INTO jobs VALUES (?, '', 'none', 0, '', '', ?)", path_)
        .bind_text(1, id)
        .bind(2, now())
        .run();
    exec("COMMIT");
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
}

std::optional<std::string> Store::spec(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT spec FROM collaborations WHERE id = ?", path_);
  s.bind_text(1, id);
  if (!s.step()) return std::nullopt;
  return s.blob(0);
}

std::vector<std::string> Store::participants(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT name FROM participants WHERE collaboration = ? ORDER BY rowid", path_);
  s.bind_text(1, id);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

void Store::delete_collaboration(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  exec("BEGIN IMMEDIATE");
  try {
    for (const char* sql :
         {"DELETE FROM parts WHERE collaboration = ?",
          "DELETE FROM participants WHERE collaboration = ?",
          "DELETE FROM revoked_tokens WHERE collaboration = ?",
          "DELETE FROM jobs WHERE collaboration = ?", "DELETE FROM collaborations WHERE id = ?"})
      Stmt(db_, sql, path_).bind_text(1, id).run();
    // The tombstone proves to recover() that the directory, if a crash left it, is an orphan.
    Stmt(db_, "INSERT OR REPLACE INTO deleted_collaborations VALUES (?, ?)", path_)
        .bind_text(1, id)
        .bind(2, now())
        .run();
    exec("COMMIT");
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
}

std::vector<std::string> Store::collaborations() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT id FROM collaborations ORDER BY created", path_);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

std::vector<std::string> Store::deleted_collaborations() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT id FROM deleted_collaborations ORDER BY deleted", path_);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

void Store::forget_deleted(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt(db_, "DELETE FROM deleted_collaborations WHERE id = ?", path_).bind_text(1, id).run();
}

std::optional<Principal> Store::find_token(const std::string& token_hash) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT collaboration, name FROM participants WHERE token_hash = ?", path_);
  s.bind_text(1, token_hash);
  if (!s.step()) return std::nullopt;
  return Principal{s.text(0), s.text(1)};
}

bool Store::token_revoked(const std::string& token_hash) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT 1 FROM revoked_tokens WHERE token_hash = ?", path_);
  s.bind_text(1, token_hash);
  return s.step();
}

bool Store::replace_token(const std::string& id, const std::string& participant,
                          const std::string& new_hash) {
  std::lock_guard<std::mutex> lock(mu_);
  exec("BEGIN IMMEDIATE");
  try {
    std::string old;
    {
      Stmt q(db_, "SELECT token_hash FROM participants WHERE collaboration = ? AND name = ?",
             path_);
      q.bind_text(1, id).bind_text(2, participant);
      if (q.step()) old = q.text(0);
    }
    if (old.empty()) {
      exec("ROLLBACK");
      return false;
    }
    Stmt(db_, "INSERT OR IGNORE INTO revoked_tokens VALUES (?, ?)", path_)
        .bind_text(1, old)
        .bind_text(2, id)
        .run();
    Stmt(db_, "UPDATE participants SET token_hash = ? WHERE collaboration = ? AND name = ?", path_)
        .bind_text(1, new_hash)
        .bind_text(2, id)
        .bind_text(3, participant)
        .run();
    exec("COMMIT");
    return true;
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
}

namespace {
PartRecord read_part(const Stmt& s) {
  PartRecord r;
  r.part = static_cast<int>(s.integer(0));
  r.rows = static_cast<std::uint64_t>(s.integer(1));
  r.cols = static_cast<std::uint64_t>(s.integer(2));
  r.total = static_cast<std::uint64_t>(s.integer(3));
  r.received = static_cast<std::uint64_t>(s.integer(4));
  r.sha256 = s.text(5);
  r.complete = s.integer(6) != 0;
  return r;
}
constexpr const char* kPartColumns =
    "SELECT part, rows, cols, total, received, sha256, complete FROM parts ";
}  // namespace

std::optional<PartRecord> Store::part(const std::string& id, const std::string& participant,
                                      int part) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         (std::string(kPartColumns) + "WHERE collaboration = ? AND participant = ? AND part = ?")
             .c_str(),
         path_);
  s.bind_text(1, id).bind_text(2, participant).bind(3, std::int64_t{part});
  if (!s.step()) return std::nullopt;
  return read_part(s);
}

std::vector<PartRecord> Store::parts(const std::string& id, const std::string& participant) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         (std::string(kPartColumns) + "WHERE collaboration = ? AND participant = ? ORDER BY part")
             .c_str(),
         path_);
  s.bind_text(1, id).bind_text(2, participant);
  std::vector<PartRecord> out;
  while (s.step()) out.push_back(read_part(s));
  return out;
}

void Store::start_part(const std::string& id, const std::string& participant, const PartRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt(db_, "INSERT OR REPLACE INTO parts VALUES (?, ?, ?, ?, ?, ?, 0, ?, 0)", path_)
      .bind_text(1, id)
      .bind_text(2, participant)
      .bind(3, std::int64_t{r.part})
      .bind(4, static_cast<std::int64_t>(r.rows))
      .bind(5, static_cast<std::int64_t>(r.cols))
      .bind(6, static_cast<std::int64_t>(r.total))
      .bind_text(7, r.sha256)
      .run();
}

bool Store::set_received(const std::string& id, const std::string& participant, int part,
                         std::uint64_t received) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt(db_,
       "UPDATE parts SET received = ? WHERE collaboration = ? AND participant = ? AND part = ?",
       path_)
      .bind(1, static_cast<std::int64_t>(received))
      .bind_text(2, id)
      .bind_text(3, participant)
      .bind(4, std::int64_t{part})
      .run();
  return sqlite3_changes(db_) > 0;
}

bool Store::complete_part(const std::string& id, const std::string& participant, int part) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt(db_,
       "UPDATE parts SET complete = 1 WHERE collaboration = ? AND participant = ? AND part = ?",
       path_)
      .bind_text(1, id)
      .bind_text(2, participant)
      .bind(3, std::int64_t{part})
      .run();
  return sqlite3_changes(db_) > 0;
}

void Store::delete_part(const std::string& id, const std::string& participant, int part) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt(db_, "DELETE FROM parts WHERE collaboration = ? AND participant = ? AND part = ?", path_)
      .bind_text(1, id)
      .bind_text(2, participant)
      .bind(3, std::int64_t{part})
      .run();
}

void Store::delete_parts(const std::string& id, const std::string& participant) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt(db_, "DELETE FROM parts WHERE collaboration = ? AND participant = ?", path_)
      .bind_text(1, id)
      .bind_text(2, participant)
      .run();
}

JobRecord Store::job(const std::string& id, const std::string& enrolment) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "SELECT state, attempts, error, report FROM jobs WHERE collaboration = ? AND "
         "participant = ?",
         path_);
  s.bind_text(1, id).bind_text(2, enrolment);
  JobRecord j;
  if (s.step()) {
    j.state = s.text(0);
    j.attempts = static_cast<int>(s.integer(1));
    j.error = s.text(2);
    j.report = s.text(3);
  }
  return j;
}

void Store::set_job(const std::string& id, const JobRecord& j, const std::string& enrolment) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt(db_,
       "UPDATE jobs SET state = ?, attempts = ?, error = ?, report = ?, updated = ? "
       "WHERE collaboration = ? AND participant = ?",
       path_)
      .bind_text(1, j.state)
      .bind(2, std::int64_t{j.attempts})
      .bind_text(3, j.error)
      .bind_text(4, j.report)
      .bind(5, now())
      .bind_text(6, id)
      .bind_text(7, enrolment)
      .run();
}

bool Store::transition_job(const std::string& id, const std::vector<std::string>& from,
                           const std::string& to, const std::string& enrolment) {
  std::lock_guard<std::mutex> lock(mu_);
  exec("BEGIN IMMEDIATE");
  try {
    bool ok = false;
    {
      Stmt q(db_, "SELECT state FROM jobs WHERE collaboration = ? AND participant = ?", path_);
      q.bind_text(1, id).bind_text(2, enrolment);
      if (q.step())
        for (const auto& f : from) ok = ok || q.text(0) == f;
    }
    if (ok)
      Stmt(db_,
           "UPDATE jobs SET state = ?, attempts = attempts + ?, error = '', updated = ? "
           "WHERE collaboration = ? AND participant = ?",
           path_)
          .bind_text(1, to)
          .bind(2, std::int64_t{to == "running" ? 1 : 0})
          .bind(3, now())
          .bind_text(4, id)
          .bind_text(5, enrolment)
          .run();
    exec(ok ? "COMMIT" : "ROLLBACK");
    return ok;
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
}

std::vector<JobKey> Store::jobs_in(const std::string& state) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT collaboration, participant FROM jobs WHERE state = ? ORDER BY updated",
         path_);
  s.bind_text(1, state);
  std::vector<JobKey> out;
  while (s.step()) out.push_back({s.text(0), s.text(1)});
  return out;
}

bool Store::add_late_participant(const std::string& id, const std::string& name,
                                 const std::string& token_hash) {
  std::lock_guard<std::mutex> lock(mu_);
  exec("BEGIN IMMEDIATE");
  try {
    {
      Stmt q(db_, "SELECT 1 FROM participants WHERE collaboration = ? AND name = ?", path_);
      q.bind_text(1, id).bind_text(2, name);
      if (q.step()) {
        exec("ROLLBACK");
        return false;
      }
    }
    Stmt(db_, "INSERT INTO participants VALUES (?, ?, ?, 1)", path_)
        .bind_text(1, id)
        .bind_text(2, name)
        .bind_text(3, token_hash)
        .run();
    Stmt(db_, "INSERT INTO jobs VALUES (?, ?, 'none', 0, '', '', ?)", path_)
        .bind_text(1, id)
        .bind_text(2, name)
        .bind(3, now())
        .run();
    exec("COMMIT");
    return true;
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
}

std::vector<std::string> Store::late_participants(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT name FROM participants WHERE collaboration = ? AND late = 1 ORDER BY rowid",
         path_);
  s.bind_text(1, id);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

bool Store::is_late(const std::string& id, const std::string& participant) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT late FROM participants WHERE collaboration = ? AND name = ?", path_);
  s.bind_text(1, id).bind_text(2, participant);
  return s.step() && s.integer(0) == 1;
}

}  // namespace dcalign::service
