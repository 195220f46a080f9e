#pragma once
// Helpers shared by the libFuzzer targets: a per-process scratch file for readers that take a
// path, and a cursor that decodes small parameters from the front of the input.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace dcalign::fuzz {

/// A file under the temp directory named after the target and the process id (so that parallel
/// fuzzing jobs do not share it), rewritten for every input and removed at exit.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& stem, const std::string& suffix = "") {
    path_ = (std::filesystem::temp_directory_path() /
             ("dcalign-fuzz-" + stem + "-" + std::to_string(::getpid()) + suffix))
                .string();
  }
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  /// Replaces the file's content; aborts when the file cannot be written (an environment
  /// problem, not a finding in the code under test).
  const std::string& write(const std::uint8_t* data, std::size_t size) {
    write_file(path_, data, size);
    return path_;
  }
  /// Replaces the content of `path`; aborts when it cannot be written.
  static void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) {
      std::fprintf(stderr, "fuzz: cannot write scratch file %s\n", path.c_str());
      std::abort();
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Reads parameters from the front of the input; past the end every read gives 0.
class Cursor {
 public:
  Cursor(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  /// A value in [0, n) (n >= 1).
  unsigned below(unsigned n) { return byte() % n; }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return v;
  }
  /// `n` raw bytes (fewer at the end of the input) copied into `out`, the rest zero.
  void bytes(void* out, std::size_t n) {
    const std::size_t k = std::min(n, size_ - std::min(pos_, size_));
    std::memcpy(out, data_ + pos_, k);
    std::memset(static_cast<char*>(out) + k, 0, n - k);
    pos_ += k;
  }
  const std::uint8_t* rest() const { return data_ + std::min(pos_, size_); }
  std::size_t remaining() const { return size_ - std::min(pos_, size_); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

/// Reports an exception that the contract does not allow (anything but dcalign::Error) and
/// aborts, which libFuzzer records as a crash with this input.
[[noreturn]] inline void unexpected(const char* target, const char* what) {
  std::fprintf(stderr, "%s: unexpected exception outside dcalign::Error: %s\n", target, what);
  std::abort();
}

}  // namespace dcalign::fuzz
