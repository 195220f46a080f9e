#include <omp.h>

#include <string>

#include "dcalign/error.hpp"

#include "cpu/blas_runtime.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/kernels.hpp"
#include "cpu/lapack.hpp"

namespace dcalign {

namespace cpu {
std::string CpuBackend::description() const {
  const BlasRuntime& blas = blas_runtime();
  return "cpu: " + std::to_string(f64_.threads()) + " threads over users, BLAS " + blas.config +
         " with " + std::to_string(openblas_get_num_threads()) + " threads, kernels " +
         blas.kernels + " (chosen by " + blas.chosen_by + "), own kernels " +
         to_string(kernel_isa());
}
}  // namespace cpu

BlasInfo blas_info() {
  const cpu::BlasRuntime& r = cpu::blas_runtime();
  BlasInfo info;
  info.library = r.library;
  info.kernels = r.kernels;
  info.chosen_by = r.chosen_by;
  info.reason = r.reason;
  info.cpu = to_string(r.cpu);
  info.threads = openblas_get_num_threads();
  return info;
}

std::string runtime_summary() {
  const BlasInfo b = blas_info();
  std::string s = std::string("dcalign ") + DCALIGN_VERSION_STRING + "\n";
  s += "BLAS: " + b.library + ", kernels " + b.kernels + " (chosen by " + b.chosen_by + ": " +
       b.reason + "), " + std::to_string(b.threads) + " threads\n";
  s += "CPU: " + b.cpu + "; dcalign's own CPU kernels: " + cpu::to_string(cpu::kernel_isa()) + "\n";
  std::string why;
  s += cuda_available(&why) ? std::string("CUDA: available") : "CUDA: unavailable (" + why + ")";
  return s;
}

std::shared_ptr<Backend> make_backend(Device device, const BackendOptions& opts) {
  // A bad DCALIGN_BLAS_KERNELS is refused when a backend is made (both use the host BLAS).
  if (const std::string& bad = cpu::blas_runtime().error; !bad.empty()) throw BackendError(bad);
  if (device == Device::cpu) return std::make_shared<cpu::CpuBackend>(opts);
#ifdef DCALIGN_HAVE_CUDA
  return cuda::make_cuda_backend(opts);
#else
  std::string why;
  cuda_available(&why);
  throw BackendError("CUDA backend requested but unavailable: " + why);
#endif
}

}  // namespace dcalign
