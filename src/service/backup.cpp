// The online backup of a data directory (service/backup.hpp).
#include "service/backup.hpp"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "core/model_file.hpp"
#include "dcalign/error.hpp"
#include "service/common.hpp"
#include "service/state.hpp"
#include "service/store.hpp"

namespace dcalign::service {
namespace {

// An SQLite connection closed on every path. Not the server's Store: a backup reads a data
// directory of any schema version this server knows and leaves it at that version, where
// opening a Store would upgrade it.
struct Db {
  sqlite3* db = nullptr;
  ~Db() { sqlite3_close(db); }
  void open(const fs::path& p, int flags) {
    if (sqlite3_open_v2(p.c_str(), &db, flags, nullptr) != SQLITE_OK)
      throw IoError("cannot open the database " + p.string() + ": " +
                    (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_busy_timeout(db, 10000);
  }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      throw IoError("backup database: " + msg);
    }
  }
  // The rows of a one-column-or-more query, as text.
  std::vector<std::vector<std::string>> rows(const std::string& sql, const std::string& arg = "") {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
      throw IoError(std::string("backup database: ") + sqlite3_errmsg(db));
    if (!arg.empty()) sqlite3_bind_text(st, 1, arg.c_str(), -1, SQLITE_TRANSIENT);
    std::vector<std::vector<std::string>> out;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const unsigned char* t = sqlite3_column_text(st, c);
        row.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
      }
      out.push_back(std::move(row));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) throw IoError(std::string("backup database: ") + sqlite3_errmsg(db));
    return out;
  }
};

struct Copied {
  std::uint64_t files = 0, bytes = 0;
};

// Copies one file (flushed); false when the source is gone.
bool copy_file(const fs::path& from, const fs::path& to, Copied& n) {
  std::error_code ec;
  if (!fs::is_regular_file(from, ec)) return false;
  fs::create_directories(to.parent_path());
  if (!fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec)) {
    if (!fs::exists(from)) return false;
    throw IoError("cannot copy " + from.string() + " to " + to.string() + ": " + ec.message());
  }
  model_file::fsync_path(to, false);
  ++n.files;
  n.bytes += fs::file_size(to);
  return true;
}

// Copies a directory tree; false when the source is gone.
bool copy_tree(const fs::path& from, const fs::path& to, Copied& n) {
  std::error_code ec;
  if (!fs::is_directory(from, ec)) return false;
  for (auto it = fs::recursive_directory_iterator(from, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) copy_file(it->path(), to / fs::relative(it->path(), from), n);
  if (ec && fs::exists(from)) throw IoError("cannot read " + from.string() + ": " + ec.message());
  return fs::exists(from);
}

}  // namespace

std::string backup_data_dir(const fs::path& from, const fs::path& to) {
  const fs::path db_file = from / "dcalign.db";
  if (!fs::is_regular_file(db_file))
    throw InvalidInput("--data-dir " + from.string() +
                       " holds no dcalign.db: it is not a dcalign-server data directory");
  std::error_code ec;
  if (fs::exists(to, ec) || fs::is_symlink(to, ec))
    throw InvalidInput("--backup-to " + to.string() +
                       " exists: a backup goes to a new directory (nothing is overwritten)");
  const fs::path parent = fs::absolute(to).parent_path();
  if (!fs::is_directory(parent, ec))
    throw InvalidInput("--backup-to " + to.string() + ": its parent directory " + parent.string() +
                       " does not exist");
  // Not inside the directory it copies: the server would find it there among its own files.
  const fs::path source = fs::weakly_canonical(from, ec), into = fs::weakly_canonical(parent, ec);
  if (std::mismatch(source.begin(), source.end(), into.begin(), into.end()).first == source.end())
    throw InvalidInput("--backup-to " + to.string() + " is inside the data directory " +
                       from.string() + ": a backup goes elsewhere");
  const fs::path tmp = model_file::sibling(parent, to.filename(), "tmp");
  if (!fs::create_directory(tmp, ec))
    throw IoError("cannot create " + tmp.string() + ": " + ec.message());
  ::chmod(tmp.c_str(), 0700);
  struct RemoveUnlessDone {
    const fs::path& p;
    bool done = false;
    ~RemoveUnlessDone() {
      std::error_code e;
      if (!done) fs::remove_all(p, e);
    }
  } cleanup{tmp};

  // 1. The database, as one consistent snapshot (the server may write meanwhile: WAL readers
  // and the backup API do not block it).
  {
    Db src, dst;
    src.open(db_file, SQLITE_OPEN_READONLY);
    dst.open(tmp / "dcalign.db", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    sqlite3_backup* b = sqlite3_backup_init(dst.db, "main", src.db, "main");
    if (!b) throw IoError(std::string("cannot back up the database: ") + sqlite3_errmsg(dst.db));
    const int rc = sqlite3_backup_step(b, -1);
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE)
      throw IoError(std::string("the backup of the database failed: ") + sqlite3_errstr(rc));
  }

  // 2. The files the snapshot refers to: complete parts, and the published results of done jobs
  // (a late participant's only once its enrolment is done).
  // The copy keeps the source's schema version: a backup taken before an upgrade is the way
  // back to the server that wrote it. Version 1 (user_version 0) had one job per collaboration
  // and no late participants.
  Db copy;
  copy.open(tmp / "dcalign.db", SQLITE_OPEN_READWRITE);
  const int version = std::stoi(copy.rows("PRAGMA user_version").at(0).at(0));
  if (version > Store::kSchemaVersion)
    throw InvalidInput("the database " + db_file.string() + " has schema version " +
                       std::to_string(version) +
                       ", written by a newer dcalign-server: back it up with that server");
  const bool enrolments = version >= 2;
  Copied n;
  std::vector<std::string> dropped;
  std::uint64_t kept = 0;
  for (const auto& row : copy.rows("SELECT id FROM collaborations ORDER BY created")) {
    const std::string& id = row[0];
    const fs::path src = from / "collaborations" / id, dst = tmp / "collaborations" / id;
    if (!fs::is_directory(src, ec)) {
      // Deleted after the snapshot: as if it had been deleted before.
      for (const char* table : {"parts", "participants", "revoked_tokens", "jobs"})
        copy.rows(std::string("DELETE FROM ") + table + " WHERE collaboration = ?", id);
      copy.rows("DELETE FROM collaborations WHERE id = ?", id);
      dropped.push_back(id);
      continue;
    }
    fs::create_directories(dst / "uploads");
    for (const auto& p : copy.rows(
             "SELECT participant, part FROM parts WHERE collaboration = ? AND complete = 1", id)) {
      const std::string name = part_name(std::stoi(p[1])) + std::string(".f64");
      copy_file(src / "uploads" / p[0] / name, dst / "uploads" / p[0] / name, n);
    }
    std::set<std::string> done, late;
    for (const auto& j : copy.rows(enrolments ? "SELECT participant FROM jobs WHERE "
                                                "collaboration = ? AND state = 'done'"
                                              : "SELECT '' FROM jobs WHERE collaboration = ? AND "
                                                "state = 'done'",
                                   id))
      done.insert(j[0]);
    if (enrolments)
      for (const auto& p :
           copy.rows("SELECT name FROM participants WHERE collaboration = ? AND late = 1", id))
        late.insert(p[0]);
    if (done.count("") && fs::is_directory(src / "results", ec))
      for (const auto& e : fs::directory_iterator(src / "results")) {
        const std::string name = e.path().filename().string();
        if (late.count(name) && !done.count(name)) continue;
        if (e.is_directory()) copy_tree(e.path(), dst / "results" / name, n);
      }
    ++kept;
  }
  copy.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  model_file::fsync_path(tmp / "dcalign.db", false);
  for (auto it = fs::recursive_directory_iterator(tmp); it != fs::recursive_directory_iterator();
       ++it)
    if (it->is_directory()) model_file::fsync_path(it->path(), true);
  model_file::fsync_path(tmp, true);
  fs::rename(tmp, to);
  cleanup.done = true;
  model_file::fsync_path(parent, true);
  std::string summary = std::to_string(kept) + " collaborations, " + std::to_string(n.files) +
                        " files, " + bytes_in_words(n.bytes) + " copied to " + to.string();
  if (!dropped.empty())
    summary += "; " + std::to_string(dropped.size()) +
               " deleted during the backup were left out (" + dropped.front() +
               (dropped.size() > 1 ? ", ..." : "") + ")";
  return summary;
}

}  // namespace dcalign::service
