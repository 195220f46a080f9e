// The CPU backend's workspace pool (src/cpu/host_pool.hpp): which released blocks it keeps and
// reuses, its bound, and blocks that outlive their backend. Under AddressSanitizer the pool keeps
// nothing (so that ASan sees every use after release) and the reuse tests skip.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/host_pool.hpp"
#include "dcalign/backend.hpp"

namespace dcalign::cpu {
namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

// One pool per test, closed at the end (as its backend would).
struct Pool {
  HostPool* p = HostPool::open();
  ~Pool() { p->close(); }
};

TEST(HostPool, BlocksAreAlignedAndWritable) {
  Pool pool;
  for (std::size_t bytes : {std::size_t(1), std::size_t(1000), 3 * kMiB + 5}) {
    void* b = pool.p->acquire(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 64, 0u) << bytes << " bytes";
    std::memset(b, 0xab, bytes);
    HostPool::release(b);
  }
}

TEST(HostPool, ReusesAKeptBlockThatFitsAndNoOther) {
  if (!HostPool::kKeeps) GTEST_SKIP() << "AddressSanitizer build: the pool keeps nothing";
  Pool pool;
  void* a = pool.p->acquire(4 * kMiB);
  HostPool::release(a);
  EXPECT_EQ(pool.p->kept_bytes(), 4 * kMiB);
  // 3 MiB fits the kept 4 MiB block (no more than twice the request): the same block.
  void* b = pool.p->acquire(3 * kMiB);
  EXPECT_EQ(b, a);
  EXPECT_EQ(pool.p->reuses(), 1u);
  EXPECT_EQ(pool.p->kept_bytes(), 0u);
  HostPool::release(b);
  // 1.5 MiB would waste more than half of it, 5 MiB does not fit: new blocks, the 4 MiB one
  // stays kept.
  void* c = pool.p->acquire(3 * kMiB / 2);
  void* d = pool.p->acquire(5 * kMiB);
  EXPECT_NE(c, a);
  EXPECT_NE(d, a);
  EXPECT_EQ(pool.p->reuses(), 1u);
  EXPECT_EQ(pool.p->kept_bytes(), 4 * kMiB);
  HostPool::release(c);
  HostPool::release(d);
  // Blocks under kKeepFrom are not kept.
  const std::size_t kept = pool.p->kept_bytes();
  HostPool::release(pool.p->acquire(1000));
  EXPECT_EQ(pool.p->kept_bytes(), kept);
}

TEST(HostPool, KeepsAtMostItsBoundOldestFirst) {
  if (!HostPool::kKeeps) GTEST_SKIP() << "AddressSanitizer build: the pool keeps nothing";
  Pool pool;
  // Untouched blocks: address space only.
  const std::size_t size = (HostPool::kKeepAtMost / kMiB / 3 + 1) * kMiB;  // three exceed it
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(pool.p->acquire(size));
  for (void* b : blocks) HostPool::release(b);
  // Three would exceed the bound: the first released went.
  EXPECT_EQ(pool.p->kept_bytes(), 2 * size);
  EXPECT_LE(pool.p->kept_bytes(), HostPool::kKeepAtMost);
  void* again = pool.p->acquire(size);
  EXPECT_TRUE(again == blocks[1] || again == blocks[2]);
  HostPool::release(again);
  // A block above the bound is never kept.
  HostPool::release(pool.p->acquire(HostPool::kKeepAtMost + kMiB));
  EXPECT_EQ(pool.p->kept_bytes(), 2 * size);
}

TEST(HostPool, BufferOutlivesItsBackend) {
  std::shared_ptr<Backend> backend = make_backend(Device::cpu);
  Buffer<double> keep = backend->f64().allocate(index_t(1) << 18);  // 2 MiB: pool-sized
  Buffer<float> small = backend->f32().allocate(10);
  backend.reset();  // closes the pool; the buffers still own their memory
  std::memset(keep.data(), 0, sizeof(double) << 18);
  small.data()[9] = 1.0f;
  keep = Buffer<double>();  // released after the pool closed: freed (ASan checks)
  EXPECT_EQ(small.data()[9], 1.0f);
}

TEST(HostPool, BackendReusesItsWorkspaceAcrossCalls) {
  if (!HostPool::kKeeps) GTEST_SKIP() << "AddressSanitizer build: the pool keeps nothing";
  std::shared_ptr<Backend> backend = make_backend(Device::cpu);
  auto& pool = static_cast<CpuBackend&>(*backend).pool();
  const void* first = nullptr;
  {
    Buffer<double> b = backend->f64().allocate(index_t(1) << 18);
    first = b.data();
  }
  Buffer<double> b = backend->f64().allocate(index_t(1) << 18);
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(pool.reuses(), 1u);
}

}  // namespace
}  // namespace dcalign::cpu
