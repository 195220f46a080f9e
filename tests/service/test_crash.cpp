// dcalign-server killed (SIGKILL, as by kill -9) at each point the reliability of the service
// depends on, then restarted on the same data directory: every acknowledged chunk is there,
// nothing duplicated or corrupt; the job is re-run or its result kept; no fetch ever sees part
// of a result. And SIGTERM shuts it down gracefully.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "dcalign/align.hpp"
#include "dcalign/npy.hpp"
#include "server_process.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

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

// A crash between the deletion's rows (and its tombstone) and its files: the next start removes
// the orphan it can prove, and nothing of the other collaboration.
TEST(ServiceCrash, DuringADeletionBetweenTheRowsAndTheFiles) {
  TempDir dir;
  Created doomed, kept;
  {
    ServerProcess server(dir.path, "delete.files");
    doomed = create(server.port(), 1);
    kept = create(server.port(), 1);
    client_for(server.port(), kept.tokens[0])
        .upload(kept.id, v1::PART_ANCHOR, random_matrix(80, 4, 5));
    EXPECT_THROW(client_for(server.port(), kAnalystToken).delete_collaboration(doomed.id),
                 RpcError);
    ASSERT_TRUE(server.killed_by_crash_point()) << server.log();
  }
  const fs::path collaborations = dir.path / "data" / "collaborations";
  ASSERT_TRUE(fs::exists(collaborations / doomed.id));  // the crash left it
  ServerProcess server(dir.path);
  EXPECT_FALSE(fs::exists(collaborations / doomed.id));
  EXPECT_TRUE(fs::exists(collaborations / kept.id / "uploads" / "p0" / "anchor.f64"));
  expect_rpc_error([&] { client_for(server.port(), kAnalystToken).status(doomed.id); },
                   StatusCode::NOT_FOUND, "no collaboration");
  EXPECT_TRUE(client_for(server.port(), kAnalystToken).status(kept.id).participants(0).uploaded());
}

// ---- Resource bounds and faults, on a server process of its own.

// A TCP connection to 127.0.0.1:port from the loopback address `source` (127.0.0.0/8 is all
// this machine's), so that one test can play several peers.
int tcp_from(const char* source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd` within `seconds` (what it sent before is read and dropped).
bool closed_by_server(int fd, double seconds) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    timeval tv{0, 50000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
  }
  return false;
}

TEST(ServiceLimits, ConnectionsBeyondTheBoundsAreClosedAndTheServerKeepsServing) {
  TempDir dir;
  Launch l;
  l.args = {"--max-connections", "20", "--max-connections-per-peer", "4"};
  l.nofile = 512;
  ServerProcess server(dir.path, "", l);
  ASSERT_GT(server.port(), 0);
  // One peer: four connections are held, the others closed at once.
  std::vector<int> a;
  for (int k = 0; k < 10; ++k) a.push_back(tcp_from("127.0.0.2", server.port()));
  int closed = 0;
  for (int fd : a) closed += closed_by_server(fd, 0.3) ? 1 : 0;
  EXPECT_EQ(closed, 6) << server.log();
  // Another peer is served meanwhile.
  EXPECT_TRUE(client_for(server.port(), kAnalystToken).healthy());
  // Many more connections than the bounds, held open by their peer: the server holds only its
  // share, so it never reaches its descriptor limit (512). Without the bounds, these 600 alone
  // exceed it, and gRPC 1.51 never accepts again after EMFILE.
  std::vector<int> crowd;
  for (int k = 0; k < 600; ++k) {
    const int fd = tcp_from(k % 2 ? "127.0.0.3" : "127.0.0.4", server.port());
    if (fd >= 0) crowd.push_back(fd);
    if (k % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(client_for(server.port(), kAnalystToken).healthy());
  for (int fd : crowd) ::close(fd);
  for (int fd : a) ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // After all of it, new connections are accepted and served.
  EXPECT_TRUE(client_for(server.port(), kAnalystToken).healthy());
  std::vector<int> again;
  for (int k = 0; k < 3; ++k) again.push_back(tcp_from("127.0.0.2", server.port()));
  for (int fd : again) {
    EXPECT_FALSE(closed_by_server(fd, 0.3));
    ::close(fd);
  }
  EXPECT_EQ(server.log().find("server_unusable"), std::string::npos) << server.log();
  EXPECT_EQ(server.log().find("accept4"), std::string::npos) << server.log();
  EXPECT_NE(server.log().find("connection_refused"), std::string::npos);
}

TEST(ServiceLimits, AnIdleConnectionIsClosedAfterTheHandshakeTimeout) {
  TempDir dir;
  Launch l;
  l.args = {"--handshake-timeout", "1"};
  ServerProcess server(dir.path, "", l);
  ASSERT_GT(server.port(), 0);
  const int fd = tcp_from("127.0.0.2", server.port());
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(closed_by_server(fd, 0.5));
  EXPECT_TRUE(closed_by_server(fd, 4));
  ::close(fd);
}

TEST(ServiceLimits, ADescriptorLimitBelowTheConnectionBoundStopsTheStart) {
  TempDir dir;
  Launch l;
  l.args = {"--max-connections", "1000"};
  l.nofile = 256;
  l.expect_start = false;
  ServerProcess server(dir.path, "", l);
  EXPECT_EQ(server.exit_code_within(10), 1);
  EXPECT_NE(server.log().find("the process may open 256 files (ulimit -n"), std::string::npos)
      << server.log();
}

TEST(ServiceLimits, AServerThatCannotAcceptExitsForItsSupervisor) {
  TempDir dir;
  Launch l;
  l.env = {{"DCALIGN_SERVER_FAULT", "accept_failure"}};
  l.expect_start = false;  // it may be gone before the test reads the port
  ServerProcess server(dir.path, "", l);
  EXPECT_EQ(server.exit_code_within(10), 75) << server.log();
  EXPECT_NE(server.log().find("server_unusable"), std::string::npos) << server.log();
}

TEST(ServiceLimits, ASecondServerOnTheSameDirectoryIsRefusedNamingTheFirst) {
  TempDir dir;
  ServerProcess first(dir.path);
  ASSERT_GT(first.port(), 0);
  TempDir other;
  fs::create_directories(other.path);
  Launch l;
  l.data = dir.path / "data";
  l.expect_start = false;
  ServerProcess second(other.path, "", l);
  EXPECT_EQ(second.exit_code_within(10), 1);
  EXPECT_NE(second.log().find("in use by another dcalign-server (PID " +
                              std::to_string(first.pid()) + ")"),
            std::string::npos)
      << second.log();
  EXPECT_TRUE(client_for(first.port(), kAnalystToken).healthy());
}

TEST(ServiceFaults, AFullDiskReachesTheCallerAsResourceExhausted) {
  TempDir dir;
  Launch l;
  l.env = {{"DCALIGN_SERVER_FAULT", "upload.write:ENOSPC"}};
  ServerProcess server(dir.path, "", l);
  const Created c = create(server.port(), 1);
  auto p = client_for(server.port(), c.tokens[0], 1000);
  expect_rpc_error([&] { p.upload(c.id, v1::PART_ANCHOR, random_matrix(80, 4, 1)); },
                   StatusCode::RESOURCE_EXHAUSTED, "out of disk space");
  EXPECT_TRUE(client_for(server.port(), kAnalystToken).healthy());
}

TEST(ServiceFaults, AFailedJobRemovesItsTemporaryResultsAtOnceAndNamesNoServerPath) {
  TempDir dir;
  Launch l;
  l.env = {{"DCALIGN_SERVER_FAULT", "job.write"}};
  ServerProcess server(dir.path, "", l);
  const Created c = create(server.port(), 2);
  for (int i = 0; i < 2; ++i)
    client_for(server.port(), c.tokens[static_cast<std::size_t>(i)])
        .upload(c.id, v1::PART_ANCHOR, random_matrix(80, 4, 30 + i));
  ASSERT_EQ(wait_for_job(server.port(), c.id), "failed");
  for (const auto& e : fs::directory_iterator(dir.path / "data" / "collaborations" / c.id))
    EXPECT_EQ(e.path().filename().string().find(".results"), std::string::npos) << e.path();
  const std::string error = client_for(server.port(), kAnalystToken).status(c.id).job_error();
  EXPECT_NE(error.find("fault injected at job.write"), std::string::npos) << error;
  EXPECT_EQ(error.find(dir.path.string()), std::string::npos) << error;
}

}  // namespace
}  // namespace dcalign::service::testing
