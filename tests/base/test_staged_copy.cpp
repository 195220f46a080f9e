// The host side of the CUDA backend's staged uploads (src/base/staged_copy.hpp): the threaded
// memcpy, and the chunk schedule against a fake transfer that reads a staging buffer only when
// the buffer is acquired again (or at the end), as a DMA engine may: a buffer refilled before
// its transfer completed would hand the wrong bytes to the destination.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "base/staged_copy.hpp"

namespace dcalign::base {
namespace {

std::vector<unsigned char> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<unsigned char> v(n);
  std::uint32_t x = seed;
  for (auto& c : v) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

TEST(StagedCopy, ParallelMemcpyCopiesEveryByte) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(63), std::size_t(1) << 20,
                        (std::size_t(3) << 20) + 7}) {
    const auto src = pattern(n, 1);
    for (int threads : {1, 2, 3, 8}) {
      SCOPED_TRACE(std::to_string(n) + " bytes, " + std::to_string(threads) + " threads");
      std::vector<unsigned char> dst(n + 1, 0xAB);  // one guard byte
      parallel_memcpy(dst.data(), src.data(), n, threads);
      EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
      EXPECT_EQ(dst[n], 0xAB);
    }
  }
}

// A transfer engine that completes the transfer of buffer b lazily: when b is acquired again,
// or at finish(). It counts the chunks and checks that each starts where the last one ended.
struct FakeTransfer {
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<std::optional<std::pair<std::size_t, std::size_t>>> pending;
  std::vector<unsigned char> device;
  std::size_t next = 0;
  int sends = 0;
  FakeTransfer(int n, std::size_t chunk, std::size_t bytes)
      : buffers(static_cast<size_t>(n), std::vector<unsigned char>(chunk)),
        pending(static_cast<size_t>(n)),
        device(bytes, 0) {}
  void complete(int b) {
    auto& p = pending[static_cast<size_t>(b)];
    if (!p) return;
    std::memcpy(device.data() + p->first, buffers[static_cast<size_t>(b)].data(), p->second);
    p.reset();
  }
  void* acquire(int b) {
    complete(b);
    return buffers[static_cast<size_t>(b)].data();
  }
  void send(int b, std::size_t offset, std::size_t length) {
    EXPECT_EQ(offset, next);
    EXPECT_FALSE(pending[static_cast<size_t>(b)].has_value()) << "buffer " << b << " reused";
    pending[static_cast<size_t>(b)] = std::make_pair(offset, length);
    next = offset + length;
    ++sends;
  }
  void finish() {
    for (int b = 0; b < static_cast<int>(pending.size()); ++b) complete(b);
  }
};

TEST(StagedCopy, EveryChunkArrivesThroughItsBuffer) {
  const std::size_t chunk = 1000;
  for (std::size_t bytes : {std::size_t(0), std::size_t(999), std::size_t(1000), std::size_t(1001),
                            std::size_t(7777)}) {
    for (int nbuf : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(bytes) + " bytes, " + std::to_string(nbuf) + " buffers");
      const auto src = pattern(bytes, 7);
      FakeTransfer t(nbuf, chunk, bytes);
      staged_copy(
          src.data(), bytes, nbuf, chunk, 2, [&](int b) { return t.acquire(b); },
          [&](int b, std::size_t off, std::size_t len) { t.send(b, off, len); });
      EXPECT_EQ(t.sends, static_cast<int>((bytes + chunk - 1) / chunk));
      EXPECT_EQ(t.next, bytes);
      t.finish();
      EXPECT_EQ(t.device, src);
    }
  }
}

TEST(StagedCopy, RefusesAnEmptyStaging) {
  const unsigned char b = 0;
  auto acquire = [](int) -> void* { return nullptr; };
  auto send = [](int, std::size_t, std::size_t) {};
  EXPECT_THROW(staged_copy(&b, 1, 0, 16, 1, acquire, send), std::invalid_argument);
  EXPECT_THROW(staged_copy(&b, 1, 2, 0, 1, acquire, send), std::invalid_argument);
  EXPECT_GE(staging_threads(), 1);
  EXPECT_LE(staging_threads(), 8);
}

}  // namespace
}  // namespace dcalign::base
