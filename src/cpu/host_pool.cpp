#include "cpu/host_pool.hpp"

#include <cstdlib>
#include <new>

namespace dcalign::cpu {
namespace {

constexpr std::size_t kAlign = 64;

// Every block starts with this header, one alignment unit before the memory handed out.
struct Header {
  HostPool* pool;
  std::size_t capacity;  // bytes usable after the header
};
static_assert(sizeof(Header) <= kAlign, "the header fits in one alignment unit");

Header* header_of(void* p) { return reinterpret_cast<Header*>(static_cast<char*>(p) - kAlign); }

}  // namespace

HostPool* HostPool::open() { return new HostPool(); }

void HostPool::close() {
  std::vector<Kept> drop;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    drop.swap(kept_);
    kept_bytes_ = 0;
  }
  for (const Kept& k : drop) std::free(k.raw);
  unref();
}

void* HostPool::acquire(std::size_t bytes) {
  if (kKeeps && bytes >= kKeepFrom / kMaxSlack) {
    std::lock_guard<std::mutex> lock(mutex_);
    // The smallest kept block that fits (least memory wasted).
    std::size_t best = kept_.size();
    for (std::size_t i = 0; i < kept_.size(); ++i)
      if (kept_[i].capacity >= bytes && kept_[i].capacity / kMaxSlack <= bytes &&
          (best == kept_.size() || kept_[i].capacity < kept_[best].capacity))
        best = i;
    if (best < kept_.size()) {
      void* raw = kept_[best].raw;
      kept_bytes_ -= kept_[best].capacity;
      kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
      ++reuses_;
      refs_.fetch_add(1, std::memory_order_relaxed);
      return static_cast<char*>(raw) + kAlign;
    }
  }
  if (bytes > static_cast<std::size_t>(-1) - 2 * kAlign) throw std::bad_alloc();
  const std::size_t capacity = (bytes + kAlign - 1) / kAlign * kAlign;
  void* raw = std::aligned_alloc(kAlign, capacity + kAlign);
  if (!raw) throw std::bad_alloc();
  auto* h = static_cast<Header*>(raw);
  h->pool = this;
  h->capacity = capacity;
  refs_.fetch_add(1, std::memory_order_relaxed);
  return static_cast<char*>(raw) + kAlign;
}

void HostPool::release(void* p, void* /*context*/) {
  if (!p) return;
  Header* h = header_of(p);
  HostPool* pool = h->pool;
  pool->give_back(h, h->capacity);
  pool->unref();
}

void HostPool::give_back(void* raw, std::size_t capacity) {
  if (kKeeps && capacity >= kKeepFrom && capacity <= kKeepAtMost) {
    std::vector<void*> drop;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!closed_) {
        while (kept_bytes_ + capacity > kKeepAtMost) {  // the oldest make room
          drop.push_back(kept_.front().raw);
          kept_bytes_ -= kept_.front().capacity;
          kept_.erase(kept_.begin());
        }
        kept_.push_back({raw, capacity});
        kept_bytes_ += capacity;
        raw = nullptr;
      }
    }
    for (void* d : drop) std::free(d);
  }
  std::free(raw);
}

void HostPool::unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

std::size_t HostPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_bytes_;
}

std::size_t HostPool::reuses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reuses_;
}

}  // namespace dcalign::cpu
