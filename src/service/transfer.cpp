// The streaming RPCs: Upload (resumable, every chunk on disk before it is acknowledged) and
// Fetch (a participant's own results).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include "core/model_file.hpp"
#include "service/rpc.hpp"
#include "service/upload_rules.hpp"

namespace dcalign::service::rpc {
namespace {

// A place among the server's streams, taken once the caller is authenticated and before the
// stream reads or writes anything: Upload and Fetch are bounded by kind and by peer address, so
// that streams never take the threads the unary calls need (server.cpp sizes the pool).
class StreamSlot {
 public:
  StreamSlot(State& s, bool upload, std::string peer)
      : s_(s), upload_(upload), peer_(std::move(peer)) {}
  ~StreamSlot() {
    if (!held_) return;
    std::lock_guard<std::mutex> lock(s_.mu);
    --(upload_ ? s_.upload_streams : s_.fetch_streams);
    if (--s_.streams_by_peer[peer_] <= 0) s_.streams_by_peer.erase(peer_);
  }
  StreamSlot(const StreamSlot&) = delete;
  StreamSlot& operator=(const StreamSlot&) = delete;

  Status take() {
    std::lock_guard<std::mutex> lock(s_.mu);
    if (s_.stopping) return error(StatusCode::UNAVAILABLE, "the server is shutting down");
    int& open = upload_ ? s_.upload_streams : s_.fetch_streams;
    const int limit = upload_ ? s_.opts.max_upload_streams : s_.opts.max_fetch_streams;
    const char* what = upload_ ? "uploads" : "fetches";
    if (open >= limit)
      return error(StatusCode::RESOURCE_EXHAUSTED, "the server has " + std::to_string(open) + " " +
                                                       what +
                                                       " in progress, its limit: retry later");
    auto it = s_.streams_by_peer.find(peer_);
    const int mine = it == s_.streams_by_peer.end() ? 0 : it->second;
    if (mine >= s_.opts.max_streams_per_peer)
      return error(StatusCode::RESOURCE_EXHAUSTED,
                   "this address has " + std::to_string(mine) +
                       " uploads and fetches in progress, the server's limit per address: let "
                       "them finish, then retry");
    ++open;
    ++s_.streams_by_peer[peer_];
    held_ = true;
    return Status::OK;
  }

 private:
  State& s_;
  bool upload_;
  std::string peer_;
  bool held_ = false;
};

// Marks a part as being uploaded while its stream runs, however the stream ends.
struct PartSlot {
  State& s;
  std::string key;
  ~PartSlot() {
    std::lock_guard<std::mutex> lock(s.mu);
    s.active_parts.erase(key);
  }
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

[[noreturn]] void io_failure(const std::string& what, const fs::path& p) {
  throw OsError(what + " " + p.string(), errno);
}

// The status of a stream that the watchdog cancelled. gRPC's sync API sends no status after a
// cancellation (the client reads CANCELLED), so this is for the handler's own return only; the
// watchdog's log line says what the stream waited for.
Status timed_out() {
  return error(StatusCode::CANCELLED, "ended by the server's stream deadlines");
}

// One pass over a finished part (raw float64, column-major, `rows` rows): its SHA-256, its
// first non-finite value as (row, column), and, when `classes` > 0, its first value that is not
// a class index 0..classes-1 as (row, value). -1 where there is none.
struct PartScan {
  std::string sha256;
  std::int64_t bad_row = -1, bad_col = -1;
  std::int64_t wide_row = -1, wide_col = -1;  // first finite value beyond float32's range
  double wide = 0;
  std::int64_t label_row = -1;
  double label = 0;
};

PartScan scan_part(const fs::path& p, std::uint64_t rows, std::uint32_t classes, bool float32) {
  std::ifstream in(p, std::ios::binary);
  if (!in) io_failure("cannot open", p);
  PartScan out;
  Sha256 sha;
  std::vector<double> buf(1 << 16);
  std::uint64_t index = 0;
  while (in) {
    in.read(reinterpret_cast<char*>(buf.data()),
            static_cast<std::streamsize>(buf.size() * sizeof(double)));
    const auto bytes = static_cast<std::size_t>(in.gcount());
    sha.update(buf.data(), bytes);
    const std::size_t n = bytes / sizeof(double);
    for (std::size_t k = 0; k < n; ++k, ++index) {
      const double v = buf[k];
      if (out.bad_row < 0 && !std::isfinite(v)) {
        out.bad_row = static_cast<std::int64_t>(index % rows);
        out.bad_col = static_cast<std::int64_t>(index / rows);
      }
      if (float32 && out.wide_row < 0 && std::isfinite(v) &&
          std::abs(v) > std::numeric_limits<float>::max()) {
        out.wide_row = static_cast<std::int64_t>(index % rows);
        out.wide_col = static_cast<std::int64_t>(index / rows);
        out.wide = v;
      }
      if (classes > 0 && out.label_row < 0 && !(v >= 0 && v < classes && v == std::floor(v))) {
        out.label_row = static_cast<std::int64_t>(index);
        out.label = v;
      }
    }
  }
  out.sha256 = sha.hex();
  return out;
}

}  // namespace

Status Service::Upload(ServerContext* ctx,
                       grpc::ServerReaderWriter<v1::UploadAck, v1::UploadRequest>* stream) {
  return guarded(s_, "Upload", [&] {
    Caller c;
    if (auto st = access_.authenticate(ctx, &c); !st.ok()) return st;
    if (c.analyst)
      return error(StatusCode::PERMISSION_DENIED, "only a participant may upload a release");
    StreamSlot slot(s_, true, peer_address(ctx->peer()));
    if (auto st = slot.take(); !st.ok()) return st;
    StreamWatchdog::Ticket ticket(*s_.watchdog, ctx, s_.opts.first_message_seconds, "Upload");
    v1::UploadRequest first;
    if (!stream->Read(&first))
      return ticket.expired()
                 ? timed_out()
                 : error(StatusCode::INVALID_ARGUMENT, "the upload ended before its header");
    ticket.progress(s_.opts.idle_seconds);
    if (!first.has_header())
      return error(StatusCode::INVALID_ARGUMENT,
                   "the first message of an upload must be its header");
    const v1::UploadHeader& h = first.header();
    v1::CollaborationSpec spec;
    if (auto st = access_.participant_of(ctx, h.collaboration_id(), &c, &spec); !st.ok()) return st;

    const std::string what = part_name(h.part());
    const std::string key = c.who.collaboration + "/" + c.who.participant + "/" + what;
    // A participant who joined late uploads its anchor only: it is enrolled, h is not retrained.
    const JobKey job = s_.release_job(c.who.collaboration, c.who.participant);
    const bool late = !job.participant.empty();
    if (late && h.part() != v1::PART_ANCHOR)
      return error(StatusCode::FAILED_PRECONDITION,
                   "participant " + c.who.participant +
                       " joined after the run: it uploads its anchor only (its G_i is computed "
                       "by enrolment; the model h is not retrained)");
    // The declared shape, against the collaboration's bounds, before anything is allocated.
    if (auto r = check_header(spec, h, s_.opts.max_part_bytes))
      return error(static_cast<StatusCode>(r->code), r->message);
    {
      std::lock_guard<std::mutex> lock(s_.mu);
      if (s_.stopping) return error(StatusCode::UNAVAILABLE, "the server is shutting down");
      if (s_.active_parts.count(key))
        return error(StatusCode::ABORTED, "another upload of the " + what + " is in progress");
      const std::string state = s_.store->job(job.collaboration, job.participant).state;
      if (state != "none" && state != "failed")
        return error(StatusCode::FAILED_PRECONDITION,
                     std::string("the release can no longer change: the ") +
                         (late ? "enrolment" : "job") + " is " + state);
      s_.active_parts.insert(key);
    }
    PartSlot part{s_, key};
    try {
      return upload_stream(ctx, c, spec, h, stream, ticket);
    } catch (const std::exception&) {
      // Whatever failed, a collaboration deleted under the upload is what the caller hears of.
      if (!s_.store->spec(c.who.collaboration))
        throw GoneError("collaboration " + c.who.collaboration +
                        " was deleted during the upload: nothing of it was kept");
      throw;
    }
  });
}

Status Service::upload_stream(ServerContext* ctx, const Caller& c,
                              const v1::CollaborationSpec& spec, const v1::UploadHeader& h,
                              grpc::ServerReaderWriter<v1::UploadAck, v1::UploadRequest>* stream,
                              StreamWatchdog::Ticket& ticket) {
  (void)spec;
  const auto& [id, me] = c.who;
  const int part = h.part();
  const std::string what = part_name(part);
  PartRecord r;
  r.part = part;
  r.rows = h.rows();
  r.cols = h.cols();
  r.total = h.total_bytes();
  r.sha256 = h.sha256();
  const auto old = s_.store->part(id, me, part);
  if (old && old->complete) {
    if (old->sha256 != r.sha256 || old->rows != r.rows || old->cols != r.cols)
      return error(StatusCode::ALREADY_EXISTS,
                   "the " + what + " is already uploaded with another content: delete the " +
                       "release first to replace it");
    v1::UploadAck ack;
    ack.set_part(static_cast<v1::Part>(part));
    ack.set_committed(old->total);
    ack.set_complete(true);
    stream->Write(ack);
    return Status::OK;
  }
  const bool resume = old && old->sha256 == r.sha256 && old->rows == r.rows && old->cols == r.cols;
  if (!resume) s_.store->start_part(id, me, r);
  std::uint64_t committed = resume ? old->received : 0;

  // Not create_directories: a collaboration deleted meanwhile must not come back as a directory.
  const fs::path udir = s_.upload_dir(id, me);
  if (::mkdir(udir.c_str(), 0700) != 0 && errno != EEXIST) {
    if (errno == ENOENT) throw GoneError("collaboration " + id + " was deleted");
    io_failure("cannot create", udir);
  }
  const fs::path file = s_.part_file(id, me, part, false);
  Fd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (fd.get() < 0) io_failure("cannot open", file);
  // Bytes past the acknowledged offset were never acknowledged: they go.
  if (::ftruncate(fd.get(), static_cast<off_t>(committed)) != 0)
    io_failure("cannot truncate", file);

  v1::UploadAck ack;
  ack.set_part(static_cast<v1::Part>(part));
  ack.set_committed(committed);
  stream->Write(ack);

  const auto started = std::chrono::steady_clock::now();
  v1::UploadRequest msg;
  while (committed < r.total) {
    if (ctx->IsCancelled()) return error(StatusCode::CANCELLED, "the upload was cancelled");
    const double open_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (open_s > s_.opts.max_rpc_seconds)
      return error(StatusCode::DEADLINE_EXCEEDED,
                   "the upload stream was open longer than the server's limit: resume it");
    if (!stream->Read(&msg)) {
      if (ticket.expired()) return timed_out();
      return error(StatusCode::ABORTED, "the upload ended at byte " + std::to_string(committed) +
                                            " of " + std::to_string(r.total) +
                                            ": resume from there");
    }
    ticket.progress(s_.opts.idle_seconds);
    if (!msg.has_chunk())
      return error(StatusCode::INVALID_ARGUMENT, "only the first message of an upload is a header");
    const auto& chunk = msg.chunk();
    if (auto refusal = check_chunk(chunk, committed, r.total, s_.opts.max_chunk_bytes))
      return error(static_cast<StatusCode>(refusal->code), refusal->message);
    const std::uint64_t size = chunk.data().size();
    const char* p = chunk.data().data();
    fault_point("upload.write");
    std::uint64_t done = 0;
    while (done < size) {
      const ssize_t n =
          ::pwrite(fd.get(), p + done, size - done, static_cast<off_t>(committed + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) io_failure("cannot write", file);
      done += static_cast<std::uint64_t>(n);
    }
    if (::fdatasync(fd.get()) != 0) io_failure("cannot flush", file);
    crash_point("upload.before_ack");
    committed += size;
    if (!s_.store->set_received(id, me, part, committed))
      throw GoneError("collaboration " + id + " (or this release) was deleted during the upload");
    s_.metrics.uploaded(size);
    ack.set_committed(committed);
    if (!stream->Write(ack))
      return error(StatusCode::ABORTED,
                   "the client went away at byte " + std::to_string(committed));
    ticket.progress(s_.opts.idle_seconds);
    crash_point("upload.after_ack");
  }
  return finish_part(c, part, r);
}

Status Service::finish_part(const Caller& c, int part, const PartRecord& r) {
  const auto& [id, me] = c.who;
  const std::string what = part_name(part);
  const fs::path file = s_.part_file(id, me, part, false);
  const auto discard = [&] {
    s_.store->delete_part(id, me, part);
    std::error_code ec;
    fs::remove(file, ec);
  };
  // The labels of a classification are class indices; checked in the same pass.
  v1::CollaborationSpec spec;
  if (!s_.load_spec(id, &spec)) throw GoneError("collaboration " + id + " was deleted");
  const std::uint32_t classes = part == v1::PART_LABELS ? spec.num_classes() : 0;
  bool float32 = false;
  (void)align_options(spec, &float32);
  const PartScan scan = scan_part(file, r.rows, classes, float32 && part != v1::PART_LABELS);
  if (scan.sha256 != r.sha256) {
    discard();
    return error(StatusCode::INVALID_ARGUMENT, "checksum mismatch: the " + std::to_string(r.total) +
                                                   " bytes of the " + what + " have sha256 " +
                                                   scan.sha256 + ", the header declared " +
                                                   r.sha256 + "; the upload was discarded");
  }
  if (scan.bad_row >= 0) {
    discard();
    return error(StatusCode::INVALID_ARGUMENT,
                 "the " + what + " has a NaN or Inf at row " + std::to_string(scan.bad_row) +
                     ", column " + std::to_string(scan.bad_col) + "; the upload was discarded");
  }
  if (scan.wide_row >= 0) {
    discard();
    char value[40];
    std::snprintf(value, sizeof value, "%.17g", scan.wide);
    return error(StatusCode::INVALID_ARGUMENT,
                 "the " + what + " holds " + value + " at row " + std::to_string(scan.wide_row) +
                     ", column " + std::to_string(scan.wide_col) +
                     ", out of float32's range (magnitude at most 3.4028235e+38), and this "
                     "collaboration computes in float32 (spec.options.precision); the upload "
                     "was discarded");
  }
  if (scan.label_row >= 0) {
    discard();
    return error(StatusCode::INVALID_ARGUMENT,
                 "label " + std::to_string(scan.label) + " at row " +
                     std::to_string(scan.label_row) +
                     " is not a class index: expected a whole number from 0 to " +
                     std::to_string(classes - 1) + "; the upload was discarded");
  }
  // Data and labels are checked against each other here, where the message goes to the
  // participant they belong to (at the job, it would reach the analyst, naming the participant).
  if (part == v1::PART_DATA || part == v1::PART_LABELS) {
    const int other = part == v1::PART_DATA ? v1::PART_LABELS : v1::PART_DATA;
    if (const auto o = s_.store->part(id, me, other); o && o->complete && o->rows != r.rows) {
      discard();
      return error(StatusCode::INVALID_ARGUMENT,
                   "this upload of the " + what + " has " + std::to_string(r.rows) +
                       " rows, but your " + part_name(other) + " has " + std::to_string(o->rows) +
                       "; the upload was discarded: one label per row of data");
    }
  }
  const fs::path done = s_.part_file(id, me, part, true);
  if (::rename(file.c_str(), done.c_str()) != 0) io_failure("cannot rename", file);
  model_file::fsync_path(done.parent_path(), true);
  if (!s_.store->complete_part(id, me, part))
    throw GoneError("collaboration " + id + " (or this release) was deleted during the upload");
  log_event("info", "part_uploaded",
            {{"collaboration", id},
             {"participant_index", s_.participant_index(id, me)},
             {"part", what},
             {"bytes", r.total}});
  const JobKey job = s_.release_job(id, me);
  s_.note_uploaded(job);
  if (job.participant.empty())
    s_.queue_if_complete(id);
  else
    s_.queue_enrolment(id, me);
  return Status::OK;
}

Status Service::Fetch(ServerContext* ctx, const v1::FetchRequest* req,
                      grpc::ServerWriter<v1::FetchChunk>* writer) {
  return guarded(s_, "Fetch", [&] {
    Caller c;
    v1::CollaborationSpec spec;
    if (auto st = access_.participant_of(ctx, req->collaboration_id(), &c, &spec); !st.ok())
      return st;
    const auto& [id, me] = c.who;
    const JobRecord job = s_.store->job(id);
    if (job.state != "done")
      return error(
          StatusCode::FAILED_PRECONDITION,
          "no result to fetch: the job is " + job.state +
              (job.error.empty() ? "" : std::string(" (") + kJobErrorForParticipants + ")"));
    StreamSlot slot(s_, false, peer_address(ctx->peer()));
    if (auto st = slot.take(); !st.ok()) return st;
    StreamWatchdog::Ticket ticket(*s_.watchdog, ctx, s_.opts.idle_seconds, "Fetch");
    const fs::path dir = s_.results_dir(id) / me;
    if (!fs::is_directory(dir))
      return error(StatusCode::FAILED_PRECONDITION,
                   "participant " + me +
                       " has no result: its release was not in when the "
                       "analyst ran the job");
    // (path on the server, name sent): the participant's own files, then the shared model h.
    std::vector<std::pair<fs::path, std::string>> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file())
        files.emplace_back(e.path(), fs::relative(e.path(), dir).generic_string());
    const fs::path model = s_.results_dir(id) / kModelDir;
    if (fs::is_directory(model))
      for (const auto& e : fs::recursive_directory_iterator(model))
        if (e.is_regular_file())
          files.emplace_back(e.path(), "model/" + fs::relative(e.path(), model).generic_string());
    std::sort(files.begin(), files.end());
    std::vector<char> buf(s_.opts.max_chunk_bytes);
    for (const auto& [f, rel] : files) {
      const std::uint64_t size = fs::file_size(f);
      const std::string sum = sha256_file(f.string());
      std::ifstream in(f, std::ios::binary);
      if (!in) io_failure("cannot open", f);
      std::uint64_t offset = 0;
      do {
        if (ctx->IsCancelled()) return error(StatusCode::CANCELLED, "the fetch was cancelled");
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto n = static_cast<std::size_t>(in.gcount());
        v1::FetchChunk chunk;
        chunk.set_file(rel);
        chunk.set_offset(offset);
        chunk.set_data(buf.data(), n);
        chunk.set_file_size(size);
        if (offset == 0) chunk.set_sha256(sum);
        if (!writer->Write(chunk))
          return ticket.expired() ? timed_out()
                                  : error(StatusCode::ABORTED, "the client went away");
        ticket.progress(s_.opts.idle_seconds);
        offset += n;
      } while (offset < size);
    }
    return Status::OK;
  });
}

}  // namespace dcalign::service::rpc

namespace dcalign::service {
std::unique_ptr<v1::Analyst::Service> make_service(State& state) {
  return std::make_unique<rpc::Service>(state);
}
}  // namespace dcalign::service
