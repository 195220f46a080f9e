#pragma once
// The data directory's guards (internal to src/service): one server per directory, and no start
// on a directory whose database is missing or empty beside collaborations on disk.
#include <filesystem>
#include <string>

namespace dcalign::service {

/// An exclusive lock on DIR/dcalign.lock (flock), held for the object's life and released by
/// the kernel when the process dies, kill -9 included. The file holds the holder's PID. A second
/// server (or a second Server object) on the same directory gets IoError naming that PID.
class DataDirLock {
 public:
  explicit DataDirLock(const std::filesystem::path& dir);
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  int fd_ = -1;
};

/// Before the store is opened: throws IoError when `db` is missing or empty while `dir` holds
/// collaboration directories (starting would make the server take every one of them for an
/// orphan). The message says how to recover.
void check_database_present(const std::filesystem::path& dir, const std::filesystem::path& db);

}  // namespace dcalign::service
