#pragma once
// The .npy header's reader, shared by the units of the .npy format: npy_header.cpp reads and
// validates a file's preamble and header, npy.cpp reads and writes the data (the format and the
// decisions beyond NumPy's specification are described there).
#include <unistd.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "dcalign/npy.hpp"

namespace dcalign::npy_detail {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
// NumPy aligns the start of the data to 64 bytes so that it can be memory-mapped efficiently.
constexpr std::size_t kDataAlignment = 64;

bool host_is_little_endian();
std::string shape_string(const std::vector<index_t>& shape);
const char* dtype_name(DType t);
index_t dtype_size(DType t);
[[noreturn]] void fail(const std::string& path, const std::string& what);

/// Everything the readers need to know about a validated file.
struct ParsedFile {
  NpyHeader header;
  bool swap_bytes = false;  // data byte order differs from the host's
  index_t data_offset = 0;
  index_t data_bytes = 0;
};

/// An open file descriptor, closed when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

/// Reads exactly `n` bytes at `offset` into `dst` with pread (which does not move a file
/// position, so threads can share the descriptor). Returns an empty string on success, otherwise
/// what went wrong. Thread-safe; never throws.
std::string pread_exact(int fd, void* dst, index_t n, index_t offset);

/// Opens `path` into `fd`, reads and validates the preamble and header, and checks the data size
/// against the file size.
ParsedFile parse_file(const std::string& path, Fd& fd);

}  // namespace dcalign::npy_detail
