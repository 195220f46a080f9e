#pragma once
// Internal helpers of the data layer: sequential reading of gzip-compressed or plain files
// with errors that name the file, and the directory resolution shared by the loaders.
#include <zlib.h>

#include <cstddef>
#include <string>

namespace dcalign::data::detail {

/// Sequential reader of a file that may be gzip-compressed (zlib's gz* functions read plain
/// files transparently). Every failure throws IoError naming the file.
class GzReader {
 public:
  explicit GzReader(const std::string& path);
  ~GzReader();
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  /// Reads up to n bytes and returns how many were read; fewer than n only at a clean end of
  /// the data. A corrupt stream, or one that stops in the middle (truncated file), throws.
  std::size_t read(void* buf, std::size_t n);
  /// Reads exactly n bytes of `what` (e.g. "pixel data"), or throws saying how many came.
  void read_exact(void* buf, std::size_t n, const std::string& what);
  /// Checks that nothing follows the expected data and that the stream ends intact (the gzip
  /// trailer is present and its CRC matches); `expected` describes what should have been last.
  void expect_end(const std::string& expected);
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what) const;
  gzFile file_ = nullptr;
  std::string path_;
  std::size_t total_ = 0;  // decompressed bytes delivered so far, for messages
};

/// The whole (decompressed) content of a file.
std::string read_all(const std::string& path);

/// Throws IoError when `path` is not an existing regular file; the message tells how to point
/// the loaders at a data directory.
void require_file(const std::string& path);

}  // namespace dcalign::data::detail
