// The job workers' plan, the memory a job needs, and the order in which jobs are taken
// (service/workers.hpp).
#include "service/workers.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <thread>

#include "dcalign/error.hpp"

namespace dcalign::service {

std::vector<WorkerSpec> plan_workers(const ServerOptions& o, int hardware_threads, int gpus) {
  if (o.threads_per_job < 0 || o.threads_per_job > 1024)
    throw InvalidInput("--threads-per-job " + std::to_string(o.threads_per_job) +
                       " is out of range: expected 0 (the default) to 1024");
  if (o.cpu_workers < -1 || o.cpu_workers > 1024)
    throw InvalidInput("--cpu-workers " + std::to_string(o.cpu_workers) +
                       " is out of range: expected 0 to 1024 (default: the cores / "
                       "--threads-per-job)");
  const int threads = o.threads_per_job > 0 ? o.threads_per_job : 1;
  std::vector<int> devices = o.devices;
  if (o.device == "cpu" && !devices.empty())
    throw InvalidInput("--devices asks for GPU workers but --device is cpu");
  if (devices.empty() && o.device == "cuda") devices = {0};
  if (devices.empty() && o.device == "auto")
    for (int d = 0; d < gpus; ++d) devices.push_back(d);
  std::vector<WorkerSpec> out;
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const int d = devices[k];
    if (d < 0 || d >= gpus)
      throw InvalidInput("--devices names CUDA device " + std::to_string(d) + ", but " +
                         (gpus == 0 ? std::string("no CUDA device is usable here")
                                    : std::to_string(gpus) + " are present (0 to " +
                                          std::to_string(gpus - 1) + ")"));
    if (std::find(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(k), d) !=
        devices.begin() + static_cast<std::ptrdiff_t>(k))
      throw InvalidInput("--devices names CUDA device " + std::to_string(d) + " twice");
    WorkerSpec w;
    w.name = "cuda" + std::to_string(d);
    w.device = Device::cuda;
    w.device_id = d;
    out.push_back(w);
  }
  // Without GPU workers the CPU takes every job; with them, CPU workers only when asked for
  // under --device cuda (which means: every job on a GPU), by default under auto.
  int cpu = o.cpu_workers;
  if (cpu < 0) cpu = o.device == "cuda" ? 0 : std::max(1, hardware_threads / threads);
  for (int k = 0; k < cpu; ++k) {
    WorkerSpec w;
    w.name = "cpu" + std::to_string(k);
    w.threads = threads;
    out.push_back(w);
  }
  if (out.empty())
    throw InvalidInput(
        "--cpu-workers 0 without GPU workers (--devices) leaves no worker to run "
        "jobs: give at least one");
  return out;
}

std::vector<WorkerSpec> plan_workers(const ServerOptions& o) {
  const int gpus = o.device == "cpu" ? 0 : cuda_device_count();
  if (o.device == "cuda" && gpus == 0) {
    std::string why;
    cuda_available(&why);
    throw InvalidInput("--device cuda: " + why);
  }
  std::vector<WorkerSpec> out =
      plan_workers(o, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), gpus);
  for (auto& w : out) {
    w.memory = device_memory(w.device, w.device_id).total;
    w.job_limit = o.max_job_bytes > 0 ? std::min(o.max_job_bytes, w.memory) : w.memory;
  }
  return out;
}

std::uint64_t job_bytes(const v1::CollaborationSpec& spec, std::uint64_t participants,
                        std::uint64_t rows) {
  // Saturating arithmetic: a spec's shapes are bounded (SpecLimits) but their products are not
  // meant to wrap.
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const auto mul = [](std::uint64_t a, std::uint64_t b) {
    return a != 0 && b > kMax / a ? kMax : a * b;
  };
  const auto add = [](std::uint64_t a, std::uint64_t b) { return a > kMax - b ? kMax : a + b; };
  const std::uint64_t l = spec.dim(), a = spec.anchor().rows();
  // Over MPI each rank aligns its share of the participants (the ranks' hosts are alike, one
  // rank per worker's memory, is the assumption); the server itself streams the anchors.
  if (spec.distributed().ranks() > 1)
    participants = (participants + spec.distributed().ranks() - 1) / spec.distributed().ranks();
  // The float64 anchors as read, their cast, and the algorithm's copies and products: 5 copies
  // of the c a x l anchors and 6 of the c l x l matrices bound every method's workspace.
  std::uint64_t values =
      add(mul(5, mul(participants, mul(a, l))), mul(6, mul(participants, mul(l, l))));
  // With a model: X~_i as read and X~_i G_i stacked, and the learner's own copy.
  if (spec.model() != "none") values = add(values, mul(3, mul(rows, l + 1)));
  return mul(values, 8);
}

std::string bytes_in_words(std::uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

bool fits_some_worker(const std::vector<WorkerSpec>& workers, std::uint64_t bytes,
                      std::string* why) {
  const WorkerSpec* best = nullptr;
  for (const auto& w : workers)
    if (!best || w.job_limit > best->job_limit) best = &w;
  if (best && bytes <= best->job_limit) return true;
  if (why)
    *why = "the job needs about " + bytes_in_words(bytes) +
           " of memory (estimated from the "
           "spec's shapes), more than any worker of this server can give (at most " +
           bytes_in_words(best ? best->job_limit : 0) + ", worker " +
           (best ? best->name : std::string("none")) +
           "): use fewer participants, fewer anchor rows or a smaller dim, or a server with "
           "more memory";
  return false;
}

std::optional<std::size_t> pick_job(const std::vector<QueuedJob>& queued,
                                    const std::set<std::string>& running,
                                    const std::map<std::string, std::uint64_t>& last_served,
                                    std::uint64_t free_bytes) {
  // Per collaboration: its oldest waiting job (FIFO within a collaboration).
  std::map<std::string, std::size_t> head;
  for (std::size_t k = 0; k < queued.size(); ++k) {
    const auto& j = queued[k];
    if (running.count(j.collaboration)) continue;  // one job of a collaboration at a time
    auto it = head.find(j.collaboration);
    if (it == head.end() || j.queued_at < queued[it->second].queued_at) head[j.collaboration] = k;
  }
  // Turns: never served first (by their oldest job), then the one served longest ago.
  std::vector<std::size_t> order;
  for (const auto& [c, k] : head) order.push_back(k);
  const auto served = [&](std::size_t k) -> std::uint64_t {
    const auto it = last_served.find(queued[k].collaboration);
    return it == last_served.end() ? 0 : it->second;
  };
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (served(x) != served(y)) return served(x) < served(y);
    if (queued[x].queued_at != queued[y].queued_at)
      return queued[x].queued_at < queued[y].queued_at;
    return queued[x].collaboration < queued[y].collaboration;
  });
  for (std::size_t k : order)
    if (queued[k].bytes <= free_bytes) return k;
  return std::nullopt;
}

}  // namespace dcalign::service
