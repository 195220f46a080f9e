// dcalign-server's MPI path (a spec's `distributed`) on loopback with 2 and 3 ranks: the G_i
// equal the single-process job's, and a rank killed mid-job fails the job with the reason,
// publishes nothing, and Run retries it.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "dcalign/align.hpp"
#include "dcalign/npy.hpp"
#include "server_process.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

// The server with its MPI path on this machine. Open MPI as in tests/dist: root allowed (CI),
// oversubscribed (2 cores), one thread per rank, no single-copy transfers (containers).
Launch mpi_launch(const std::string& dcalign_mpi = "") {
  Launch l;
  // Under AddressSanitizer (scripts/test-sanitizers.sh) the ranks run without LeakSanitizer,
  // which Open MPI's own unfreed state at MPI_Finalize would trip (as in tests/dist); the server
  // keeps it: -x sets it for the ranks only.
  l.args = {"--mpi-max-ranks", "4",
            "--mpirun",        DCALIGN_MPIEXEC,
            "--mpi-arg=-x",    "--mpi-arg=ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"};
  if (!dcalign_mpi.empty()) l.args.insert(l.args.end(), {"--dcalign-mpi", dcalign_mpi});
  l.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
           {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
           {"OMP_NUM_THREADS", "1"},
           {"OPENBLAS_NUM_THREADS", "1"},
           {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
           {"OMPI_MCA_rmaps_base_oversubscribe", "1"}};
  return l;
}

v1::CollaborationSpec spec_with_ranks(int participants, unsigned ranks) {
  v1::CollaborationSpec s = small_spec(participants, 80, 4);
  if (ranks > 0) s.mutable_distributed()->set_ranks(ranks);
  return s;
}

std::vector<Matrix<double>> anchors_for(int participants) {
  std::vector<Matrix<double>> out;
  for (int i = 0; i < participants; ++i) out.push_back(random_matrix(80, 4, 900 + i));
  return out;
}

// Creates the collaboration, uploads `anchors`, waits; the state.
std::pair<v1::CreateCollaborationResponse, std::string> run_collaboration(
    int port, const v1::CollaborationSpec& spec, const std::vector<Matrix<double>>& anchors) {
  const auto r = client_for(port, kAnalystToken).create(spec);
  for (std::size_t i = 0; i < anchors.size(); ++i)
    client_for(port, r.tokens(static_cast<int>(i)).token())
        .upload(r.collaboration_id(), v1::PART_ANCHOR, anchors[i]);
  return {r, wait_for_job(port, r.collaboration_id())};
}

double max_difference(const Matrix<double>& x, const double* y) {
  double d = 0;
  for (index_t k = 0; k < x.size(); ++k) d = std::max(d, std::abs(x.data()[k] - y[k]));
  return d;
}

TEST(ServiceMpi, TwoAndThreeRanksGiveTheSingleProcessG) {
  TempDir dir;
  ServerProcess server(dir.path, "", mpi_launch());
  const auto anchors = anchors_for(4);
  const auto [single, s1] = run_collaboration(server.port(), spec_with_ranks(4, 0), anchors);
  ASSERT_EQ(s1, "done") << server.log();
  for (unsigned ranks : {2u, 3u}) {
    const auto [dist, state] = run_collaboration(server.port(), spec_with_ranks(4, ranks), anchors);
    ASSERT_EQ(state, "done")
        << client_for(server.port(), kAnalystToken).status(dist.collaboration_id()).job_error();
    const auto report = nlohmann::json::parse(
        client_for(server.port(), kAnalystToken).status(dist.collaboration_id()).job_report());
    EXPECT_EQ(report.at("ranks"), ranks);
    for (int i = 0; i < 4; ++i) {
      const fs::path a = dir.path / ("s" + std::to_string(ranks) + std::to_string(i)),
                     b = dir.path / ("d" + std::to_string(ranks) + std::to_string(i));
      client_for(server.port(), single.tokens(i).token())
          .fetch(single.collaboration_id(), a.string());
      client_for(server.port(), dist.tokens(i).token()).fetch(dist.collaboration_id(), b.string());
      const auto Gs = read_npy_matrix<double>((a / "G.npy").string());
      const auto Gd = read_npy_matrix<double>((b / "G.npy").string());
      EXPECT_LE(max_difference(Gs, Gd.data()), 1e-12) << "ranks " << ranks << ", participant " << i;
    }
  }
  EXPECT_NE(server.log().find("\"event\":\"job_mpi\""), std::string::npos);
}

TEST(ServiceMpi, SpecsTheServerCannotRunAreRefused) {
  TempDir dir;
  ServerProcess plain(dir.path / "plain");  // no MPI path
  auto analyst = client_for(plain.port(), kAnalystToken);
  expect_rpc_error([&] { analyst.create(spec_with_ranks(3, 2)); }, StatusCode::FAILED_PRECONDITION,
                   "this server has no MPI path (--mpi-max-ranks is 0)");
  ServerProcess server(dir.path / "mpi", "", mpi_launch());
  auto a = client_for(server.port(), kAnalystToken);
  expect_rpc_error([&] { a.create(spec_with_ranks(3, 4)); }, StatusCode::INVALID_ARGUMENT,
                   "spec.distributed.ranks 4 exceeds the 3 participants");
  expect_rpc_error([&] { a.create(spec_with_ranks(8, 5)); }, StatusCode::FAILED_PRECONDITION,
                   "more than this server allows (--mpi-max-ranks 4)");
  expect_rpc_error([&] { a.create(spec_with_ranks(3, 1)); }, StatusCode::INVALID_ARGUMENT,
                   "expected 0 (one process) or 2 to 1024");
  v1::CollaborationSpec named = spec_with_ranks(3, 2);
  named.mutable_distributed()->set_hostfile("cluster");
  expect_rpc_error([&] { a.create(named); }, StatusCode::FAILED_PRECONDITION,
                   "this server has no --mpi-hostfile-dir");
}

TEST(ServiceMpi, ARankKilledFailsTheJobPublishesNothingAndRunRetriesIt) {
  TempDir dir;
  Launch l = mpi_launch(DCALIGN_KILL_ONE_RANK);
  l.env.push_back({"DCALIGN_TEST_KILL_MARKER", (dir.path / "killed").string()});
  l.env.push_back({"DCALIGN_TEST_REAL_MPI", DCALIGN_MPI_PATH});
  ServerProcess server(dir.path, "", l);
  const auto anchors = anchors_for(3);
  const auto [r, state] = run_collaboration(server.port(), spec_with_ranks(3, 2), anchors);
  const std::string& id = r.collaboration_id();
  ASSERT_EQ(state, "failed") << server.log();
  ASSERT_TRUE(fs::exists(dir.path / "killed"));  // rank 1 did die
  auto analyst = client_for(server.port(), kAnalystToken);
  const std::string error = analyst.status(id).job_error();
  EXPECT_NE(error.find("the distributed alignment over 2 ranks failed: mpirun"), std::string::npos)
      << error;
  // Nothing was published, and no staging is left behind.
  const fs::path cdir = dir.path / "data" / "collaborations" / id;
  EXPECT_FALSE(fs::exists(cdir / "results"));
  for (const auto& e : fs::directory_iterator(cdir))
    EXPECT_EQ(e.path().filename().string().find(".results"), std::string::npos) << e.path();
  expect_rpc_error(
      [&] {
        client_for(server.port(), r.tokens(0).token()).fetch(id, (dir.path / "early").string());
      },
      StatusCode::FAILED_PRECONDITION, "no result to fetch: the job is failed");

  // Run retries it; this time every rank lives.
  EXPECT_EQ(analyst.run(id), "queued");
  ASSERT_EQ(wait_for_job(server.port(), id), "done") << analyst.status(id).job_error();
  AlignOptions opts;
  opts.seed = 5;
  const auto expected = align(Stack<double>::from_matrices(anchors), opts);
  for (int i = 0; i < 3; ++i) {
    const fs::path out = dir.path / ("r" + std::to_string(i));
    client_for(server.port(), r.tokens(i).token()).fetch(id, out.string());
    EXPECT_LE(
        max_difference(read_npy_matrix<double>((out / "G.npy").string()), expected.G[i].data()),
        1e-12);
  }
}

}  // namespace
}  // namespace dcalign::service::testing
