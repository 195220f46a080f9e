#pragma once
// Small pieces of dcalign-server and its clients: SHA-256, tokens, names, structured logs and
// the crash points of the reliability tests.
#include <nlohmann/json.hpp>

#include "dcalign/error.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dcalign::service {

/// Whether this library's static initializer told OpenSSL to leave its clean-up to the end of the
/// process (OPENSSL_INIT_NO_ATEXIT, see common.cpp). OpenSSL honours that only when it comes
/// before every other OpenSSL call of the process; tests/service/openssl_exit.cpp checks that.
bool openssl_cleanup_left_to_exit();

/// Incremental SHA-256 (OpenSSL's EVP interface).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t n);
  /// The digest as 64 lower-case hex digits; the object is spent afterwards.
  std::string hex();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// An operating-system call (or SQLite) that failed, with its errno: the server tells a caller
/// that it is out of space (ENOSPC, EDQUOT) as RESOURCE_EXHAUSTED, not INTERNAL.
class OsError : public IoError {
 public:
  OsError(const std::string& what, int err);
  int err;
};
/// Whether `e` says that a disk is full (OsError, or std::filesystem's error with ENOSPC/EDQUOT).
bool out_of_space(const std::exception& e);
/// A caller learned something of an id that is gone (a collaboration deleted during its call):
/// NOT_FOUND.
class GoneError : public Error {
 public:
  using Error::Error;
};

/// `text` with every absolute path replaced by "<server path>": what a remote caller may read of
/// a server-side message (the server logs the message whole).
std::string redact_paths(const std::string& text);

/// Validates a client's request id (CreateCollaboration, ReissueToken): empty, or 16 to 64
/// characters of [A-Za-z0-9_-]. Throws InvalidInput.
void check_request_id(const std::string& id);

std::string sha256_hex(const void* data, std::size_t n);
inline std::string sha256_hex(const std::string& s) { return sha256_hex(s.data(), s.size()); }
/// SHA-256 of a whole file, read in blocks (IoError naming the file).
std::string sha256_file(const std::string& path);

/// The whole of a small file the server or a client is pointed at (a token, a PEM certificate
/// or key, a JSON spec). `what` names it in errors ("TLS key"). Throws InvalidInput when the path
/// is not a readable regular file or holds more than max_bytes (checked before reading).
std::string read_small_file(const std::string& path, const char* what,
                            std::size_t max_bytes = std::size_t{1} << 20);
/// A token file: read_small_file without the line breaks that end it.
std::string read_token_file(const std::string& path, const char* what);

/// A new secret: "dca_" followed by 43 characters (32 bytes from OpenSSL's RAND_bytes, base64url).
std::string new_token();
/// A new collaboration id: "c" followed by 32 hex digits (16 random bytes).
std::string new_collaboration_id();
/// Whether `s` has the form new_collaboration_id() gives.
bool is_collaboration_id(const std::string& s);
/// Whether `s` has the form new_token() gives.
bool is_token(const std::string& s);
/// Byte-wise comparison whose time does not depend on where the strings differ.
bool equal_constant_time(const std::string& a, const std::string& b);

/// Throws dcalign::InvalidInput unless `name` is 1-64 characters of [A-Za-z0-9_.-], starting
/// with a letter or digit (so never "/", "..", "." or a hidden name). `what` names the field.
void check_name(const std::string& what, const std::string& name);

/// Writes one JSON object per line to stderr: {"ts": ..., "level": ..., "event": ..., fields}.
void log_event(const char* level, const char* event,
               nlohmann::json fields = nlohmann::json::object());

/// The reliability tests' crash points. When the environment variable DCALIGN_SERVER_CRASH_AT
/// (read once) is `point` or `point:K`, the process kills itself with SIGKILL at the first
/// (K-th) pass through it: exactly what a `kill -9` at that moment does. Without the variable
/// this is one comparison.
void crash_point(const char* point);

/// The concurrency tests' barrier: when DCALIGN_SERVER_BARRIER (read once) is `point:N` or
/// `point:N:SECONDS`, the first N threads through `point` wait there until all N have come (at
/// most SECONDS, default 30, then Error).
/// Without the variable this is one comparison.
void barrier_point(const char* point);

/// The reliability tests' faults: DCALIGN_SERVER_FAULT (read once) names one point, with an
/// optional ":ENOSPC". fault_armed says whether `point` is named (the suffix apart); fault_point
/// throws OsError there (EIO, or ENOSPC) as a failed system call would.
bool fault_armed(const char* point, std::string* suffix = nullptr);
void fault_point(const char* point);

}  // namespace dcalign::service
