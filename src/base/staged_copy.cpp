#include "base/staged_copy.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace dcalign::base {

void parallel_memcpy(void* dst, const void* src, std::size_t bytes, int threads) {
  constexpr std::size_t kSerial = std::size_t(1) << 20, kAlign = 64;
  if (bytes == 0) return;
  if (threads <= 1 || bytes < kSerial) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // Slices of whole cache lines, the last one taking the remainder.
  const auto n = static_cast<std::size_t>(threads);
  const std::size_t per = ((bytes + n - 1) / n + kAlign - 1) / kAlign * kAlign;  // per * n >= bytes
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const std::size_t first = std::min(bytes, per * static_cast<std::size_t>(t));
    const std::size_t last = std::min(bytes, first + per);
    if (last > first)
      std::memcpy(static_cast<char*>(dst) + first, static_cast<const char*>(src) + first,
                  last - first);
  }
}

void staged_copy(const void* src, std::size_t bytes, int buffers, std::size_t chunk, int threads,
                 const std::function<void*(int)>& acquire,
                 const std::function<void(int, std::size_t, std::size_t)>& send) {
  if (buffers < 1 || chunk == 0)
    throw std::invalid_argument("staged_copy: at least one buffer of at least one byte");
  const char* from = static_cast<const char*>(src);
  int b = 0;
  for (std::size_t offset = 0; offset < bytes; offset += chunk) {
    const std::size_t length = std::min(chunk, bytes - offset);
    void* buffer = acquire(b);
    parallel_memcpy(buffer, from + offset, length, threads);
    send(b, offset, length);
    b = (b + 1) % buffers;
  }
}

int staging_threads() {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hardware / 2, 1, 8);
}

}  // namespace dcalign::base
