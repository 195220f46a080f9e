#include "service/data_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dcalign/error.hpp"
#include "service/common.hpp"

namespace dcalign::service {

namespace fs = std::filesystem;

DataDirLock::DataDirLock(const fs::path& dir) {
  const fs::path file = dir / "dcalign.lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) throw OsError("cannot open the lock file " + file.string(), errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {0};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw OsError("cannot lock " + file.string(), err);
    throw IoError("the data directory " + dir.string() + " is in use by another dcalign-server" +
                  (pid.empty() ? std::string() : " (PID " + pid + ")") +
                  ": one server per data directory (its lock: " + file.string() +
                  "). Stop that server, or give this one another --data-dir");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw OsError("cannot write the lock file " + file.string(), err);
  }
}

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

void check_database_present(const fs::path& dir, const fs::path& db) {
  std::error_code ec;
  const auto size = fs::file_size(db, ec);
  if (!ec && size > 0) return;
  const bool missing = static_cast<bool>(ec);
  const fs::path collaborations = dir / "collaborations";
  std::size_t count = 0;
  std::string example;
  if (fs::is_directory(collaborations, ec))
    for (const auto& e : fs::directory_iterator(collaborations, ec))
      if (e.is_directory(ec)) {
        if (example.empty()) example = e.path().filename().string();
        ++count;
      }
  if (count == 0) return;
  throw IoError("the database " + db.string() + " is " + (missing ? "missing" : "empty") +
                ", but " + collaborations.string() + " holds " + std::to_string(count) +
                " collaboration director" + (count == 1 ? "y" : "ies") + " (" + example +
                (count > 1 ? ", ..." : "") +
                "): the server does not start, since it would take all of them for orphans and "
                "delete them. Restore dcalign.db (with dcalign.db-wal, if there is one) from a "
                "backup; or, to give those collaborations up, move " +
                collaborations.string() + " out of the data directory and start again");
}

}  // namespace dcalign::service
