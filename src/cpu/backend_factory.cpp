#include <omp.h>

#include <string>

#include "cpu/cpu_backend.hpp"
#include "cpu/kernels.hpp"
#include "cpu/lapack.hpp"

extern "C" char* openblas_get_config(void);

namespace dcalign {

namespace cpu {
std::string CpuBackend::description() const {
  return "cpu: " + std::to_string(f64_.threads()) + " threads over users, BLAS " +
         std::string(openblas_get_config()) + " with " +
         std::to_string(openblas_get_num_threads()) + " threads, own kernels " +
         to_string(kernel_isa());
}
}  // namespace cpu

std::shared_ptr<Backend> make_backend(Device device, const BackendOptions& opts) {
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
