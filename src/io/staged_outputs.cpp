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

#include "dcalign/error.hpp"

namespace dcalign::io {

namespace fs = std::filesystem;

namespace {

// ---- temporaries removed on a fatal signal. A fixed table of C strings, so that the handler
// reads it without allocating or locking (only async-signal-safe calls in the handler).
constexpr int kSlots = 256;
std::atomic<char*> g_paths[kSlots];
std::atomic<bool> g_directory[kSlots];

// A directory of files (a model under construction): its entries, then itself.
void remove_directory_raw(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    struct Dirent64 {
      unsigned long long ino;
      long long off;
      unsigned short reclen;
      unsigned char type;
      char name[1];
    };
    alignas(8) char buf[4096];
    for (int rounds = 0; rounds < 64; ++rounds) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
        const char* name = buf + off + offsetof(Dirent64, name);
        if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))))
          ::unlinkat(fd, name, 0);
        off += d->reclen;
      }
    }
    ::close(fd);
  }
  ::rmdir(path);
}

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

std::string StagedOutputs::stage(const std::string& path, const std::string& what) {
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
  // pid and a process-wide counter: distinct for every staging object and thread of the process.
  static std::atomic<unsigned long long> counter{0};
  const std::string tmp =
      (dir / ("." + p.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
              std::to_string(counter.fetch_add(1))))
          .string();
  register_temporary(tmp);
  entries_.push_back({path, tmp, what, entry});
  return tmp;
}

void StagedOutputs::commit() {
  for (auto& e : entries_) {
    if (std::rename(e.tmp.c_str(), e.dest.c_str()) != 0)
      throw IoError("cannot move the new " + e.what + " file into place at '" + e.dest + "' (" +
                    std::strerror(errno) + ")");
    forget_temporary(e.tmp);
    e.tmp.clear();
  }
  entries_.clear();
}

}  // namespace dcalign::io
