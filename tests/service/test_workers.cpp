// dcalign-server's job workers: the plan from the options, the order in which jobs are taken
// (round-robin across collaborations, FIFO within one, memory permitting), the memory estimate,
// N workers running N jobs at once, and a kill -9 while they do.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dcalign/align.hpp"
#include "dcalign/error.hpp"
#include "dcalign/npy.hpp"
#include "server_process.hpp"
#include "service/workers.hpp"

namespace dcalign::service::testing {
namespace {

using grpc::StatusCode;

ServerOptions worker_options(const std::string& device, int cpu_workers = -1,
                             std::vector<int> devices = {}) {
  ServerOptions o;
  o.device = device;
  o.cpu_workers = cpu_workers;
  o.devices = std::move(devices);
  return o;
}

std::vector<std::string> names(const std::vector<WorkerSpec>& w) {
  std::vector<std::string> out;
  for (const auto& x : w) out.push_back(x.name);
  return out;
}

TEST(ServiceWorkers, PlanFollowsTheOptions) {
  using V = std::vector<std::string>;
  // The default: hardware threads / threads per job CPU workers, and a worker per GPU first.
  EXPECT_EQ(names(plan_workers(worker_options("auto"), 4, 0)), (V{"cpu0", "cpu1", "cpu2", "cpu3"}));
  EXPECT_EQ(names(plan_workers(worker_options("auto"), 2, 2)),
            (V{"cuda0", "cuda1", "cpu0", "cpu1"}));
  ServerOptions t = worker_options("cpu");
  t.threads_per_job = 2;
  const auto planned = plan_workers(t, 5, 0);
  EXPECT_EQ(names(planned), (V{"cpu0", "cpu1"}));
  EXPECT_EQ(planned[0].threads, 2);
  // --device cuda: GPU workers only unless CPU workers are asked for.
  EXPECT_EQ(names(plan_workers(worker_options("cuda"), 8, 1)), (V{"cuda0"}));
  EXPECT_EQ(names(plan_workers(worker_options("cuda", 1, {1}), 8, 2)), (V{"cuda1", "cpu0"}));
  EXPECT_EQ(names(plan_workers(worker_options("cpu", 3), 1, 4)), (V{"cpu0", "cpu1", "cpu2"}));
  // What cannot be had says which option and why.
  const auto refused = [](const ServerOptions& o, int gpus, const std::string& words) {
    try {
      plan_workers(o, 4, gpus);
      ADD_FAILURE() << "expected a refusal: " << words;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(worker_options("cpu", 0), 0, "--cpu-workers 0 without GPU workers");
  refused(worker_options("auto", -1, {2}), 2, "--devices names CUDA device 2, but 2 are present");
  refused(worker_options("auto", -1, {0}), 0, "no CUDA device is usable here");
  refused(worker_options("auto", -1, {1, 1}), 2, "names CUDA device 1 twice");
  refused(worker_options("cpu", -1, {0}), 1, "--devices asks for GPU workers but --device is cpu");
  refused(worker_options("cpu", 5000), 0, "--cpu-workers 5000 is out of range");
}

TEST(ServiceWorkers, CollaborationsTakeTurnsAndEachKeepsItsOrder) {
  // Collaboration a queued three jobs before b and c queued one each: a's first, then b, c,
  // then a's second (a was served last), and never two of a's at once.
  std::vector<QueuedJob> q = {
      {"a", 1, 10, ""}, {"a", 2, 10, ""}, {"a", 3, 10, ""}, {"b", 4, 10, ""}, {"c", 5, 10, ""}};
  std::set<std::string> running;
  std::map<std::string, std::uint64_t> served;
  std::uint64_t count = 0;
  std::vector<std::string> order;
  while (!q.empty()) {
    const auto k = pick_job(q, running, served, 100);
    ASSERT_TRUE(k.has_value());
    order.push_back(q[*k].collaboration + std::to_string(static_cast<int>(q[*k].queued_at)));
    served[q[*k].collaboration] = ++count;
    q.erase(q.begin() + static_cast<std::ptrdiff_t>(*k));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b4", "c5", "a2", "a3"}));

  // A collaboration with a running job waits; a job larger than the free memory is left for
  // another worker, and the next collaboration's turn comes.
  q = {{"a", 1, 10, ""}, {"b", 2, 500, ""}, {"c", 3, 10, ""}};
  EXPECT_EQ(pick_job(q, {"a"}, {}, 100), std::optional<std::size_t>(2));
  EXPECT_EQ(pick_job(q, {}, {}, 1000), std::optional<std::size_t>(0));
  EXPECT_EQ(pick_job(q, {"a", "c"}, {}, 100), std::nullopt);
  EXPECT_EQ(pick_job({}, {}, {}, 100), std::nullopt);
}

TEST(ServiceWorkers, MemoryEstimateAndRefusal) {
  v1::CollaborationSpec s = small_spec(3, 1000, 10);  // 3 x 1000 x 10 anchors, no model
  // 5 copies of the anchors and 6 of the l x l products, 8 bytes each.
  EXPECT_EQ(job_bytes(s, 3, 0), (5u * 3 * 1000 * 10 + 6u * 3 * 10 * 10) * 8);
  s.set_model("linear");
  EXPECT_EQ(job_bytes(s, 3, 500), job_bytes(small_spec(3, 1000, 10), 3, 0) + 3u * 500 * 11 * 8);
  // Shapes at the spec's bounds saturate instead of wrapping.
  v1::CollaborationSpec huge = small_spec(1, 1000000, 4096);
  EXPECT_GT(job_bytes(huge, ~std::uint64_t{0} / 2, 0), std::uint64_t{1} << 62);

  std::vector<WorkerSpec> w(2);
  w[0].name = "cpu0";
  w[0].job_limit = 1000;
  w[1].name = "cuda0";
  w[1].job_limit = 4000;
  std::string why;
  EXPECT_TRUE(fits_some_worker(w, 4000, &why));
  EXPECT_FALSE(fits_some_worker(w, 4001, &why));
  EXPECT_NE(why.find("more than any worker of this server can give (at most 3.9 KiB, worker "
                     "cuda0)"),
            std::string::npos)
      << why;
}

TEST(ServiceWorkers, CollaborationTooLargeForEveryWorkerIsRefusedWithTheReason) {
  TempDir dir;
  ServerOptions o = test_options(dir.path / "data");
  o.max_job_bytes = 1u << 20;  // 1 MiB
  LiveServer server(o);
  auto analyst = client_for(server.port(), kAnalystToken);
  // 3 x 10000 x 8 anchors need about 9 MiB.
  expect_rpc_error([&] { analyst.create(small_spec(3, 10000, 8)); },
                   StatusCode::FAILED_PRECONDITION,
                   "the collaboration cannot run here: the job needs about 9.2 MiB of memory");
  EXPECT_NO_THROW(analyst.create(small_spec(3, 1000, 8)));
}

// The number of log lines of `event` for collaboration `id`.
int events(const std::string& log, const std::string& event, const std::string& id) {
  int n = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == event && j.value("collaboration", "") == id) ++n;
  }
  return n;
}

// Creates `n` collaborations of 2 participants and uploads every anchor (which queues the jobs).
std::vector<Created> create_and_upload(int port, int n) {
  std::vector<Created> out;
  for (int k = 0; k < n; ++k) {
    out.push_back(create(port, 2));
    for (int i = 0; i < 2; ++i) {
      try {
        client_for(port, out.back().tokens[i])
            .upload(out.back().id, v1::PART_ANCHOR, random_matrix(80, 4, 300 + 10 * k + i));
      } catch (const RpcError&) {
        // the server may be killed (by the test's crash point) before the last ack
      }
    }
  }
  return out;
}

TEST(ServiceWorkers, NWorkersRunNJobsAtOnce) {
  // The barrier holds each job until three are in their alignment at the same time: with three
  // workers every job is done, and each ran on its own worker.
  TempDir dir;
  Launch l;
  l.args = {"--cpu-workers", "3"};
  l.env = {{"DCALIGN_SERVER_BARRIER", "job.align:3"}};
  ServerProcess server(dir.path, "", l);
  const auto jobs = create_and_upload(server.port(), 3);
  std::set<std::string> workers;
  for (const auto& c : jobs) {
    ASSERT_EQ(wait_for_job(server.port(), c.id), "done") << server.log();
    const auto report =
        nlohmann::json::parse(client_for(server.port(), kAnalystToken).status(c.id).job_report());
    workers.insert(report.at("worker").get<std::string>());
  }
  EXPECT_EQ(workers, (std::set<std::string>{"cpu0", "cpu1", "cpu2"}));
  EXPECT_NE(server.log().find("\"arrived\":3"), std::string::npos) << server.log();
}

TEST(ServiceWorkers, OneWorkerCannotPassABarrierOfTwo) {
  // The converse, so that the test above can fail: one worker holds its job at the barrier
  // alone, which gives up after 2 s and fails the job with the reason.
  TempDir dir;
  Launch l;
  l.args = {"--cpu-workers", "1"};
  l.env = {{"DCALIGN_SERVER_BARRIER", "job.align:2:2"}};
  ServerProcess server(dir.path, "", l);
  const auto jobs = create_and_upload(server.port(), 1);
  ASSERT_EQ(wait_for_job(server.port(), jobs[0].id), "failed");
  EXPECT_NE(client_for(server.port(), kAnalystToken)
                .status(jobs[0].id)
                .job_error()
                .find("barrier job.align: only 1 of 2 threads came within 2 s"),
            std::string::npos);
}

TEST(ServiceWorkers, KillDuringConcurrentJobsRunsNoJobTwice) {
  // Three workers hold three jobs at once; the second to publish its results kills the server
  // (kill -9) before the store records it. After the restart every job is done; the one
  // recorded done before the kill is not run again, and no job ever ran on two workers at once.
  TempDir dir;
  Launch l;
  l.args = {"--cpu-workers", "3"};
  l.env = {{"DCALIGN_SERVER_BARRIER", "job.align:3"}};
  std::vector<Created> jobs;
  std::string first_log;
  {
    ServerProcess server(dir.path, "job.publish:2", l);
    jobs = create_and_upload(server.port(), 3);
    ASSERT_TRUE(server.killed_by_crash_point()) << server.log();
    first_log = server.log();
  }
  for (const auto& c : jobs)
    EXPECT_EQ(events(first_log, "job_started", c.id), 1) << c.id;  // one worker each
  l.env.clear();
  ServerProcess server(dir.path, "", l);
  for (const auto& c : jobs) ASSERT_EQ(wait_for_job(server.port(), c.id), "done") << server.log();
  const std::string log = server.log().substr(first_log.size());
  int kept = 0;
  for (const auto& c : jobs) {
    // The store is the record (the kill may come between it and the log line): a job it held
    // done kept its one attempt and was not started again; an interrupted one ran once more,
    // from its inputs.
    const auto attempts = client_for(server.port(), kAnalystToken).status(c.id).job_attempts();
    ASSERT_TRUE(attempts == 1u || attempts == 2u) << attempts;
    EXPECT_EQ(events(log, "job_started", c.id), attempts == 1u ? 0 : 1) << c.id;
    kept += attempts == 1u ? 1 : 0;
  }
  // The job whose publication killed the server was not recorded: at least it runs again.
  EXPECT_LE(kept, 2);
}

}  // namespace
}  // namespace dcalign::service::testing
