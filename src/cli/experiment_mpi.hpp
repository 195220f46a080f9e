#pragma once
// `dcalign experiment FILE --distributed` under mpirun (dcalign-experiment-mpi): the trials and
// sweep points are spread over the ranks with dynamic assignment. Rank 0 holds the queue, the
// checkpoint and the results and runs no trial itself (with one rank it runs them all); every
// other rank asks it for the next undone trial, runs it on its own worker threads (its model
// fits side by side) and sends its records back, every double exactly (the checkpoint's trial
// format). Rank 0 writes the outputs: bit for bit those of one process. A trial that fails on
// a rank fails the run with that rank's error ("rank R of P: ..."); the trials finished before
// are in the checkpoint, and --resume finishes the run.
#include <string>

#include "dcalign/experiment.hpp"

namespace dcalign::cli {

/// Runs `config` over the ranks. On rank 0, fills `result` and returns true (the caller writes
/// the outputs); on the others returns false. Throws on the rank where the run failed; every
/// rank leaves MPI before returning or throwing.
bool run_experiment_distributed(const experiment::Config& config,
                                const experiment::RunOptions& options, experiment::Result& result);

}  // namespace dcalign::cli
