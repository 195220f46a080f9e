#pragma once
// File helpers shared by the data-layer tests: temporary directories and raw/gzip writers.
#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dcalign/error.hpp"

namespace dcalign::testing {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dcalign-data-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_gz(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

inline std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// Runs f, expecting IoError whose message contains every string in `parts`.
template <typename F>
void expect_io_error(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no IoError thrown; expected one mentioning " << parts.front();
  } catch (const IoError& e) {
    for (const auto& p : parts) EXPECT_THAT(e.what(), ::testing::HasSubstr(p));
  }
}

}  // namespace dcalign::testing
