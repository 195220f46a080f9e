#pragma once
// The RPC handlers of dcalign-server (internal to src/service): the unary calls here, the
// streams (Upload, Fetch) in transfer.cpp. Every handler authenticates first (UNAUTHENTICATED),
// then checks the caller's role and collaboration (PERMISSION_DENIED), then the request
// (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION), and only then touches files.
#include <algorithm>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "service/access.hpp"
#include "service/common.hpp"
#include "service/mpi_job.hpp"
#include "service/state.hpp"
#include "service/upload_rules.hpp"

namespace dcalign::service::rpc {

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

/// What a participant reads of a failed job's error (GetStatus, Fetch).
inline constexpr const char* kJobErrorForParticipants =
    "the job failed; the analyst can read why (the reason may concern other participants)";

/// The status a remote caller gets for an exception of `rpc`: its message without the server's
/// paths (the log keeps it whole). InvalidInput is INVALID_ARGUMENT, GoneError NOT_FOUND, a full
/// disk RESOURCE_EXHAUSTED, anything else INTERNAL with an incident number to find the log line.
Status status_of(const char* rpc, const std::exception& e);

/// Runs `body`, turning exceptions into statuses (status_of), and counts the call and its time
/// in the server's metrics.
template <typename F>
Status guarded(State& s, const char* rpc, F&& body) {
  const auto start = std::chrono::steady_clock::now();
  Status st;
  try {
    st = body();
  } catch (const std::exception& e) {
    st = status_of(rpc, e);
  }
  s.metrics.rpc(rpc, static_cast<int>(st.error_code()),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return st;
}

/// A part's progress as GetStatus reports it.
inline void add_part_status(v1::ParticipantStatus* ps, const PartRecord& r) {
  auto* part = ps->add_parts();
  part->set_part(static_cast<v1::Part>(r.part));
  part->set_rows(r.rows);
  part->set_cols(r.cols);
  part->set_received(r.received);
  part->set_total(r.total);
  part->set_complete(r.complete);
}

class Service final : public v1::Analyst::Service {
 public:
  explicit Service(State& s) : s_(s), access_(s) {}

  Status CreateCollaboration(ServerContext* ctx, const v1::CreateCollaborationRequest* req,
                             v1::CreateCollaborationResponse* resp) override {
    return guarded(s_, "CreateCollaboration", [&] {
      Caller c;
      if (auto st = access_.analyst(ctx, &c); !st.ok()) return st;
      check_request_id(req->request_id());
      if (answered(req->request_id(), *req, resp)) return Status::OK;
      check_spec(req->spec(), s_.opts.max_part_bytes);
      if (auto refusal = distributed_refusal(s_.opts, req->spec()))
        return error(StatusCode::FAILED_PRECONDITION,
                     "the collaboration cannot run here: " + *refusal);
      // Its alignment's shapes are known: one that no worker could run is refused now (the
      // data's rows, which a model adds, are checked when the job is queued).
      std::string why;
      if (!fits_some_worker(
              s_.workers,
              job_bytes(req->spec(), static_cast<std::uint64_t>(req->spec().participants_size()),
                        0),
              &why))
        return error(StatusCode::FAILED_PRECONDITION,
                     "the collaboration cannot run here: " + why +
                         (s_.opts.mpi_max_ranks > 0 ? " (or ask for MPI: spec.distributed)" : ""));
      const std::string id = new_collaboration_id();
      std::vector<std::pair<std::string, std::string>> rows;
      for (const auto& p : req->spec().participants()) {
        const std::string token = new_token();
        rows.emplace_back(p, sha256_hex(token));
        auto* t = resp->add_tokens();
        t->set_participant(p);
        t->set_token(token);
      }
      fs::create_directories(s_.collaboration_dir(id) / "uploads");
      s_.store->create_collaboration(id, req->spec().SerializeAsString(), rows);
      resp->set_collaboration_id(id);
      remember(req->request_id(), *req, *resp);
      log_event("info", "collaboration_created",
                {{"collaboration", id}, {"participants", rows.size()}});
      return Status::OK;
    });
  }

  Status ReissueToken(ServerContext* ctx, const v1::ReissueTokenRequest* req,
                      v1::ReissueTokenResponse* resp) override {
    return guarded(s_, "ReissueToken", [&] {
      Caller c;
      v1::CollaborationSpec spec;
      if (auto st = access_.analyst_on(ctx, req->collaboration_id(), &c, &spec); !st.ok())
        return st;
      check_name("participant", req->participant());
      check_request_id(req->request_id());
      if (answered(req->request_id(), *req, resp)) return Status::OK;
      const std::string token = new_token();
      if (!s_.store->replace_token(req->collaboration_id(), req->participant(), sha256_hex(token)))
        return error(StatusCode::NOT_FOUND, "collaboration " + req->collaboration_id() +
                                                " has no participant '" + req->participant() + "'");
      resp->mutable_token()->set_participant(req->participant());
      resp->mutable_token()->set_token(token);
      remember(req->request_id(), *req, *resp);
      log_event("info", "token_reissued",
                {{"collaboration", req->collaboration_id()},
                 {"participant_index",
                  s_.participant_index(req->collaboration_id(), req->participant())}});
      return Status::OK;
    });
  }

  Status AddParticipant(ServerContext* ctx, const v1::AddParticipantRequest* req,
                        v1::AddParticipantResponse* resp) override {
    return guarded(s_, "AddParticipant", [&] {
      Caller c;
      v1::CollaborationSpec spec;
      const std::string& id = req->collaboration_id();
      if (auto st = access_.analyst_on(ctx, id, &c, &spec); !st.ok()) return st;
      check_name("participant", req->participant());
      check_request_id(req->request_id());
      if (answered(req->request_id(), *req, resp)) return Status::OK;
      // Enrolment aligns against the fitted alignment: it must exist.
      const std::string state = s_.store->job(id).state;
      if (state != "done")
        return error(StatusCode::FAILED_PRECONDITION,
                     "a participant joins late only once the collaboration's job is done (it is " +
                         state + "): until then the spec's participants are the collaboration");
      if (spec.distributed().ranks() > 0)
        return error(StatusCode::FAILED_PRECONDITION,
                     "collaboration " + id +
                         " ran over MPI, which keeps no aligner to enrol a late participant "
                         "against: create a collaboration that includes it");
      if (!fs::is_directory(s_.results_dir(id) / kAlignerDir))
        return error(StatusCode::FAILED_PRECONDITION,
                     "collaboration " + id +
                         " keeps no fitted alignment to enrol a late participant against (its "
                         "job ran on an older dcalign-server): create a collaboration that "
                         "includes it");
      if (static_cast<int>(s_.store->participants(id).size()) >= SpecLimits::kMaxParticipants)
        return error(StatusCode::FAILED_PRECONDITION,
                     "collaboration " + id + " has " +
                         std::to_string(SpecLimits::kMaxParticipants) +
                         " participants, the most it may have");
      const std::string token = new_token();
      if (!s_.store->add_late_participant(id, req->participant(), sha256_hex(token)))
        return error(
            StatusCode::ALREADY_EXISTS,
            "collaboration " + id + " already has a participant '" + req->participant() + "'");
      resp->mutable_token()->set_participant(req->participant());
      resp->mutable_token()->set_token(token);
      remember(req->request_id(), *req, *resp);
      log_event("info", "participant_added",
                {{"collaboration", id},
                 {"participant_index", s_.participant_index(id, req->participant())},
                 {"late", true}});
      return Status::OK;
    });
  }

  Status Run(ServerContext* ctx, const v1::RunRequest* req, v1::RunResponse* resp) override {
    return guarded(s_, "Run", [&] {
      Caller c;
      v1::CollaborationSpec spec;
      const std::string& id = req->collaboration_id();
      if (auto st = access_.analyst_on(ctx, id, &c, &spec); !st.ok()) return st;
      // The job runs over the participants whose release is in; uploads close once it is
      // queued, so none may be under way now (checked and queued under the lock that uploads
      // take to start).
      std::lock_guard<std::mutex> lock(s_.mu);
      int in = 0;
      for (const auto& p : spec.participants()) in += s_.uploaded(id, spec, p) ? 1 : 0;
      if (in == 0)
        return error(StatusCode::FAILED_PRECONDITION,
                     "cannot run: no participant has uploaded its release");
      for (const auto& key : s_.active_parts)
        if (key.compare(0, id.size() + 1, id + "/") == 0)
          return error(StatusCode::FAILED_PRECONDITION,
                       "cannot run while an upload is in progress (" + key.substr(id.size() + 1) +
                           "): run when it has ended");
      JobRecord before = s_.store->job(id);
      if (before.state == "failed") {
        // A retry counts its interrupted attempts afresh (a failed job is never picked up, so
        // this cannot race with the worker).
        before.attempts = 0;
        s_.store->set_job(id, before);
      }
      // Failed enrolments of late participants are retried too (their anchors are in).
      if (before.state == "done")
        for (const auto& p : s_.store->late_participants(id)) {
          JobRecord e = s_.store->job(id, p);
          if (e.state != "failed") continue;
          e = JobRecord{};  // none, its attempts counted afresh
          s_.store->set_job(id, e, p);
          s_.queue_enrolment(id, p);
        }
      if (s_.store->transition_job(id, {"none", "failed"}, "queued")) {
        s_.note_queued({id, ""});
        log_event("info", "job_queued",
                  {{"collaboration", id}, {"job", id}, {"by", "analyst"}, {"participants_in", in}});
        s_.cv.notify_all();
      }
      resp->set_state(s_.store->job(id).state);
      return Status::OK;
    });
  }

  Status DeleteCollaboration(ServerContext* ctx, const v1::DeleteCollaborationRequest* req,
                             v1::DeleteCollaborationResponse*) override {
    return guarded(s_, "DeleteCollaboration", [&] {
      Caller c;
      v1::CollaborationSpec spec;
      const std::string& id = req->collaboration_id();
      if (auto st = access_.analyst_on(ctx, id, &c, &spec); !st.ok()) return st;
      {
        std::lock_guard<std::mutex> lock(s_.mu);
        if (s_.running_jobs.count(id))
          return error(StatusCode::FAILED_PRECONDITION,
                       "collaboration " + id + " has a running job: delete it when it ends");
        // The rows go first: once they are gone no call reaches the files, and a crash
        // before the files are removed leaves an orphan directory that recover() removes.
        s_.store->delete_collaboration(id);
      }
      crash_point("delete.files");  // the rows and the tombstone are in, the files still here
      fs::create_directories(s_.trash_dir());
      const fs::path trash = s_.trash_dir() / id;
      std::error_code ec;
      fs::rename(s_.collaboration_dir(id), trash, ec);
      fs::remove_all(ec ? s_.collaboration_dir(id) : trash, ec);
      if (ec) throw IoError("cannot remove the files of " + id + ": " + ec.message());
      log_event("info", "collaboration_deleted", {{"collaboration", id}});
      return Status::OK;
    });
  }

  Status GetStatus(ServerContext* ctx, const v1::GetStatusRequest* req,
                   v1::GetStatusResponse* resp) override {
    return guarded(s_, "GetStatus", [&] {
      Caller c;
      v1::CollaborationSpec spec;
      const std::string& id = req->collaboration_id();
      if (auto st = access_.member_of(ctx, id, &c, &spec); !st.ok()) return st;
      *resp->mutable_spec() = spec;
      for (const auto& p : spec.participants()) {
        auto* ps = resp->add_participants();
        ps->set_participant(p);
        ps->set_uploaded(s_.uploaded(id, spec, p));
        // A participant sees the others' progress (uploaded or not), never their shapes: the
        // rows of a participant's data are its own business.
        if (!c.analyst && p != c.who.participant) continue;
        for (const auto& r : s_.store->parts(id, p)) add_part_status(ps, r);
      }
      // Late participants: their enrolment; a participant sees its own, and the others' names.
      for (const auto& p : s_.store->late_participants(id)) {
        auto* ps = resp->add_participants();
        ps->set_participant(p);
        ps->set_late(true);
        const auto anchor = s_.store->part(id, p, v1::PART_ANCHOR);
        ps->set_uploaded(anchor && anchor->complete);
        if (!c.analyst && p != c.who.participant) continue;
        const JobRecord e = s_.store->job(id, p);
        ps->set_enrolment_state(e.state);
        ps->set_enrolment_error(e.error);
        if (anchor) add_part_status(ps, *anchor);
      }
      const JobRecord j = s_.store->job(id);
      resp->set_job_state(j.state);
      resp->set_job_attempts(static_cast<std::uint32_t>(j.attempts));
      // A job's error may speak of any participant's release: the analyst reads it, and tells
      // whom it concerns.
      resp->set_job_error(c.analyst || j.error.empty() ? j.error : kJobErrorForParticipants);
      resp->set_job_report(j.report);
      return Status::OK;
    });
  }

  Status GetUploadOffset(ServerContext* ctx, const v1::GetUploadOffsetRequest* req,
                         v1::GetUploadOffsetResponse* resp) override {
    return guarded(s_, "GetUploadOffset", [&] {
      Caller c;
      v1::CollaborationSpec spec;
      if (auto st = access_.participant_of(ctx, req->collaboration_id(), &c, &spec); !st.ok())
        return st;
      if (auto st = part_allowed(spec, req->part()); !st.ok()) return st;
      if (auto r = s_.store->part(c.who.collaboration, c.who.participant, req->part())) {
        resp->set_committed(r->received);
        resp->set_complete(r->complete);
        resp->set_total(r->total);
      }
      return Status::OK;
    });
  }

  Status Upload(ServerContext* ctx,
                grpc::ServerReaderWriter<v1::UploadAck, v1::UploadRequest>* stream) override;

  Status DeleteRelease(ServerContext* ctx, const v1::DeleteReleaseRequest* req,
                       v1::DeleteReleaseResponse*) override {
    return guarded(s_, "DeleteRelease", [&] {
      Caller c;
      v1::CollaborationSpec spec;
      if (auto st = access_.participant_of(ctx, req->collaboration_id(), &c, &spec); !st.ok())
        return st;
      const auto& [id, me] = c.who;
      std::lock_guard<std::mutex> lock(s_.mu);
      const JobKey job = s_.release_job(id, me);
      const std::string state = s_.store->job(id, job.participant).state;
      if (state != "none" && state != "failed")
        return error(StatusCode::FAILED_PRECONDITION,
                     std::string("the release can no longer be deleted: the ") +
                         (job.participant.empty() ? "job" : "enrolment") + " is " + state);
      for (int p : {v1::PART_ANCHOR, v1::PART_DATA, v1::PART_LABELS})
        if (s_.active_parts.count(id + "/" + me + "/" + part_name(p)))
          return error(StatusCode::FAILED_PRECONDITION,
                       std::string("an upload of the ") + part_name(p) + " is in progress");
      s_.store->delete_parts(id, me);
      std::error_code ec;
      fs::remove_all(s_.upload_dir(id, me), ec);
      if (ec) throw IoError("cannot remove the release of " + me + ": " + ec.message());
      log_event("info", "release_deleted",
                {{"collaboration", id}, {"participant_index", s_.participant_index(id, me)}});
      return Status::OK;
    });
  }

  Status Fetch(ServerContext* ctx, const v1::FetchRequest* req,
               grpc::ServerWriter<v1::FetchChunk>* writer) override;

 private:
  Status part_allowed(const v1::CollaborationSpec& spec, int part) {
    if (auto r = check_part(spec, part)) return error(static_cast<StatusCode>(r->code), r->message);
    return Status::OK;
  }

  Status upload_stream(ServerContext* ctx, const Caller& c, const v1::CollaborationSpec& spec,
                       const v1::UploadHeader& h,
                       grpc::ServerReaderWriter<v1::UploadAck, v1::UploadRequest>* stream,
                       StreamWatchdog::Ticket& ticket);
  Status finish_part(const Caller& c, int part, const PartRecord& r);

  /// The answer to an earlier call with `request_id` and the same request, into `resp`; false
  /// when there is none (or no id). The same id with another request is InvalidInput.
  template <typename Request, typename Response>
  bool answered(const std::string& request_id, const Request& req, Response* resp) {
    if (request_id.empty()) return false;
    std::lock_guard<std::mutex> lock(s_.answers_mu);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = s_.answers.begin(); it != s_.answers.end();)
      it = it->second.expires < now ? s_.answers.erase(it) : std::next(it);
    const auto it = s_.answers.find(request_id);
    if (it == s_.answers.end()) return false;
    if (it->second.request != req.SerializeAsString())
      throw InvalidInput("request_id " + request_id +
                         " was used for another request: a retry repeats the request exactly");
    if (!resp->ParseFromString(it->second.response))
      throw Error("the kept answer to request " + request_id + " is corrupt");
    log_event("info", "request_answered_again", {{"request_id", request_id}});
    return true;
  }
  template <typename Request, typename Response>
  void remember(const std::string& request_id, const Request& req, const Response& resp) {
    if (request_id.empty()) return;
    std::lock_guard<std::mutex> lock(s_.answers_mu);
    // Bounded: past kMaxAnswers the answer closest to its expiry makes room.
    if (s_.answers.size() >= State::kMaxAnswers && !s_.answers.count(request_id))
      s_.answers.erase(std::min_element(
          s_.answers.begin(), s_.answers.end(),
          [](const auto& a, const auto& b) { return a.second.expires < b.second.expires; }));
    s_.answers[request_id] = {
        req.SerializeAsString(), resp.SerializeAsString(),
        std::chrono::steady_clock::now() +
            std::chrono::seconds(static_cast<long long>(State::kRetryWindowSeconds))};
  }

  State& s_;
  Access access_;
};

}  // namespace dcalign::service::rpc
