#include "io/staged_outputs.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "dcalign/error.hpp"

namespace dcalign::io {

namespace fs = std::filesystem;

StagedOutputs::~StagedOutputs() {
  for (const auto& e : entries_)
    if (!e.tmp.empty()) std::remove(e.tmp.c_str());
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
  const fs::path canonical = fs::weakly_canonical(fs::absolute(p, ec), ec);
  for (const auto& e : entries_) {
    std::error_code ec2;
    if (fs::weakly_canonical(fs::absolute(e.dest, ec2), ec2) == canonical)
      throw InvalidInput(what + " and " + e.what + " name the same file '" + path + "'");
  }
  // pid and a process-wide counter: distinct for every staging object and thread of the process.
  static std::atomic<unsigned long long> counter{0};
  const std::string tmp =
      (dir / ("." + p.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
              std::to_string(counter.fetch_add(1))))
          .string();
  entries_.push_back({path, tmp, what});
  return tmp;
}

void StagedOutputs::commit() {
  for (auto& e : entries_) {
    if (std::rename(e.tmp.c_str(), e.dest.c_str()) != 0)
      throw IoError("cannot move the new " + e.what + " file into place at '" + e.dest + "' (" +
                    std::strerror(errno) + ")");
    e.tmp.clear();
  }
  entries_.clear();
}

}  // namespace dcalign::io
