// The MPI path of a job (service/mpi_job.hpp).
#include "service/mpi_job.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "dcalign/error.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/options.hpp"
#include "service/common.hpp"
#include "service/state.hpp"

extern char** environ;

namespace dcalign::service {
namespace {

// dcalign-mpi beside this executable (dcalign-server and dcalign-mpi are built and installed
// together), unless the operator named one.
std::string dcalign_mpi(const ServerOptions& o) {
  if (!o.dcalign_mpi.empty()) return o.dcalign_mpi;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("dcalign-mpi") : (self.parent_path() / "dcalign-mpi").string();
}

// The last `n` bytes of a file (mpirun's output, for the job's error).
std::string tail_of(const fs::path& file, std::size_t n) {
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (text.size() > n) text = "..." + text.substr(text.size() - n);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

std::optional<std::string> distributed_refusal(const ServerOptions& o,
                                               const v1::CollaborationSpec& spec) {
  if (spec.distributed().ranks() == 0) return std::nullopt;
  const auto& d = spec.distributed();
  if (o.mpi_max_ranks == 0)
    return std::string(
        "spec.distributed asks for MPI, but this server has no MPI path "
        "(--mpi-max-ranks is 0)");
  if (static_cast<int>(d.ranks()) > o.mpi_max_ranks)
    return "spec.distributed.ranks " + std::to_string(d.ranks()) +
           " is more than this server allows (--mpi-max-ranks " + std::to_string(o.mpi_max_ranks) +
           ")";
  if (!d.hostfile().empty()) {
    if (o.mpi_hostfile_dir.empty())
      return "spec.distributed.hostfile '" + d.hostfile() +
             "' names a hostfile, but this server has no --mpi-hostfile-dir";
    if (!fs::is_regular_file(fs::path(o.mpi_hostfile_dir) / d.hostfile()))
      return "spec.distributed.hostfile '" + d.hostfile() + "' is not a hostfile of this server";
  }
  return std::nullopt;
}

std::vector<std::string> align_arguments(const v1::CollaborationSpec& spec) {
  const AlignRequest r = align_request(spec);
  std::vector<std::string> args = {"--method", spec.method(), "--seed",
                                   std::to_string(spec.seed())};
  for (const auto& [key, value] : spec.options()) {
    const OptionInfo* row = find_option(OptionEntry::service, key, r.align.method);
    if (!row || row->cli.empty() || row->name == "seed") continue;
    const OptionValue v = get_option(r, *row);
    if (row->type == OptionType::flag) {
      // The command line's flag sets one value (--consensus: true, --no-evaluate: false).
      if (std::get<bool>(v) != row->cli_negated) args.push_back(row->cli);
      continue;
    }
    args.push_back(row->cli);
    args.push_back(to_string(v));
  }
  return args;
}

MpiAlignment align_over_mpi(const ServerOptions& o, const v1::CollaborationSpec& spec,
                            const std::vector<fs::path>& anchor_files, const fs::path& work) {
  const auto c = static_cast<index_t>(anchor_files.size());
  const auto a = static_cast<index_t>(spec.anchor().rows());
  const auto l = static_cast<index_t>(spec.dim());
  const int ranks = static_cast<int>(spec.distributed().ranks());
  if (c < ranks)
    throw InvalidInput(std::to_string(c) + " participants' releases are in, fewer than the " +
                       std::to_string(ranks) +
                       " ranks of spec.distributed: every rank needs at least one");
  // The anchors as one (c, a, l) file, written one participant at a time (the server never holds
  // them all); each rank reads its slice.
  const fs::path anchors = work / "anchors.npy", out = work / "G.npy",
                 report = work / "report.json", log = work / "mpirun.log";
  create_npy_stack<double>(anchors.string(), c, a, l);
  for (index_t k = 0; k < c; ++k) {
    const Matrix<double> A = read_stored_part(anchor_files[static_cast<std::size_t>(k)], a, l);
    write_npy_stack_slice<double>(anchors.string(), k,
                                  StackView<const double>(A.data(), 1, a, l, a, a * l));
  }
  std::vector<std::string> args = {o.mpirun, "-np", std::to_string(ranks)};
  const std::string hostfile =
      spec.distributed().hostfile().empty()
          ? o.mpi_hostfile
          : (fs::path(o.mpi_hostfile_dir) / spec.distributed().hostfile()).string();
  if (!hostfile.empty()) args.insert(args.end(), {"--hostfile", hostfile});
  args.insert(args.end(), o.mpi_args.begin(), o.mpi_args.end());
  args.insert(args.end(), {dcalign_mpi(o), "align", "--distributed", "--anchors", anchors.string(),
                           "--out", out.string(), "--report", report.string()});
  const auto more = align_arguments(spec);
  args.insert(args.end(), more.begin(), more.end());
  MpiAlignment result;
  for (const auto& x : args) result.command += (result.command.empty() ? "" : " ") + x;

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (auto& x : args) argv.push_back(x.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    throw Error("cannot start " + o.mpirun + " (" + std::strerror(rc) +
                "): is Open MPI installed (--mpirun)?");
  // Waits, bounded by --mpi-timeout: then mpirun is asked to stop (it stops its ranks), and
  // killed if it does not within 10 s.
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<long long>(o.mpi_timeout_seconds * 1000));
  int status = 0;
  bool timed_out = false;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR)
      throw Error("cannot wait for mpirun: " + std::string(std::strerror(errno)));
    if (!timed_out && std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      ::kill(pid, SIGTERM);
      std::thread([pid] {
        std::this_thread::sleep_for(std::chrono::seconds(10));
        ::kill(pid, SIGKILL);  // harmless if it has ended (the pid is not reused before waitpid)
      }).detach();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how =
        timed_out ? "ran past --mpi-timeout " + std::to_string(o.mpi_timeout_seconds) + " s"
        : WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                            : "was killed by signal " + std::to_string(WTERMSIG(status));
    throw Error("the distributed alignment over " + std::to_string(ranks) +
                " ranks failed: mpirun " + how +
                " (a rank that died, a host it could not reach, or an error of the "
                "alignment). Its output ends: " +
                tail_of(log, 600));
  }
  const Stack<double> G = read_npy_stack<double>(out.string());
  if (G.count() != c || G.rows() != l || G.cols() != l)
    throw Error("the distributed alignment wrote G of shape (" + std::to_string(G.count()) + ", " +
                std::to_string(G.rows()) + ", " + std::to_string(G.cols()) + "), not (" +
                std::to_string(c) + ", " + std::to_string(l) + ", " + std::to_string(l) + ")");
  for (index_t k = 0; k < c; ++k) result.G.push_back(G.matrix(k));
  std::ifstream in(report);
  result.report.assign((std::istreambuf_iterator<char>(in)), {});
  if (result.report.empty()) throw Error("the distributed alignment wrote no report");
  return result;
}

}  // namespace dcalign::service
