#pragma once
// The MPI path of a job (a spec's `distributed`): the participants' anchors are staged as one
// (c, a, l) NPY file in the data directory, `mpirun -np N dcalign-mpi align --distributed` aligns
// them over the configured hosts (each rank reads its slice), and the server reads back G and
// the report, then trains and publishes as for any job. Internal to src/service.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dcalign/matrix.hpp"
#include "dcalign/service/v1/analyst.pb.h"
#include "service/server.hpp"

namespace dcalign::service {

/// Why this server cannot run the spec's distributed job (no MPI path, too many ranks, an
/// unknown hostfile), or nothing. The spec's own bounds are check_spec's.
std::optional<std::string> distributed_refusal(const ServerOptions& opts,
                                               const v1::CollaborationSpec& spec);

/// `dcalign align`'s arguments for the spec's method, seed and options (the option schema's
/// command-line spellings of its spec keys).
std::vector<std::string> align_arguments(const v1::CollaborationSpec& spec);

struct MpiAlignment {
  std::vector<Matrix<double>> G;  ///< per member, in order
  std::string report;             ///< the alignment report (JSON)
  std::string command;            ///< what ran, for the log
};

/// Aligns the anchors `anchor_files` (raw column-major a x l float64 parts, one per member) over
/// MPI in `work` (a new directory, removed by the caller). Throws Error with mpirun's exit
/// status and the end of its output when it fails (a rank killed, a host unreachable, ...).
MpiAlignment align_over_mpi(const ServerOptions& opts, const v1::CollaborationSpec& spec,
                            const std::vector<std::filesystem::path>& anchor_files,
                            const std::filesystem::path& work);

}  // namespace dcalign::service
