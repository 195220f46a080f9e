// `dcalign client`: the analyst's and the participants' side of dcalign-server.
//   create          (analyst) a collaboration from a JSON spec; one token file per participant
//   reissue         (analyst) revoke a participant's token and write the new one
//   add-participant (analyst) a participant who joins after the run; writes its token
//   run             (analyst) queue the alignment
//   delete          (analyst) remove a collaboration and all its files
//   status          (both)    who has uploaded, the job's state and report
//   upload          (participant) the release: given matrices, or computed from private data
//   delete-release  (participant) remove the own release before the run
//   fetch           (participant) the own G_i and the report, into a directory
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/user.hpp"
#include "io/staged_outputs.hpp"
#include "service/client.hpp"
#include "service/common.hpp"

namespace dcalign::cli {
namespace {

namespace v1 = service::v1;
namespace fs = std::filesystem;

struct Common {
  std::string server, token_file, ca_cert, server_name;
  bool insecure = false;
  double deadline = 60;
};

// Every file a command reads is an input that no output may replace (io::StagedOutputs: the
// output rules of the whole command line, checked before any call to the server).
void protect_common(const Common& c, io::StagedOutputs& outputs) {
  outputs.protect(c.token_file, "--token-file");
  outputs.protect(c.ca_cert, "--ca-cert");
}

service::Client connect(const Common& c) {
  if (!(c.deadline > 0 && c.deadline <= 86400))
    out_of_range("--deadline", std::to_string(c.deadline), "more than 0 and at most 86400");
  service::ClientOptions o;
  o.target = c.server;
  o.ca_cert_file = c.ca_cert;
  o.server_name = c.server_name;
  o.insecure = c.insecure;
  o.deadline_seconds = c.deadline;
  if (!c.token_file.empty()) o.token = service::read_token_file(c.token_file, "token");
  return service::Client(o);
}

void add_common(CLI::App* cmd, Common& c) {
  add_path(cmd, "--server", c.server, "the server, host:port")->required();
  add_path(cmd, "--token-file", c.token_file, "file holding the analyst's or participant's token")
      ->required();
  add_path(cmd, "--ca-cert", c.ca_cert, "PEM roots that signed the server's certificate");
  add_path(cmd, "--server-name", c.server_name, "name to check the certificate against");
  cmd->add_flag("--insecure", c.insecure, "plaintext (a server started with --insecure-localhost)");
  add_real(cmd, "--deadline", c.deadline, "seconds each call may take (default 60)");
}

void check_request_id(const std::string& id) {
  try {
    service::check_request_id(id);
  } catch (const InvalidInput& e) {
    throw UsageError(std::string("--request-id: ") + e.what());
  }
}

void write_text(const std::string& tmp, const std::string& text, const std::string& what) {
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush())
    throw IoError("cannot write " + what + " (" + std::strerror(errno ? errno : EIO) + ")");
}

// After a call that the server cannot undo (tokens issued, an old token revoked): what the user
// reads when a local step then fails, and how to get the answer again.
[[noreturn]] void recover_hint(const std::exception& e, const std::string& done,
                               const std::string& request_id) {
  throw IoError(std::string(e.what()) + ". " + done +
                ": run the same command again with --request-id " + request_id +
                " within 10 minutes, and the server answers it again with the same tokens");
}

// --tokens-out: a new directory, or an empty one of the user's, checked before the call.
// Returns whether it was created here (then removed again if the call fails).
bool prepare_tokens_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      throw InvalidInput("--tokens-out '" + dir +
                         "' is a symbolic link: token files are written into a real directory "
                         "only (the link's target is not touched)");
    if (!S_ISDIR(st.st_mode))
      throw InvalidInput("--tokens-out '" + dir + "' exists and is not a directory");
    if (!fs::is_empty(dir))
      throw InvalidInput("--tokens-out " + dir + " exists and is not empty: not overwritten");
    return false;
  }
  if (::mkdir(dir.c_str(), 0700) != 0)
    throw InvalidInput("--tokens-out '" + dir + "': cannot create the directory (" +
                       std::strerror(errno) + ")");
  return true;
}

// Labels as an n x 1 matrix from a 1-D array (n,) or a 2-D array (n, 1).
Matrix<double> labels_matrix(const std::string& path) {
  if (read_npy_header(path).shape.size() == 1) {
    const std::vector<double> y = read_npy_vector<double>(path);
    return Matrix<double>(static_cast<index_t>(y.size()), 1, y);
  }
  return read_npy_matrix<double>(path);
}

struct UploadArgs {
  std::string collaboration, anchor, data, labels, priv, secret_out;
  std::uint64_t seed = 0;
  bool center = false;
};

void upload(const Common& c, const UploadArgs& a) {
  const bool given = !a.anchor.empty();
  if (given == !a.priv.empty())
    throw UsageError("give either --anchor (a computed release) or --private (private data)");
  if (!a.priv.empty() && a.secret_out.empty())
    throw UsageError("--private needs --secret-out: the secret basis F is needed to predict");
  io::StagedOutputs outputs;
  protect_common(c, outputs);
  outputs.protect(a.anchor, "--anchor");
  outputs.protect(a.data, "--data");
  outputs.protect(a.labels, "--labels");
  outputs.protect(a.priv, "--private");
  // An existing secret basis is never replaced by another: it may be the one that belongs to a
  // release already on the server. The same F again (the same data and seed) is fine.
  const bool secret_exists = !a.secret_out.empty() && fs::exists(fs::symlink_status(a.secret_out));
  const std::string secret_tmp =
      a.secret_out.empty() || secret_exists
          ? std::string()
          : outputs.stage(a.secret_out, "--secret-out", io::Stage::new_private);
  // An existing one: stage's checks (no device, not an input); it is never committed.
  if (secret_exists) outputs.stage(a.secret_out, "--secret-out");
  auto client = connect(c);
  const v1::GetStatusResponse st = client.status(a.collaboration);
  // A participant added after the run (AddParticipant) uploads its anchor only: it is enrolled
  // against the fitted alignment and h is not retrained. The server tells a late participant
  // its own enrolment state, and nobody else's.
  bool late = false;
  for (const auto& p : st.participants()) late = late || (p.late() && !p.enrolment_state().empty());
  if (late && (!a.labels.empty() || !a.data.empty()))
    throw UsageError(std::string(a.labels.empty() ? "--data" : "--labels") +
                     " is not used: you joined after the run, so you upload your anchor only "
                     "(your G_i is computed against the fitted alignment); remove it");
  const bool model = st.spec().model() != "none" && !late;
  if (model && a.labels.empty())
    throw UsageError("this collaboration trains a model: give --labels");
  // A release of this participant already on the server was made with some F: a new F would
  // not match it. Unless the F kept at --secret-out is reproduced (checked below), refused here,
  // before anything is computed or written.
  bool anchor_on_server = false;
  for (const auto& p : st.participants())
    for (const auto& part : p.parts())
      anchor_on_server = anchor_on_server || (part.part() == v1::PART_ANCHOR && part.complete());
  if (!given && anchor_on_server && !secret_exists)
    throw InvalidInput(
        "your anchor is already on the server, made with a secret basis that is "
        "not at --secret-out '" +
        a.secret_out +
        "': nothing was written or uploaded. Upload with the --secret-out that "
        "holds it, or delete the release first (client delete-release)");
  Matrix<double> A, X;
  if (given) {
    A = read_npy_matrix<double>(a.anchor);
    if (!a.data.empty()) X = read_npy_matrix<double>(a.data);
  } else {
    const auto& s = st.spec().anchor();
    User<double> user(read_npy_matrix<double>(a.priv), "participant");
    if (static_cast<std::uint64_t>(user.features()) != s.features())
      throw InvalidInput("--private " + a.priv + " has " + std::to_string(user.features()) +
                         " features: the collaboration's anchor has " +
                         std::to_string(s.features()));
    user.choose_secret_basis(static_cast<index_t>(st.spec().dim()), Mixing::haar, a.seed, a.center);
    const Matrix<double> anchor =
        make_anchor<double>(static_cast<index_t>(s.rows()), static_cast<index_t>(s.features()),
                            parse_anchor_kind(s.kind()), s.seed());
    A = user.release_anchor(anchor);
    if (model) X = user.release_data();
    const Matrix<double> F = user.reveal_secret_basis();
    if (secret_exists) {
      const Matrix<double> kept = read_npy_matrix<double>(a.secret_out);
      if (kept.rows() != F.rows() || kept.cols() != F.cols() ||
          !std::equal(F.data(), F.data() + F.size(), kept.data()))
        throw InvalidInput("--secret-out '" + a.secret_out +
                           "' holds another secret basis than this upload's (other data, "
                           "--seed or --center): not replaced, nothing was uploaded. It may "
                           "belong to a release on the server; choose a new name");
    } else {
      // The secret basis is kept before anything leaves this machine, private from its first
      // byte (write_npy writes its own temporary, which the umask makes 0600 too).
      const mode_t umask_before = ::umask(077);
      try {
        write_npy(secret_tmp, F.view());
      } catch (...) {
        ::umask(umask_before);
        throw;
      }
      ::umask(umask_before);
      outputs.commit();
    }
  }
  client.upload(a.collaboration, v1::PART_ANCHOR, A);
  if (model) {
    if (X.size() == 0) throw UsageError("this collaboration trains a model: give --data");
    client.upload(a.collaboration, v1::PART_DATA, X);
    client.upload(a.collaboration, v1::PART_LABELS, labels_matrix(a.labels));
  }
  std::cout << (late ? "uploaded the anchor (you joined late: an enrolment job aligns it) to "
                     : "uploaded the release to ")
            << "collaboration " << a.collaboration << "\n";
}

void print_status(const v1::GetStatusResponse& st, bool json) {
  if (json) {
    std::string out;
    google::protobuf::util::JsonPrintOptions o;
    o.add_whitespace = true;
    o.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(st, &out, o);
    std::cout << out;
    return;
  }
  std::cout << "collaboration " << st.spec().name() << ": method " << st.spec().method()
            << ", l = " << st.spec().dim() << ", job " << st.job_state();
  if (!st.job_error().empty()) std::cout << " (" << st.job_error() << ")";
  std::cout << "\n";
  for (const auto& p : st.participants())
    std::cout << "  " << p.participant() << ": " << (p.uploaded() ? "uploaded" : "waiting") << "\n";
}

}  // namespace

void add_client_command(CLI::App& app) {
  service::quiet_grpc_logs();
  auto* client = app.add_subcommand("client", kClientDescription);
  client->require_subcommand(1);
  static Common common[9];
  static std::string ids[9], spec_file, tokens_dir, participant, out_dir, request_id;
  static bool json = false;
  static UploadArgs up;

  auto* create = client->add_subcommand("create", "Create a collaboration (analyst)");
  add_common(create, common[0]);
  add_path(create, "--spec", spec_file, "the collaboration spec (JSON)")->required();
  add_path(create, "--tokens-out", tokens_dir,
           "directory for one token file per participant (new, or empty)")
      ->required();
  add_path(create, "--request-id", request_id,
           "repeat an earlier create whose tokens were lost (printed when that happens)");
  create->callback([] {
    check_request_id(request_id);
    auto outputs = std::make_unique<io::StagedOutputs>();
    protect_common(common[0], *outputs);
    outputs->protect(spec_file, "--spec");
    v1::CollaborationSpec spec;
    google::protobuf::util::JsonParseOptions o;
    o.ignore_unknown_fields = false;
    const auto st = google::protobuf::util::JsonStringToMessage(
        service::read_small_file(spec_file, "spec"), &spec, o);
    if (!st.ok())
      throw InvalidInput("--spec " + spec_file +
                         " is not a collaboration spec: " + std::string(st.message()));
    for (const auto& p : spec.participants()) service::check_name("participant", p);
    // Every local output exists, empty and private, before the server creates anything: the
    // tokens are shown once.
    const bool created = prepare_tokens_dir(tokens_dir);
    const std::string rid = request_id.empty() ? service::new_request_id() : request_id;
    std::vector<std::string> tmp;
    v1::CreateCollaborationResponse resp;
    try {
      for (const auto& p : spec.participants())
        tmp.push_back(outputs->stage((fs::path(tokens_dir) / (p + ".token")).string(),
                                     "--tokens-out", io::Stage::new_private));
      resp = connect(common[0]).create(spec, rid);
    } catch (...) {
      outputs.reset();  // the temporaries go before the directory made for them
      if (created) ::rmdir(tokens_dir.c_str());
      throw;
    }
    try {
      if (resp.tokens_size() != static_cast<int>(tmp.size()))
        throw IoError("the server returned " + std::to_string(resp.tokens_size()) + " tokens for " +
                      std::to_string(tmp.size()) + " participants");
      for (int k = 0; k < resp.tokens_size(); ++k)
        write_text(tmp[static_cast<std::size_t>(k)], resp.tokens(k).token() + "\n",
                   "the token of " + resp.tokens(k).participant());
      outputs->commit();
    } catch (const std::exception& e) {
      recover_hint(e,
                   "The collaboration " + resp.collaboration_id() +
                       " was created, but its tokens were not all written to --tokens-out " +
                       tokens_dir,
                   rid);
    }
    std::cout << resp.collaboration_id() << "\n";
  });

  auto* reissue = client->add_subcommand("reissue", "Revoke a participant's token (analyst)");
  add_common(reissue, common[1]);
  add_path(reissue, "--collaboration", ids[1], "collaboration id")->required();
  add_path(reissue, "--participant", participant, "participant name")->required();
  add_path(reissue, "--token-out", out_dir, "file for the new token (a new name)")->required();
  add_path(reissue, "--request-id", request_id,
           "repeat an earlier reissue whose token was lost (printed when that happens)");
  reissue->callback([] {
    check_request_id(request_id);
    io::StagedOutputs outputs;
    protect_common(common[1], outputs);
    // Checked and created (empty, 0600) before the server revokes the old token.
    const std::string tmp = outputs.stage(out_dir, "--token-out", io::Stage::new_private);
    const std::string rid = request_id.empty() ? service::new_request_id() : request_id;
    const auto t = connect(common[1]).reissue(ids[1], participant, rid);
    try {
      write_text(tmp, t.token() + "\n", "the new token");
      outputs.commit();
    } catch (const std::exception& e) {
      recover_hint(e,
                   "The token of " + participant +
                       " was reissued (the old one is revoked), "
                       "but the new one was not written to --token-out " +
                       out_dir,
                   rid);
    }
  });

  auto* add = client->add_subcommand(
      "add-participant",
      "Add a participant after the run (analyst); it uploads its anchor only and is enrolled");
  add_common(add, common[8]);
  add_path(add, "--collaboration", ids[8], "collaboration id")->required();
  add_path(add, "--participant", participant, "the new participant's name")->required();
  add_path(add, "--token-out", out_dir, "file for its token (a new name)")->required();
  add_path(add, "--request-id", request_id,
           "repeat an earlier call whose token was lost (printed when that happens)");
  add->callback([] {
    check_request_id(request_id);
    io::StagedOutputs outputs;
    protect_common(common[8], outputs);
    const std::string tmp = outputs.stage(out_dir, "--token-out", io::Stage::new_private);
    const std::string rid = request_id.empty() ? service::new_request_id() : request_id;
    const auto t = connect(common[8]).add_participant(ids[8], participant, rid);
    try {
      write_text(tmp, t.token() + "\n", "the token");
      outputs.commit();
    } catch (const std::exception& e) {
      recover_hint(e,
                   "Participant " + participant +
                       " was added, but its token was not written to --token-out " + out_dir,
                   rid);
    }
  });

  auto* run = client->add_subcommand("run", "Queue the alignment (analyst)");
  add_common(run, common[2]);
  add_path(run, "--collaboration", ids[2], "collaboration id")->required();
  run->callback([] {
    const std::string state = connect(common[2]).run(ids[2]);  // a failure prints its error alone
    std::cout << "job " << state << "\n";
  });

  auto* del = client->add_subcommand("delete", "Delete a collaboration and its files (analyst)");
  add_common(del, common[3]);
  add_path(del, "--collaboration", ids[3], "collaboration id")->required();
  del->callback([] { connect(common[3]).delete_collaboration(ids[3]); });

  auto* status = client->add_subcommand("status", "Uploads and the job's state");
  add_common(status, common[4]);
  add_path(status, "--collaboration", ids[4], "collaboration id")->required();
  status->add_flag("--json", json, "the whole status as JSON");
  status->callback([] { print_status(connect(common[4]).status(ids[4]), json); });

  auto* upload_cmd = client->add_subcommand("upload", "Upload the own release (participant)");
  add_common(upload_cmd, common[5]);
  add_path(upload_cmd, "--collaboration", up.collaboration, "collaboration id")->required();
  add_path(upload_cmd, "--anchor", up.anchor, "A_i = A F_i (a x l .npy), computed already");
  add_path(upload_cmd, "--data", up.data, "X~_i = X_i F_i (.npy), with --anchor");
  add_path(upload_cmd, "--labels", up.labels, "labels y_i (.npy)");
  add_path(upload_cmd, "--private", up.priv,
           "private data X_i (n x m .npy): F_i is drawn here and A_i computed");
  add_path(upload_cmd, "--secret-out", up.secret_out, "where to keep F_i (with --private)");
  add_unsigned(upload_cmd, "--seed", up.seed, "seed of F_i's random rotation (with --private)");
  upload_cmd->add_flag("--center", up.center, "centre X_i before its SVD (with --private)");
  upload_cmd->callback([] { upload(common[5], up); });

  auto* delrel = client->add_subcommand("delete-release", "Delete the own release (participant)");
  add_common(delrel, common[6]);
  add_path(delrel, "--collaboration", ids[6], "collaboration id")->required();
  delrel->callback([] { connect(common[6]).delete_release(ids[6]); });

  auto* fetch = client->add_subcommand("fetch", "Fetch the own G_i and report (participant)");
  add_common(fetch, common[7]);
  add_path(fetch, "--collaboration", ids[7], "collaboration id")->required();
  static std::string fetch_out;
  add_path(fetch, "--out", fetch_out,
           "directory to write: new, empty, or an earlier fetch's (replaced atomically)")
      ->required();
  fetch->callback([] {
    // The result directory may not hold the command's own inputs (check_replaceable_directory
    // would refuse a directory with foreign files anyway; this names the input).
    io::StagedOutputs outputs;
    protect_common(common[7], outputs);
    outputs.reserve_directory(fetch_out, "--out");
    connect(common[7]).fetch(ids[7], fetch_out);
  });
}

}  // namespace dcalign::cli
