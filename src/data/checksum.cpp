// SHA-256 of dataset files (OpenSSL's EVP interface) and the data-directory resolution.
#include <openssl/evp.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include "dcalign/data.hpp"
#include "file_io.hpp"

namespace dcalign::data {

std::string default_data_dir() { return DCALIGN_DEFAULT_DATA_DIR; }

std::string resolve_data_dir(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return explicit_dir;
  const char* env = std::getenv("DCALIGN_DATA");
  if (env != nullptr && *env != '\0') return env;
  return default_data_dir();
}

std::string sha256_file(const std::string& path) {
  detail::require_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open '" + path + "' for hashing");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw IoError("cannot hash '" + path + "': OpenSSL SHA-256 initialisation failed");
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize got = in.gcount();
    if (got > 0 && EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(got)) != 1)
      throw IoError("cannot hash '" + path + "': OpenSSL SHA-256 update failed");
  }
  if (in.bad()) throw IoError("read error while hashing '" + path + "'");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1)
    throw IoError("cannot hash '" + path + "': OpenSSL SHA-256 finalisation failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

namespace {

// Parses the output format of sha256sum: "<64 hex digits> <' ' or '*'><path>" per line.
std::map<std::string, std::string> read_sums(const std::string& sums_path) {
  detail::require_file(sums_path);
  std::ifstream in(sums_path);
  if (!in) throw IoError("cannot open '" + sums_path + "'");
  std::map<std::string, std::string> sums;
  std::string line;
  index_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    bool ok = line.size() > 66 && line[64] == ' ' && (line[65] == ' ' || line[65] == '*');
    for (size_t i = 0; ok && i < 64; ++i) ok = std::isxdigit(static_cast<unsigned char>(line[i]));
    if (!ok)
      throw IoError("'" + sums_path + "': line " + std::to_string(lineno) +
                    ": expected '<64 hex digits>  <file>' as written by sha256sum");
    std::string digest = line.substr(0, 64);
    for (char& ch : digest) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    sums[line.substr(66)] = digest;
  }
  return sums;
}

}  // namespace

void verify_checksums(const std::string& data_dir, const std::vector<std::string>& files) {
  const std::string sums_path = data_dir + "/SHA256SUMS";
  const auto sums = read_sums(sums_path);
  for (const auto& f : files) {
    const auto it = sums.find(f);
    if (it == sums.end()) throw IoError("'" + sums_path + "' has no entry for '" + f + "'");
    const std::string path = data_dir + "/" + f;
    const std::string actual = sha256_file(path);
    if (actual != it->second)
      throw IoError("checksum mismatch for '" + path + "': SHA256SUMS lists " + it->second +
                    ", the file hashes to " + actual);
  }
}

}  // namespace dcalign::data
