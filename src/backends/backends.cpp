// make_backend and the summary of what this build runs on: above the backends, which it reaches
// only through src/backends/backends.hpp.
#include "backends/backends.hpp"

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

}  // namespace dcalign
