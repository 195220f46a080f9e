// Participants who join after the run (AddParticipant): enrolled against the fitted alignment
// by an Enroll job, exactly as `dcalign enroll` on the saved aligner, without touching any
// existing participant's result.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "dcalign/npy.hpp"
#include "server_process.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

TEST(ServiceLateParticipants, EnrolmentEqualsDcalignEnrollAndLeavesTheOthersAlone) {
  TempDir dir;
  LiveServer server(test_options(dir.path / "data"));
  auto analyst = client_for(server.port(), kAnalystToken);
  const auto created = analyst.create(small_spec(3, 80, 4));
  const std::string id = created.collaboration_id();
  // Before the run, nobody joins late.
  expect_rpc_error([&] { analyst.add_participant(id, "late"); }, StatusCode::FAILED_PRECONDITION,
                   "joins late only once the collaboration's job is done");
  for (int i = 0; i < 3; ++i)
    client_for(server.port(), created.tokens(i).token())
        .upload(id, v1::PART_ANCHOR, random_matrix(80, 4, 500 + i));
  ASSERT_EQ(wait_for_job(server.port(), id), "done");
  const fs::path results = dir.path / "data" / "collaborations" / id / "results";
  std::vector<std::string> before;
  for (int i = 0; i < 3; ++i) {
    const fs::path p = results / ("p" + std::to_string(i));
    before.push_back(file_bytes(p / "G.npy") + file_bytes(p / "report.json"));
  }

  // Only the analyst adds, a name at most once.
  expect_rpc_error(
      [&] { client_for(server.port(), created.tokens(0).token()).add_participant(id, "x"); },
      StatusCode::PERMISSION_DENIED, "");
  const auto token = analyst.add_participant(id, "late").token();
  expect_rpc_error([&] { analyst.add_participant(id, "late"); }, StatusCode::ALREADY_EXISTS,
                   "already has a participant 'late'");
  expect_rpc_error([&] { analyst.add_participant(id, "p1"); }, StatusCode::ALREADY_EXISTS, "p1");
  expect_rpc_error([&] { analyst.add_participant(id, "../x"); }, StatusCode::INVALID_ARGUMENT,
                   "participant");

  // It uploads its anchor only; then its enrolment runs.
  auto late = client_for(server.port(), token);
  expect_rpc_error([&] { late.upload(id, v1::PART_DATA, random_matrix(10, 4, 1)); },
                   StatusCode::FAILED_PRECONDITION, "uploads its anchor only");
  const Matrix<double> A = random_matrix(80, 4, 777);
  late.upload(id, v1::PART_ANCHOR, A);
  std::string state;
  for (int i = 0; i < 500 && state != "done" && state != "failed"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto now = late.status(id);
    for (const auto& p : now.participants())
      if (p.participant() == "late") state = p.enrolment_state();
  }
  ASSERT_EQ(state, "done");
  const auto st = analyst.status(id);
  ASSERT_EQ(st.participants_size(), 4);
  EXPECT_TRUE(st.participants(3).late());
  EXPECT_TRUE(st.participants(3).uploaded());
  EXPECT_FALSE(st.participants(0).late());
  EXPECT_EQ(st.job_state(), "done");

  // Its G_i is dcalign enroll's on the saved aligner, to the bit.
  late.fetch(id, (dir.path / "fetched").string());
  write_npy((dir.path / "A_late.npy").string(), A.view());
  const std::string cmd = std::string(DCALIGN_CLI_PATH) + " enroll --model " +
                          (results / "_aligner").string() + " --anchors " +
                          (dir.path / "A_late.npy").string() + " --out " +
                          (dir.path / "G_cli.npy").string() + " --threads 1 > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto served = read_npy_matrix<double>((dir.path / "fetched" / "G.npy").string());
  const auto expected = read_npy_matrix<double>((dir.path / "G_cli.npy").string());
  ASSERT_EQ(served.rows(), 4);
  ASSERT_EQ(served.cols(), 4);
  for (index_t k = 0; k < served.size(); ++k) EXPECT_EQ(served.data()[k], expected.data()[k]) << k;
  const auto report = nlohmann::json::parse(file_bytes(dir.path / "fetched" / "report.json"));
  EXPECT_TRUE(report.at("enrolled").get<bool>());
  EXPECT_EQ(report.at("participant"), "late");

  // Every existing participant's result is unchanged, byte for byte; the aligner is the
  // analyst's (a participant's fetch does not carry it).
  for (int i = 0; i < 3; ++i) {
    const fs::path p = results / ("p" + std::to_string(i));
    EXPECT_EQ(file_bytes(p / "G.npy") + file_bytes(p / "report.json"), before[i]) << i;
  }
  EXPECT_FALSE(fs::exists(dir.path / "fetched" / "_aligner"));
  EXPECT_FALSE(fs::exists(dir.path / "fetched" / "model" / "target.npy"));
  // Its release is closed once enrolled.
  expect_rpc_error([&] { late.upload(id, v1::PART_ANCHOR, A); }, StatusCode::FAILED_PRECONDITION,
                   "the enrolment is done");
}

}  // namespace
}  // namespace dcalign::service::testing
