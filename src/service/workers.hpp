#pragma once
// dcalign-server's job workers: one per GPU it is given, and N on the CPU; which job a free
// worker takes (round-robin across collaborations, FIFO within one); and whether a job's shapes
// fit a worker's memory. Internal to src/service.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dcalign/backend.hpp"
#include "dcalign/service/v1/analyst.pb.h"
#include "service/server.hpp"

namespace dcalign::service {

/// One worker: its device and what a job may use there.
struct WorkerSpec {
  std::string name;  ///< "cpu0", "cpu1", ..., "cuda0" (the ordinal), ...
  Device device = Device::cpu;
  int device_id = 0;
  int threads = 1;              ///< the backend's threads (CPU workers)
  std::uint64_t memory = 0;     ///< the device's memory in all (bytes)
  std::uint64_t job_limit = 0;  ///< the most a job may need here: memory, or --max-job-bytes
};

/// The workers `opts` asks for, GPU workers first (a free GPU worker is preferred). Throws
/// InvalidInput naming the option when they cannot be had here (a device that is not present,
/// no worker at all). `hardware_threads` and `gpus` are this machine's (parameters for tests).
std::vector<WorkerSpec> plan_workers(const ServerOptions& opts, int hardware_threads, int gpus);
/// plan_workers for this machine.
std::vector<WorkerSpec> plan_workers(const ServerOptions& opts);

/// The memory a job needs, estimated from its shapes (bytes): the anchors read in float64 and
/// cast to the job's precision, the alignment's workspace (a few copies of the anchors and the
/// c l x l products), and with a model the participants' data, mapped and stacked. `rows` is
/// the participants' rows in all (0 for alignment only). Over MPI (spec.distributed), one
/// rank's share of the participants. Overestimates rather than under.
std::uint64_t job_bytes(const v1::CollaborationSpec& spec, std::uint64_t participants,
                        std::uint64_t rows);

/// The largest job limit of `workers`, and whether a job of `bytes` fits any of them; `why`
/// receives the refusal's words when not.
bool fits_some_worker(const std::vector<WorkerSpec>& workers, std::uint64_t bytes,
                      std::string* why);

/// A job waiting for a worker.
struct QueuedJob {
  std::string collaboration;
  double queued_at = 0;     ///< when it was queued (seconds; only the order matters)
  std::uint64_t bytes = 0;  ///< job_bytes
  std::string participant;  ///< the late participant it enrols; empty: the alignment
};

/// Which of `queued` a free worker with `free_bytes` of memory takes next, or nothing.
/// Collaborations take turns: among those with a job waiting and none running, the one served
/// longest ago (never: first, by its oldest job) goes first, and its oldest job (FIFO); a job that
/// does not fit the worker's free memory is left for another worker (or for later) and the next
/// collaboration's turn comes. `last_served` holds a sequence number per collaboration, larger for
/// later.
std::optional<std::size_t> pick_job(const std::vector<QueuedJob>& queued,
                                    const std::set<std::string>& running,
                                    const std::map<std::string, std::uint64_t>& last_served,
                                    std::uint64_t free_bytes);

/// A byte count in words: "1.5 GiB".
std::string bytes_in_words(std::uint64_t bytes);

}  // namespace dcalign::service
