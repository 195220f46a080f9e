// dcalign-server killed (SIGKILL, as by kill -9) at each point the reliability of the service
// depends on, then restarted on the same data directory: every acknowledged chunk is there,
// nothing duplicated or corrupt; the job is re-run or its result kept; no fetch ever sees part
// of a result. And SIGTERM shuts it down gracefully.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "dcalign/align.hpp"
#include "dcalign/npy.hpp"
#include "service_fixture.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

// dcalign-server as a child process.
class ServerProcess {
 public:
  ServerProcess(const fs::path& dir, const std::string& crash_at = "") : dir_(dir) {
    fs::create_directories(dir);
    { std::ofstream(dir / "analyst.token") << kAnalystToken << "\n"; }
    fs::remove(dir / "port");
    pid_ = ::fork();
    if (pid_ == 0) {
      if (!crash_at.empty()) ::setenv("DCALIGN_SERVER_CRASH_AT", crash_at.c_str(), 1);
      const std::string log = (dir / "server.log").string();
      if (std::freopen(log.c_str(), "a", stderr) == nullptr) ::_exit(120);
      const std::string data = (dir / "data").string(), token = (dir / "analyst.token").string(),
                        port = (dir / "port").string();
      ::execl(DCALIGN_SERVER_BINARY, "dcalign-server", "--data-dir", data.c_str(),
              "--analyst-token-file", token.c_str(), "--insecure-localhost", "--port-file",
              port.c_str(), "--device", "cpu", "--max-chunk-bytes", "4096", "--shutdown-grace", "5",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 400 && !fs::exists(dir / "port"); ++i) {
      if (exited()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    std::ifstream(dir / "port") >> port_;
    if (port_ == 0) ADD_FAILURE() << "dcalign-server did not start: see " << dir / "server.log";
  }
  ~ServerProcess() {
    if (!done_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  int port() const { return port_; }
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

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

struct Created {
  std::string id;
  std::vector<std::string> tokens;
};

Created create(int port, int participants, std::uint64_t anchor_rows = 80) {
  const auto r = client_for(port, kAnalystToken).create(small_spec(participants, anchor_rows, 4));
  Created c{r.collaboration_id(), {}};
  for (const auto& t : r.tokens()) c.tokens.push_back(t.token());
  return c;
}

std::string wait_for_job(int port, const std::string& id) {
  auto a = client_for(port, kAnalystToken);
  for (int i = 0; i < 1000; ++i) {
    const auto st = a.status(id).job_state();
    if (st != "queued" && st != "running") return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "timeout";
}

// Kills the server at the third chunk of an upload (2560 bytes in 1000-byte chunks), before or
// after its acknowledgement, and resumes the upload after a restart.
void crash_during_upload(const char* point, std::uint64_t acknowledged) {
  TempDir dir;
  const Matrix<double> A = random_matrix(80, 4, 42);  // 2560 bytes
  Created c;
  {
    ServerProcess server(dir.path, std::string(point) + ":3");
    c = create(server.port(), 1);
    auto p = client_for(server.port(), c.tokens[0], 1000);
    EXPECT_THROW(p.upload(c.id, v1::PART_ANCHOR, A), RpcError);
    ASSERT_TRUE(server.killed_by_crash_point()) << server.log();
  }
  ServerProcess server(dir.path);
  auto p = client_for(server.port(), c.tokens[0], 1000);
  const auto off = p.upload_offset(c.id, v1::PART_ANCHOR);
  EXPECT_EQ(off.committed(), acknowledged);
  EXPECT_FALSE(off.complete());
  const fs::path partial =
      dir.path / "data" / "collaborations" / c.id / "uploads" / "p0" / "anchor.partial";
  // Exactly the acknowledged bytes, which are the first bytes of A.
  const std::string kept = file_bytes(partial);
  EXPECT_EQ(kept, matrix_bytes(A).substr(0, acknowledged));
  p.upload(c.id, v1::PART_ANCHOR, A);
  EXPECT_TRUE(p.upload_offset(c.id, v1::PART_ANCHOR).complete());
  EXPECT_EQ(file_bytes(partial.parent_path() / "anchor.f64"), matrix_bytes(A));
  EXPECT_EQ(wait_for_job(server.port(), c.id), "done");
}

TEST(ServiceCrash, DuringAnUploadBeforeTheAcknowledgement) {
  crash_during_upload("upload.before_ack", 2000);
}

TEST(ServiceCrash, DuringAnUploadAfterTheAcknowledgement) {
  crash_during_upload("upload.after_ack", 2560);  // the last chunk, acknowledged, not verified
}

// Kills the server while the job runs (`point`), restarts it and checks that the job is run
// again from its inputs, that a fetch meanwhile sees nothing or everything, and the result.
void crash_during_job(const std::string& point) {
  TempDir dir;
  std::vector<Matrix<double>> anchors;
  Created c;
  {
    ServerProcess server(dir.path, point);
    c = create(server.port(), 3);
    for (int i = 0; i < 3; ++i) {
      anchors.push_back(random_matrix(80, 4, 200 + i));
      try {
        client_for(server.port(), c.tokens[i]).upload(c.id, v1::PART_ANCHOR, anchors.back());
      } catch (const RpcError&) {
        // The last upload queues the job, which may kill the server before the final ack.
      }
    }
    ASSERT_TRUE(server.killed_by_crash_point()) << server.log();
  }
  ServerProcess server(dir.path);
  // Right after the restart a fetch finds no result or the whole of it, never a part.
  try {
    client_for(server.port(), c.tokens[0]).fetch(c.id, (dir.path / "early").string());
    EXPECT_TRUE(fs::exists(dir.path / "early" / "G.npy"));
    EXPECT_TRUE(fs::exists(dir.path / "early" / "report.json"));
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code, StatusCode::FAILED_PRECONDITION) << e.what();
    EXPECT_FALSE(fs::exists(dir.path / "early"));
  }
  ASSERT_EQ(wait_for_job(server.port(), c.id), "done") << server.log();
  const auto st = client_for(server.port(), kAnalystToken).status(c.id);
  EXPECT_EQ(st.job_attempts(), 2u);
  AlignOptions opts;
  opts.seed = 5;
  const auto expected = align(Stack<double>::from_matrices(anchors), opts);
  for (int i = 0; i < 3; ++i) {
    const fs::path out = dir.path / ("r" + std::to_string(i));
    client_for(server.port(), c.tokens[i]).fetch(c.id, out.string());
    const auto G = read_npy_matrix<double>((out / "G.npy").string());
    for (index_t k = 0; k < G.size(); ++k) ASSERT_EQ(G.data()[k], expected.G[i].data()[k]);
  }
  // No temporary results are left behind.
  for (const auto& e : fs::directory_iterator(dir.path / "data" / "collaborations" / c.id))
    EXPECT_EQ(e.path().filename().string().find(".results.tmp"), std::string::npos) << e.path();
  EXPECT_NE(server.log().find("job_recovered"), std::string::npos);
}

TEST(ServiceCrash, DuringTheAlignment) { crash_during_job("job.align"); }
TEST(ServiceCrash, DuringTheWritingOfTheResults) { crash_during_job("job.write:2"); }
TEST(ServiceCrash, AfterPublishingBeforeRecordingTheResults) { crash_during_job("job.publish"); }

TEST(ServiceCrash, SigtermShutsDownGracefully) {
  TempDir dir;
  ServerProcess server(dir.path);
  const auto c = create(server.port(), 1);
  server.signal(SIGTERM);
  const int status = server.wait();
  ASSERT_TRUE(WIFEXITED(status)) << server.log();
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(server.log().find("\"event\":\"server_stopped\""), std::string::npos);
  // What was committed is there after a restart.
  ServerProcess again(dir.path);
  EXPECT_EQ(client_for(again.port(), kAnalystToken).status(c.id).participants_size(), 1);
}

TEST(ServiceCrash, ARealKillDuringUploadsLosesNothingAcknowledged) {
  TempDir dir;
  // 640000 bytes in 160 chunks, each written, flushed and recorded before its acknowledgement.
  const Matrix<double> A = random_matrix(20000, 4, 9);
  Created c;
  {
    ServerProcess server(dir.path);
    c = create(server.port(), 1, 20000);
    std::thread killer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      server.signal(SIGKILL);
    });
    try {
      client_for(server.port(), c.tokens[0], 4000).upload(c.id, v1::PART_ANCHOR, A);
    } catch (const RpcError&) {
    }
    killer.join();
    server.wait();
  }
  ServerProcess server(dir.path);
  auto p = client_for(server.port(), c.tokens[0], 4000);
  const auto off = p.upload_offset(c.id, v1::PART_ANCHOR);
  RecordProperty("acknowledged_before_the_kill", std::to_string(off.committed()));
  if (!off.complete()) {
    const fs::path partial =
        dir.path / "data" / "collaborations" / c.id / "uploads" / "p0" / "anchor.partial";
    EXPECT_EQ(file_bytes(partial), matrix_bytes(A).substr(0, off.committed()));
    p.upload(c.id, v1::PART_ANCHOR, A);
  }
  EXPECT_TRUE(p.upload_offset(c.id, v1::PART_ANCHOR).complete());
}

}  // namespace
}  // namespace dcalign::service::testing
