// The CPU backend's entry points for the list of backends (src/backends/backends.hpp) and its
// description.
#include <memory>
#include <string>

#include "backends/backends.hpp"
#include "base/blas_runtime.hpp"
#include "base/host_blas.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/kernels.hpp"

namespace dcalign::cpu {

std::string CpuBackend::description() const {
  const base::BlasRuntime& blas = base::blas_runtime();
  return "cpu: " + std::to_string(f64_.threads()) + " threads over users, BLAS " + blas.config +
         " with " + std::to_string(openblas_get_num_threads()) + " threads, kernels " +
         blas.kernels + " (chosen by " + blas.chosen_by + "), own kernels " + own_kernels();
}

std::shared_ptr<Backend> make_cpu_backend(const BackendOptions& opts) {
  return std::make_shared<CpuBackend>(opts);
}

std::string own_kernels() { return to_string(kernel_isa()); }

}  // namespace dcalign::cpu
