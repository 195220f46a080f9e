#include "file_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "dcalign/error.hpp"

namespace dcalign::data::detail {

namespace fs = std::filesystem;

void require_file(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    throw IoError("cannot open '" + path +
                  "': no such file (set LoadOptions::data_dir or DCALIGN_DATA to the dataset "
                  "directory, or fetch the files with scripts/download_datasets.sh)");
  if (!fs::is_regular_file(st)) throw IoError("cannot open '" + path + "': not a regular file");
}

GzReader::GzReader(const std::string& path) : path_(path) {
  require_file(path);
  errno = 0;
  file_ = gzopen(path.c_str(), "rb");
  if (file_ == nullptr)
    throw IoError("cannot open '" + path + "': " +
                  (errno != 0 ? std::strerror(errno) : "zlib could not allocate its state"));
  // A larger buffer than zlib's 8 KiB default: MNIST images are 47 MB decompressed.
  gzbuffer(file_, 1 << 17);
}

GzReader::~GzReader() {
  if (file_ != nullptr) gzclose_r(file_);
}

void GzReader::fail(const std::string& what) const { throw IoError("'" + path_ + "': " + what); }

std::size_t GzReader::read(void* buf, std::size_t n) {
  auto* out = static_cast<unsigned char*>(buf);
  std::size_t done = 0;
  while (done < n) {
    // gzread takes an unsigned count and returns an int, so read in chunks below INT_MAX.
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
    const int got = gzread(file_, out + done, chunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(file_, &errnum);
      fail(std::string("corrupt gzip data (") + msg + ")");
    }
    done += static_cast<std::size_t>(got);
    total_ += static_cast<std::size_t>(got);
    if (static_cast<unsigned>(got) < chunk) {
      // End of input. Z_BUF_ERROR means the input stopped inside a gzip stream: the file is
      // truncated, which must not pass as a short but valid file.
      int errnum = 0;
      gzerror(file_, &errnum);
      if (errnum == Z_BUF_ERROR)
        fail("truncated gzip stream: the file ends inside the compressed data, after " +
             std::to_string(total_) + " decompressed bytes");
      if (errnum != Z_OK) fail(std::string("corrupt gzip data (") + gzerror(file_, &errnum) + ")");
      break;
    }
  }
  return done;
}

void GzReader::read_exact(void* buf, std::size_t n, const std::string& what) {
  const std::size_t got = read(buf, n);
  if (got != n)
    fail("file ends early: expected " + std::to_string(n) + " bytes of " + what + ", found " +
         std::to_string(got));
}

void GzReader::expect_end(const std::string& expected) {
  // Reading past the expected end also makes zlib check the gzip trailer (CRC and length).
  unsigned char extra[64];
  const std::size_t got = read(extra, sizeof extra);
  if (got != 0)
    fail("unexpected data after " + expected +
         " (the header declares fewer items than the file "
         "holds)");
}

std::string read_all(const std::string& path) {
  GzReader in(path);
  std::string text;
  std::size_t size = 0;
  // Grow geometrically; the uncompressed size of a gzip file is not known up front.
  text.resize(1 << 16);
  for (;;) {
    const std::size_t got = in.read(text.data() + size, text.size() - size);
    size += got;
    if (size < text.size()) break;
    text.resize(text.size() * 2);
  }
  text.resize(size);
  return text;
}

}  // namespace dcalign::data::detail
