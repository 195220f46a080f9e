#pragma once
// dcalign-server as a child process (the tests that kill it, signal it or read its log), and
// helpers over it.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "service_fixture.hpp"

namespace dcalign::service::testing {

// How a child server is started besides the defaults.
struct Launch {
  std::vector<std::string> args;                         ///< more command-line arguments
  std::vector<std::pair<std::string, std::string>> env;  ///< more environment variables
  rlim_t nofile = 0;                                     ///< RLIMIT_NOFILE (soft = hard), 0: as is
  bool expect_start = true;                              ///< a failed start is a test failure
  fs::path data;                                         ///< the data directory, if not dir/data
};

// dcalign-server as a child process.
class ServerProcess {
 public:
  ServerProcess(const fs::path& dir, const std::string& crash_at = "", const Launch& launch = {})
      : dir_(dir) {
    fs::create_directories(dir);
    { std::ofstream(dir / "analyst.token") << kAnalystToken << "\n"; }
    fs::remove(dir / "port");
    pid_ = ::fork();
    if (pid_ == 0) {
      if (!crash_at.empty()) ::setenv("DCALIGN_SERVER_CRASH_AT", crash_at.c_str(), 1);
      for (const auto& [k, v] : launch.env) ::setenv(k.c_str(), v.c_str(), 1);
      if (launch.nofile > 0) {
        const rlimit rl{launch.nofile, launch.nofile};
        if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(121);
      }
      const std::string log = (dir / "server.log").string();
      if (std::freopen(log.c_str(), "a", stderr) == nullptr) ::_exit(120);
      const std::string data = (launch.data.empty() ? dir / "data" : launch.data).string(),
                        token = (dir / "analyst.token").string(), port = (dir / "port").string();
      std::vector<std::string> args = {"dcalign-server",
                                       "--data-dir",
                                       data,
                                       "--analyst-token-file",
                                       token,
                                       "--insecure-localhost",
                                       "--port-file",
                                       port,
                                       "--device",
                                       "cpu",
                                       "--max-chunk-bytes",
                                       "4096",
                                       "--shutdown-grace",
                                       "5"};
      args.insert(args.end(), launch.args.begin(), launch.args.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(DCALIGN_SERVER_BINARY, argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 400 && !fs::exists(dir / "port"); ++i) {
      if (exited()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    std::ifstream(dir / "port") >> port_;
    if (port_ == 0 && launch.expect_start)
      ADD_FAILURE() << "dcalign-server did not start: see " << dir / "server.log";
  }
  ~ServerProcess() {
    if (!done_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  /// Waits for the process; its wait status.
  int wait() {
    if (!done_) {
      ::waitpid(pid_, &status_, 0);
      done_ = true;
    }
    return status_;
  }
  bool exited() {
    if (done_) return true;
    if (::waitpid(pid_, &status_, WNOHANG) == pid_) done_ = true;
    return done_;
  }
  /// The exit status once the process has ended within `seconds`, or -1.
  int exit_code_within(double seconds) {
    for (int i = 0; i < seconds * 40 && !exited(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    return exited() && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }
  bool killed_by_crash_point() {
    for (int i = 0; i < 400 && !exited(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    return exited() && WIFSIGNALED(status_) && WTERMSIG(status_) == SIGKILL;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  std::string log() const {
    std::ifstream in(dir_ / "server.log");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
  int port_ = 0, status_ = 0;
  bool done_ = false;
};

inline std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

struct Created {
  std::string id;
  std::vector<std::string> tokens;
};

inline Created create(int port, int participants, std::uint64_t anchor_rows = 80) {
  const auto r = client_for(port, kAnalystToken).create(small_spec(participants, anchor_rows, 4));
  Created c{r.collaboration_id(), {}};
  for (const auto& t : r.tokens()) c.tokens.push_back(t.token());
  return c;
}

inline std::string wait_for_job(int port, const std::string& id) {
  auto a = client_for(port, kAnalystToken);
  for (int i = 0; i < 1000; ++i) {
    const auto st = a.status(id).job_state();
    if (st != "queued" && st != "running") return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "timeout";
}

}  // namespace dcalign::service::testing
