#pragma once
// What code outside the CUDA backend (benchmarks, GPU tests) may know of it. Only compiled
// where the CUDA backend is (DCALIGN_HAVE_CUDA).
#include <cuda_runtime_api.h>

#include "dcalign/backend.hpp"

namespace dcalign::cuda {

/// The stream on which a CUDA backend queues all its work (for CUDA events in benchmarks).
/// Throws BackendError when `backend` is not a CUDA backend.
cudaStream_t stream_of(Backend& backend);

}  // namespace dcalign::cuda
