#include "service/common.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <vector>

#include "dcalign/error.hpp"

namespace dcalign::service {

OsError::OsError(const std::string& what, int e)
    : IoError(what + ": " + std::strerror(e)), err(e) {}

bool out_of_space(const std::exception& e) {
  if (const auto* os = dynamic_cast<const OsError*>(&e))
    return os->err == ENOSPC || os->err == EDQUOT;
  if (const auto* fe = dynamic_cast<const std::filesystem::filesystem_error*>(&e))
    return fe->code() == std::errc::no_space_on_device ||
           fe->code() == std::error_code(EDQUOT, std::generic_category());
  return false;
}

std::string redact_paths(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const bool starts = text[i] == '/' && (i == 0 || std::strchr(" \t'\"(=:,[", text[i - 1])) &&
                        i + 1 < text.size() && text[i + 1] != ' ';
    if (!starts) {
      out.push_back(text[i++]);
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && !std::strchr(" \t'\"),]\n", text[j])) ++j;
    // A trailing ':' or '.' ends the sentence, not the path.
    while (j > i + 1 && (text[j - 1] == ':' || text[j - 1] == '.')) --j;
    out += "<server path>";
    i = j;
  }
  return out;
}

void check_request_id(const std::string& id) {
  if (id.empty()) return;
  bool ok = id.size() >= 16 && id.size() <= 64;
  for (char ch : id)
    ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-');
  if (!ok)
    throw InvalidInput(
        "request_id is not a request id: expected 16 to 64 characters of "
        "A-Z a-z 0-9 _ -");
}

namespace {

// OpenSSL frees its state from an atexit handler by default, and that handler deletes the
// thread-local keys whose destructors free each thread's error queue (ERR_STATE, 904 bytes, made
// when a thread first touches TLS). gRPC's event-engine threads are detached: one can still be
// ending after main returns and the handler has run, and its error queue is then never freed.
// LeakSanitizer caught this, now and then, in a `dcalign client` process of service_demo (the
// gRPC report: grpc/grpc#38539). With OPENSSL_INIT_NO_ATEXIT the keys stay, every thread's own
// destructor frees its queue, and the process's end returns the rest. OpenSSL honours the flag
// only in its first initialisation of the process, hence a static initializer here.
const bool g_openssl_cleanup_left_to_exit =
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;

}  // namespace

bool openssl_cleanup_left_to_exit() { return g_openssl_cleanup_left_to_exit; }

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (impl_->ctx == nullptr || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1)
    throw Error("cannot initialise SHA-256 (OpenSSL)");
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(const void* data, std::size_t n) {
  if (n > 0 && EVP_DigestUpdate(impl_->ctx, data, n) != 1) throw Error("SHA-256 update failed");
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(impl_->ctx, digest, &len) != 1) throw Error("SHA-256 final failed");
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(digits[digest[i] >> 4]);
    out.push_back(digits[digest[i] & 15]);
  }
  return out;
}

std::string sha256_hex(const void* data, std::size_t n) {
  Sha256 h;
  h.update(data, n);
  return h.hex();
}

std::string read_small_file(const std::string& path, const char* what, std::size_t max_bytes) {
  const std::string where = std::string("the ") + what + " file '" + path + "'";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InvalidInput(
        "cannot read " + where +
        (std::filesystem::exists(path, ec) ? ": not a regular file" : ": no such file"));
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InvalidInput("cannot read " + where + ": " + ec.message());
  if (size > max_bytes)
    throw InvalidInput(where + " holds " + std::to_string(size) + " bytes; expected at most " +
                       std::to_string(max_bytes));
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!in || !in.read(text.data(), static_cast<std::streamsize>(text.size())))
    throw InvalidInput("cannot read " + where);
  return text;
}

std::string read_token_file(const std::string& path, const char* what) {
  std::string t = read_small_file(path, what, 4096);
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  return t;
}

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path + " to checksum it");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw IoError("cannot read " + path + " to checksum it");
  return h.hex();
}

namespace {

void random_bytes(unsigned char* out, int n) {
  if (RAND_bytes(out, n) != 1) throw Error("OpenSSL's RAND_bytes failed: no secure randomness");
}

bool all_of(const std::string& s, std::size_t from, const char* alphabet) {
  for (std::size_t i = from; i < s.size(); ++i)
    if (std::strchr(alphabet, s[i]) == nullptr || s[i] == '\0') return false;
  return true;
}

constexpr const char* kHex = "0123456789abcdef";
constexpr const char* kBase64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

}  // namespace

std::string new_token() {
  unsigned char b[33];
  random_bytes(b, 32);
  b[32] = 0;
  std::string out = "dca_";
  // 32 bytes = 256 bits in 43 six-bit digits (the last one carries 4 bits).
  for (int bit = 0; bit < 256; bit += 6) {
    const int byte = bit / 8, shift = bit % 8;
    const unsigned v = ((static_cast<unsigned>(b[byte]) << 8) | b[byte + 1]) >> (10 - shift);
    out.push_back(kBase64Url[v & 63]);
  }
  return out;
}

std::string new_collaboration_id() {
  unsigned char b[16];
  random_bytes(b, 16);
  std::string out = "c";
  for (unsigned char c : b) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

bool is_collaboration_id(const std::string& s) {
  return s.size() == 33 && s[0] == 'c' && all_of(s, 1, kHex);
}

bool is_token(const std::string& s) {
  return s.size() == 47 && s.compare(0, 4, "dca_") == 0 && all_of(s, 4, kBase64Url);
}

bool equal_constant_time(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void check_name(const std::string& what, const std::string& name) {
  constexpr const char* kAllowed =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";
  const bool ok = !name.empty() && name.size() <= 64 &&
                  std::isalnum(static_cast<unsigned char>(name[0])) && all_of(name, 0, kAllowed) &&
                  name.find("..") == std::string::npos;
  if (!ok) {
    std::string shown = name.size() > 64 ? name.substr(0, 64) + "..." : name;
    throw InvalidInput(what + " '" + shown +
                       "' is not a valid name: expected 1-64 characters of A-Z a-z 0-9 _ . -, "
                       "starting with a letter or digit, without '/' or '..'");
  }
}

void log_event(const char* level, const char* event, nlohmann::json fields) {
  static std::mutex mu;
  const double ts =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json line = {{"ts", ts}, {"level", level}, {"event", event}};
  if (fields.is_object())
    for (auto& [k, v] : fields.items()) line[k] = v;
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << text << '\n' << std::flush;
}

void crash_point(const char* point) {
  // "NAME" fires at the first pass through NAME, "NAME:K" at the K-th.
  static const std::pair<std::string, long> armed = [] {
    const char* v = std::getenv("DCALIGN_SERVER_CRASH_AT");
    std::string name = v == nullptr ? "" : v;
    long k = 1;
    if (const auto colon = name.find(':'); colon != std::string::npos) {
      k = std::strtol(name.c_str() + colon + 1, nullptr, 10);
      name.resize(colon);
    }
    return std::make_pair(name, k);
  }();
  static std::atomic<long> passes{0};
  if (armed.first.empty() || armed.first != point) return;
  if (++passes == armed.second) {
    log_event("warning", "crash_point", {{"point", point}, {"pass", armed.second}});
    ::kill(::getpid(), SIGKILL);
  }
}

void barrier_point(const char* point) {
  // "NAME:N[:SECONDS]": the first N threads through NAME wait there until all N have come, at
  // most SECONDS (default 30).
  struct Armed {
    std::string name;
    long n = 0, seconds = 30;
  };
  static const Armed armed = [] {
    const char* v = std::getenv("DCALIGN_SERVER_BARRIER");
    Armed a;
    a.name = v == nullptr ? "" : v;
    if (const auto colon = a.name.find(':'); colon != std::string::npos) {
      char* end = nullptr;
      a.n = std::strtol(a.name.c_str() + colon + 1, &end, 10);
      if (*end == ':') a.seconds = std::strtol(end + 1, nullptr, 10);
      a.name.resize(colon);
    }
    return a;
  }();
  if (armed.name.empty() || armed.name != point || armed.n < 1) return;
  static std::mutex mu;
  static std::condition_variable cv;
  static long arrived = 0;
  std::unique_lock<std::mutex> lock(mu);
  if (arrived >= armed.n) return;  // the barrier has opened: later passes go through
  ++arrived;
  log_event("info", "barrier_point", {{"point", point}, {"arrived", arrived}});
  cv.notify_all();
  if (!cv.wait_for(lock, std::chrono::seconds(armed.seconds), [] { return arrived >= armed.n; }))
    throw Error(std::string("barrier ") + point + ": only " + std::to_string(arrived) + " of " +
                std::to_string(armed.n) + " threads came within " + std::to_string(armed.seconds) +
                " s");
}

bool fault_armed(const char* point, std::string* suffix) {
  static const std::string armed = [] {
    const char* v = std::getenv("DCALIGN_SERVER_FAULT");
    return std::string(v == nullptr ? "" : v);
  }();
  const std::size_t n = std::strlen(point);
  if (armed.empty() || armed.compare(0, n, point) != 0) return false;
  const std::string rest = armed.substr(n);
  if (!rest.empty() && rest[0] != ':') return false;  // another point whose name starts alike
  if (suffix) *suffix = rest;
  return true;
}

void fault_point(const char* point) {
  std::string rest;
  if (!fault_armed(point, &rest) || (!rest.empty() && rest != ":ENOSPC")) return;
  throw OsError(std::string("fault injected at ") + point, rest.empty() ? EIO : ENOSPC);
}

}  // namespace dcalign::service
