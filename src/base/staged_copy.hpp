#pragma once
// Copies from pageable host memory through page-locked staging buffers, the host side of the
// CUDA backend's uploads (src/cuda/context.cu). The driver's own copy from pageable memory
// stages through its buffers with one host thread and no overlap the caller controls: 9.4 GB/s
// for 200 MB on an H200, against the link's ~50 GB/s from page-locked memory. Here
// several host threads fill one staging buffer while the transfer of the previous one runs.
// Written without CUDA, so that the CPU tests check the schedule with a fake transfer.
#include <cstddef>
#include <functional>

namespace dcalign::base {

/// memcpy by up to `threads` threads (OpenMP), each a contiguous slice; one thread below 1 MiB.
void parallel_memcpy(void* dst, const void* src, std::size_t bytes, int threads);

/// Copies `bytes` bytes of `src` in chunks of `chunk` bytes (the last one shorter), chunk i
/// through staging buffer i % buffers: acquire(b) returns buffer b once no earlier transfer
/// still reads it, the chunk is copied into it (parallel_memcpy with `threads`), and send(b,
/// offset, length) starts its transfer. Returns when `src` is no longer read; the transfers
/// may still be running.
void staged_copy(const void* src, std::size_t bytes, int buffers, std::size_t chunk, int threads,
                 const std::function<void*(int)>& acquire,
                 const std::function<void(int, std::size_t, std::size_t)>& send);

/// Host threads for the staging copies: half the hardware threads, 1 to 8 (the copy is
/// bounded by memory bandwidth well before that).
int staging_threads();

}  // namespace dcalign::base
