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

namespace {

// SHA-256 of the official dataset files (those scripts/download_datasets.sh fetches).
const std::map<std::string, std::string>& official_digests() {
  static const std::map<std::string, std::string> digests = {
      {"adult/adult.data", "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"},
      {"adult/adult.test", "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05"},
      {"fashion-mnist/t10k-images-idx3-ubyte.gz",
       "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"},
      {"fashion-mnist/t10k-labels-idx1-ubyte.gz",
       "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"},
      {"fashion-mnist/train-images-idx3-ubyte.gz",
       "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"},
      {"fashion-mnist/train-labels-idx1-ubyte.gz",
       "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"},
      {"german-credit/german.csv",
       "ec12a88b9fc14d74ba646ea0410cf7ff4533bec2eb61652f8ad76796bbfec017"},
      {"heart-disease/processed.cleveland.data",
       "a74b7efa387bc9d108d7d0115d831fe9b414b29ae7124f331b622b4efa0427c8"},
      {"mnist/t10k-images-idx3-ubyte.gz",
       "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"},
      {"mnist/t10k-labels-idx1-ubyte.gz",
       "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"},
      {"mnist/train-images-idx3-ubyte.gz",
       "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"},
      {"mnist/train-labels-idx1-ubyte.gz",
       "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"},
      {"molecules/BBBP.csv", "d07a38487aeac5cee5508413e468043ef3097451d2a112701c2d60be9ec6b662"},
      {"molecules/hiv.csv.gz", "0a4a7390d6f22035c293e8e0d500655d76233b35f0f68ab128f3ceccdd97a297"},
      {"pima-diabetes/pima-indians-diabetes.csv",
       "6bfe5d0f379d17a0e0819b996407e3c09bf80febd4287f2ed212190dfff154af"},
      {"sklearn/breast_cancer.csv",
       "fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed"},
      {"sklearn/digits.csv.gz", "46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a"},
      {"sklearn/iris.csv", "f13ffa8fdd56fd8e6c8d16d4081a3fbd3114bcd0aae4256c43205169cd9d1449"},
      {"sklearn/wine_data.csv", "10e8a802908b34f86e5da8ce962f3c806694bc98450a18f61851af59f324bede"},
      {"sklearn/diabetes.csv", "3b271426c1bd56aebb217e16eb31a4b0f5a5669fe59258d6c6c65411a115cd22"},
  };
  return digests;
}

}  // namespace

void verify_official_checksums(const std::string& data_dir, const std::vector<std::string>& files) {
  for (const auto& f : files) {
    const auto it = official_digests().find(f);
    if (it == official_digests().end())
      throw IoError("no official SHA-256 is known for '" + f +
                    "'; set verify_checksums = false to read it unchecked");
    const std::string path = data_dir + "/" + f;
    const std::string actual = sha256_file(path);
    if (actual != it->second)
      throw IoError("checksum mismatch for '" + path + "': the official file's SHA-256 is " +
                    it->second + ", this file hashes to " + actual +
                    " (a modified, truncated or different copy; fetch it again with "
                    "scripts/download_datasets.sh, or set verify_checksums = false to use it as "
                    "it is)");
  }
}

}  // namespace dcalign::data
