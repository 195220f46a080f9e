// make_backend and the summary of what this build runs on: above the backends, which it reaches
// only through src/backends/backends.hpp.
#include "backends/backends.hpp"

#include <fstream>
#include <limits>
#include <string>

#include "base/blas_runtime.hpp"
#include "dcalign/error.hpp"

namespace dcalign {

std::string runtime_summary() {
  const BlasInfo b = blas_info();
  std::string s = std::string("dcalign ") + DCALIGN_VERSION_STRING + "\n";
  s += "BLAS: " + b.library + ", kernels " + b.kernels + " (chosen by " + b.chosen_by + ": " +
       b.reason + "), " + std::to_string(b.threads) + " threads\n";
  s += "CPU: " + b.cpu + "; dcalign's own CPU kernels: " + cpu::own_kernels() + "\n";
  std::string why;
  s += cuda_available(&why) ? std::string("CUDA: available") : "CUDA: unavailable (" + why + ")";
  return s;
}

std::shared_ptr<Backend> make_backend(Device device, const BackendOptions& opts) {
  // A bad DCALIGN_BLAS_KERNELS is refused when a backend is made (both use the host BLAS).
  if (const std::string& bad = base::blas_runtime().error; !bad.empty()) throw BackendError(bad);
  switch (device) {
    case Device::cpu:
      return cpu::make_cpu_backend(opts);
    case Device::cuda: {
#ifdef DCALIGN_HAVE_CUDA
      return cuda::make_cuda_backend(opts);
#else
      std::string why;
      cuda_available(&why);
      throw BackendError("CUDA backend requested but unavailable: " + why);
#endif
    }
  }
  throw BackendError("make_backend: unknown device");
}

namespace {

// A value of /proc/meminfo in bytes ("MemAvailable:   123 kB"), or 0 when absent.
std::uint64_t meminfo(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  std::uint64_t kib = 0;
  while (in >> name >> kib) {
    std::getline(in, unit);
    if (name == key + ":") return kib * 1024;
  }
  return 0;
}

// The memory limit of this process's cgroup (v2: memory.max; v1: memory.limit_in_bytes), or
// the largest value when it has none.
std::uint64_t cgroup_limit() {
  for (const char* f :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(f);
    std::string v;
    if (in >> v && !v.empty() && v != "max" &&
        v.find_first_not_of("0123456789") == std::string::npos)
      return std::stoull(v);
  }
  return std::numeric_limits<std::uint64_t>::max();
}

}  // namespace

DeviceMemory device_memory(Device device, int device_id) {
  if (device == Device::cuda) return cuda_device_memory(device_id);
  DeviceMemory m;
  const std::uint64_t limit = cgroup_limit();
  m.total = std::min(meminfo("MemTotal"), limit);
  m.free = std::min(meminfo("MemAvailable"), m.total);
  if (m.total == 0) throw BackendError("cannot read this machine's memory from /proc/meminfo");
  return m;
}

int cuda_device_count() { return cuda_devices(); }

}  // namespace dcalign
