#include "io/staged_outputs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include "dcalign/error.hpp"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)  // <linux/fs.h>; older C libraries lack the declaration
#endif

namespace dcalign::io {

namespace fs = std::filesystem;

namespace {

// ---- temporaries removed on a fatal signal. A fixed table of C strings, so that the handler
// reads it without allocating or locking (only async-signal-safe calls in the handler).
constexpr int kSlots = 256;
std::atomic<char*> g_paths[kSlots];
std::atomic<bool> g_directory[kSlots];

// A directory under construction (a model, a fetched result): its entries, then itself. A
// subdirectory is emptied the same way, at most kRawDepth levels down, on the handler's stack.
constexpr int kRawDepth = 4;
void remove_tree_at(int parent, const char* name, int depth) {
  const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    struct Dirent64 {
      unsigned long long ino;
      long long off;
      unsigned short reclen;
      unsigned char type;
      char name[1];
    };
    alignas(8) char buf[2048];
    for (int rounds = 0; rounds < 64; ++rounds) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
        const char* entry = buf + off + offsetof(Dirent64, name);
        if (!(entry[0] == '.' && (entry[1] == 0 || (entry[1] == '.' && entry[2] == 0)))) {
          if (d->type == 4 /* DT_DIR */ && depth < kRawDepth)
            remove_tree_at(fd, entry, depth + 1);
          else
            ::unlinkat(fd, entry, 0);
        }
        off += d->reclen;
      }
    }
    ::close(fd);
  }
  ::unlinkat(parent, name, AT_REMOVEDIR);
}

void remove_directory_raw(const char* path) { remove_tree_at(AT_FDCWD, path, 0); }

extern "C" void remove_temporaries_and_die(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    char* p = g_paths[i].exchange(nullptr);
    if (!p) continue;
    if (g_directory[i].load())
      remove_directory_raw(p);
    else
      ::unlink(p);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// The directory entry that writing `path` replaces: the canonical parent and the file name
// (the last component is not resolved: a symbolic link there is replaced, not followed).
std::string entry_of(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(path), ec);
  if (!p.has_filename()) p = p.parent_path();
  const fs::path parent = fs::weakly_canonical(p.parent_path(), ec);
  return (parent / p.filename()).lexically_normal().string();
}

std::string resolved_of(const std::string& path) {
  std::error_code ec;
  return fs::weakly_canonical(fs::absolute(fs::path(path), ec), ec).lexically_normal().string();
}

bool same_or_inside(const std::string& p, const std::string& dir) {
  if (p == dir) return true;
  const std::string prefix = dir.back() == '/' ? dir : dir + "/";
  return p.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

void register_temporary(const std::string& path, bool directory) {
  char* copy = ::strdup(path.c_str());
  if (!copy) return;
  for (int i = 0; i < kSlots; ++i) {
    char* expected = nullptr;
    g_directory[i].store(directory);
    if (g_paths[i].compare_exchange_strong(expected, copy)) return;
  }
  std::free(copy);  // table full: this temporary is still removed by its owner on any error
}

void forget_temporary(const std::string& path) {
  for (int i = 0; i < kSlots; ++i) {
    char* p = g_paths[i].load();
    if (p && path == p && g_paths[i].compare_exchange_strong(p, nullptr)) {
      std::free(p);
      return;
    }
  }
}

void install_signal_cleanup() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ}) {
    struct sigaction sa {};
    sa.sa_handler = remove_temporaries_and_die;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

void check_replaceable_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there (or unreachable: stage says)
  if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) return;
  if (S_ISDIR(st.st_mode))
    throw InvalidInput(what + " '" + path + "' is a directory; expected a file name");
  const char* kind = S_ISCHR(st.st_mode)    ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  throw InvalidInput(what + " '" + path + "' is " + kind +
                     "; outputs are written to a new regular file that replaces the path, which "
                     "would destroy it: expected a regular file or a new name");
}

StagedOutputs::~StagedOutputs() {
  for (const auto& e : entries_)
    if (!e.tmp.empty()) {
      std::remove(e.tmp.c_str());
      forget_temporary(e.tmp);
    }
}

void StagedOutputs::protect(const std::string& path, const std::string& what, bool tree) {
  if (path.empty()) return;
  Input in{entry_of(path), resolved_of(path), what, tree};
  for (const auto& e : entries_)
    if (e.entry == in.entry || e.entry == in.resolved ||
        (tree && (same_or_inside(e.entry, in.resolved) || same_or_inside(e.entry, in.entry))))
      throw InvalidInput(e.what + " '" + e.dest + "' would replace " +
                         (tree ? "a file of the input " : "the input ") + what + " '" + path +
                         "'; choose another output path");
  inputs_.push_back(std::move(in));
}

void StagedOutputs::reserve_directory(const std::string& path, const std::string& what) {
  if (path.empty()) throw InvalidInput(what + ": empty path");
  Entry d{path, "", what, entry_of(path)};
  for (const auto& e : entries_)
    if (same_or_inside(e.entry, d.entry))
      throw InvalidInput(e.what + " '" + e.dest + "' and " + what + " '" + path +
                         "' clash: the model directory would replace it; choose another path");
  for (const auto& in : inputs_)
    if (same_or_inside(in.entry, d.entry) || same_or_inside(in.resolved, d.entry) ||
        (in.tree && same_or_inside(d.entry, in.resolved)))
      throw InvalidInput(what + " '" + path + "' would replace the input " + in.what +
                         "; choose another output path");
  directories_.push_back(std::move(d));
}

std::string StagedOutputs::stage(const std::string& path, const std::string& what, Stage mode) {
  if (path.empty()) throw InvalidInput(what + ": empty path");
  const fs::path p(path);
  if (!p.has_filename()) throw InvalidInput(what + " '" + path + "': not a file name");
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InvalidInput(what + " '" + path + "': directory '" + dir.string() + "' does not exist");
  if (fs::is_directory(p, ec))
    throw InvalidInput(what + " '" + path + "' is a directory; expected a file name");
  check_replaceable_file(path, what);
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw InvalidInput(what + " '" + path + "': cannot write in directory '" + dir.string() +
                       "' (" + std::strerror(errno) + ")");

  const std::string entry = entry_of(path);
  for (const auto& in : inputs_)
    if (entry == in.entry || entry == in.resolved ||
        (in.tree && (same_or_inside(entry, in.resolved) || same_or_inside(entry, in.entry))))
      throw InvalidInput(what + " '" + path + "' would replace " +
                         (in.tree ? "a file of the input " : "the input ") + in.what +
                         "; choose another output path");
  for (const auto& d : directories_)
    if (same_or_inside(entry, d.entry))
      throw InvalidInput(what + " '" + path + "' and " + d.what + " '" + d.dest +
                         "' clash: the model directory would replace it; choose another path");
  for (const auto& e : entries_)
    if (e.entry == entry)
      throw InvalidInput(what + " and " + e.what + " name the same file '" + path + "'");
  if (mode == Stage::new_private) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0)
      throw InvalidInput(what + " '" + path +
                         "' exists: a new secret is never written over a file; choose a new "
                         "name, or move the file away yourself");
  }
  // pid and a process-wide counter: distinct for every staging object and thread of the process.
  static std::atomic<unsigned long long> counter{0};
  const std::string tmp =
      (dir / ("." + p.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
              std::to_string(counter.fetch_add(1))))
          .string();
  register_temporary(tmp);
  if (mode == Stage::new_private) {
    // Created now, private from its first byte: a directory that takes no new file (read-only,
    // full, no permission) fails here, before the caller does anything it cannot undo.
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int err = errno;
      forget_temporary(tmp);
      throw InvalidInput(what + " '" + path + "': cannot create a file in directory '" +
                         dir.string() + "' (" + std::strerror(err) + ")");
    }
    ::close(fd);
  }
  entries_.push_back({path, tmp, what, entry, mode});
  return tmp;
}

void StagedOutputs::commit() {
  for (auto& e : entries_) {
    if (e.mode == Stage::new_private) {
      // Flushed, then linked: link(2) never replaces a file that appeared since stage().
      fsync_path(e.tmp, false);
      if (::link(e.tmp.c_str(), e.dest.c_str()) != 0)
        throw IoError("cannot put the new " + e.what + " file in place at '" + e.dest + "' (" +
                      std::strerror(errno) + ")");
      ::unlink(e.tmp.c_str());
    } else if (std::rename(e.tmp.c_str(), e.dest.c_str()) != 0) {
      throw IoError("cannot move the new " + e.what + " file into place at '" + e.dest + "' (" +
                    std::strerror(errno) + ")");
    }
    forget_temporary(e.tmp);
    e.tmp.clear();
  }
  entries_.clear();
}

void fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) {
    if (directory) return;  // best effort: some file systems do not open directories
    throw IoError("cannot open '" + p.string() + "' to flush it: " + std::strerror(errno));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !directory)
    throw IoError("cannot flush '" + p.string() + "' to disk: " + std::strerror(err));
}

// ---------------------------------------------------------------- written directories

namespace {

constexpr const char* kWrittenFormat = "dcalign-fetch";
constexpr std::uintmax_t kMaxMarkerBytes = 1 << 20;

// The files a marker lists, or a reason why `dir`'s marker is not one.
std::vector<std::string> marker_files(const fs::path& dir, std::string* why) {
  const fs::path marker = dir / kWrittenMarker;
  std::error_code ec;
  const auto st = fs::symlink_status(marker, ec);
  if (st.type() != fs::file_type::regular) {
    *why = "it has no marker " + std::string(kWrittenMarker);
    return {};
  }
  if (fs::file_size(marker, ec) > kMaxMarkerBytes || ec) {
    *why = "its marker is larger than a marker can be";
    return {};
  }
  std::ifstream in(marker, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto j = nlohmann::json::parse(text, nullptr, false);
  // Typed checks before any get(): a marker is data, and nlohmann's value() throws on a "format"
  // that is not a string (fuzz_outputs found it).
  if (j.is_discarded() || !j.is_object() || !j.contains("format") || !j["format"].is_string() ||
      j["format"].get<std::string>() != kWrittenFormat || !j.contains("format_version") ||
      !j["format_version"].is_number_integer() || !j.contains("files") || !j["files"].is_array()) {
    *why = "its marker is not one of dcalign's";
    return {};
  }
  std::vector<std::string> files;
  for (const auto& f : j["files"]) {
    if (!f.is_string()) {
      *why = "its marker is not one of dcalign's";
      return {};
    }
    files.push_back(f.get<std::string>());
  }
  return files;
}

// Every entry below `dir`, relative with '/' separators, with its type; symbolic links are
// listed as links, never followed.
void list_tree(const fs::path& dir, const fs::path& rel,
               std::vector<std::pair<std::string, fs::file_type>>& out) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / rel, ec)) {
    const fs::path r = rel / e.path().filename();
    const auto type = e.symlink_status(ec).type();
    out.emplace_back(r.generic_string(), type);
    if (type == fs::file_type::directory && out.size() < 100000) list_tree(dir, r, out);
  }
  if (ec) throw InvalidInput("cannot list '" + (dir / rel).string() + "' (" + ec.message() + ")");
}

}  // namespace

void check_replaceable_directory(const std::string& dir, const std::string& what) {
  const fs::path d(dir);
  std::error_code ec;
  const auto st = fs::symlink_status(d, ec);
  if (st.type() == fs::file_type::not_found) return;
  const auto refuse = [&](const std::string& why) {
    throw InvalidInput(what + " '" + dir + "' " + why +
                       ": not replaced. A fetch replaces only a directory that it wrote itself "
                       "(marked by " +
                       kWrittenMarker +
                       ", holding nothing else); choose a new directory, or remove it yourself");
  };
  if (st.type() == fs::file_type::symlink) refuse("is a symbolic link");
  if (st.type() != fs::file_type::directory) refuse("exists and is not a directory");
  std::vector<std::pair<std::string, fs::file_type>> entries;
  list_tree(d, "", entries);
  if (entries.empty()) return;
  std::string why;
  const std::vector<std::string> files = marker_files(d, &why);
  if (!why.empty())
    refuse("holds '" + entries.front().first + "', which a fetch did not write (" + why + ")");
  const std::set<std::string> listed(files.begin(), files.end());
  for (const auto& [name, type] : entries) {
    if (name == kWrittenMarker) continue;
    if (type == fs::file_type::directory) {
      const std::string prefix = name + "/";
      const bool parent = std::any_of(files.begin(), files.end(), [&](const std::string& f) {
        return f.compare(0, prefix.size(), prefix) == 0;
      });
      if (!parent) refuse("holds the directory '" + name + "', which a fetch did not write");
      continue;
    }
    if (type == fs::file_type::symlink) refuse("holds the symbolic link '" + name + "'");
    if (type != fs::file_type::regular || !listed.count(name))
      refuse("holds '" + name + "', which a fetch did not write");
  }
}

void mark_written_directory(const std::string& dir, const std::string& about_json) {
  std::vector<std::pair<std::string, fs::file_type>> entries;
  list_tree(dir, "", entries);
  nlohmann::ordered_json j = {{"format", kWrittenFormat}, {"format_version", 1}};
  const auto about = nlohmann::json::parse(about_json);
  for (const auto& [k, v] : about.items()) j[k] = v;
  std::vector<std::string> files;
  for (const auto& [name, type] : entries) {
    if (type == fs::file_type::regular && name != kWrittenMarker)
      files.push_back(name);
    else if (type != fs::file_type::directory)
      throw IoError("cannot mark '" + dir + "': '" + name + "' is not a regular file");
  }
  std::sort(files.begin(), files.end());
  j["files"] = files;
  const fs::path marker = fs::path(dir) / kWrittenMarker;
  {
    std::ofstream out(marker, std::ios::binary | std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out.flush()) throw IoError("cannot write '" + marker.string() + "'");
  }
  for (const auto& [name, type] : entries)
    fsync_path(fs::path(dir) / name, type == fs::file_type::directory);
  fsync_path(marker, false);
  fsync_path(dir, true);
}

std::string swap_into_place(const std::string& tmp, const std::string& dest) {
  const auto fail = [&](const std::string& what, int err) {
    throw IoError("cannot put the new directory in place at '" + dest + "': " + what + " (" +
                  std::strerror(err) + ")");
  };
  std::error_code ec;
  if (fs::symlink_status(dest, ec).type() == fs::file_type::not_found) {
    if (::rename(tmp.c_str(), dest.c_str()) != 0) fail("rename failed", errno);
    return "";
  }
#ifdef SYS_renameat2
  if (::syscall(SYS_renameat2, AT_FDCWD, tmp.c_str(), AT_FDCWD, dest.c_str(), RENAME_EXCHANGE) == 0)
    return tmp;  // the old directory is where the new one was
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != EOPNOTSUPP)
    fail("the atomic exchange failed", errno);
#endif
  const fs::path d(dest);
  static std::atomic<unsigned long long> counter{0};
  const fs::path old =
      d.parent_path() / ("." + d.filename().string() + ".old." + std::to_string(::getpid()) + "." +
                         std::to_string(counter.fetch_add(1)));
  if (::rename(dest.c_str(), old.c_str()) != 0) fail("cannot move the old one aside", errno);
  if (::rename(tmp.c_str(), dest.c_str()) != 0) {
    const int err = errno;
    ::rename(old.c_str(), dest.c_str());
    fail("rename failed", err);
  }
  return old.string();
}

bool remove_written_directory(const std::string& dir) {
  std::string why;
  const std::vector<std::string> files = marker_files(dir, &why);
  if (!why.empty()) return false;
  std::set<fs::path> dirs;
  for (const auto& f : files) {
    const fs::path rel = fs::path(f).lexically_normal();
    // A marker is data: a name that could leave the directory is skipped, never followed.
    if (rel.empty() || rel.is_absolute() || *rel.begin() == "..") continue;
    ::unlink((fs::path(dir) / rel).c_str());
    for (fs::path p = rel.parent_path(); !p.empty(); p = p.parent_path()) dirs.insert(p);
  }
  ::unlink((fs::path(dir) / kWrittenMarker).c_str());
  // Deepest first: a longer path sorts after its parent.
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) ::rmdir((fs::path(dir) / *it).c_str());
  return ::rmdir(dir.c_str()) == 0;
}

}  // namespace dcalign::io
