#pragma once
// OpenBLAS's kernel set, made right before the first BLAS call.
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's is) picks its kernels from the CPU's family and
// model when the library loads. A CPU newer than the library falls back to an older set: Debian
// 12's OpenBLAS 0.3.21 runs a current AVX-512 Xeon on its generic SSE3 ("Prescott") kernels,
// a quarter of the DGEMM speed. dcalign compares that choice with the instruction sets the CPU
// and the operating system actually offer and, where the library chose a lower level, reloads
// its kernel table with the best set of the CPU's level (OpenBLAS's own gotoblas_dynamic_quit /
// gotoblas_dynamic_init, the path OPENBLAS_CORETYPE takes at load). This happens once, while
// dcalign's library is loaded, before any of its BLAS calls, in every entry point (the CLI,
// dcalign-experiment, a linked C++ consumer, the Python module).
//
// A user's choice always wins: with OPENBLAS_CORETYPE set nothing changes, and
// DCALIGN_BLAS_KERNELS=library keeps the library's choice (auto, the default, corrects it).
#include <string>
#include <string_view>

namespace dcalign::base {

/// Vector instruction levels of the x86 kernel sets, in the order OpenBLAS's sets need them.
enum class SimdLevel : int {
  unknown = 0,      ///< not x86, or a kernel set this table does not know
  sse = 1,          ///< SSE2/SSE3/SSSE3/SSE4 sets (Prescott, Core2, Nehalem, Barcelona, ...)
  avx = 2,          ///< Sandybridge, Bulldozer
  avx2 = 3,         ///< Haswell, Zen, Excavator
  avx512 = 4,       ///< SkylakeX (AVX-512 F, CD, BW, DQ, VL)
  avx512_bf16 = 5,  ///< Cooperlake (AVX-512 plus BF16)
};

std::string to_string(SimdLevel level);

/// The level a kernel set (OpenBLAS's core name, any case) needs; unknown for a name it lacks.
SimdLevel kernel_level(std::string_view core_name);

/// The highest level this CPU and operating system support (cpuid and XCR0, through the
/// compiler's __builtin_cpu_supports); unknown off x86.
SimdLevel cpu_level();

/// The kernel set for a level: Cooperlake, SkylakeX, Haswell (Zen on AMD), Sandybridge;
/// empty for sse and unknown (nothing better than what any x86-64 library picks).
std::string kernel_set_for(SimdLevel level, bool amd);

/// What to do about OpenBLAS's choice. Pure: the inputs are the library's core name, the CPU's
/// level, whether it is AMD, and the two environment variables (nullptr when unset).
struct KernelDecision {
  std::string target;     ///< kernel set to switch to; empty: keep the library's
  std::string chosen_by;  ///< "OPENBLAS_CORETYPE", "DCALIGN_BLAS_KERNELS=library", "OpenBLAS"
                          ///< or "dcalign"
  std::string reason;     ///< one sentence for the report and --version
  std::string error;      ///< a bad DCALIGN_BLAS_KERNELS value (the backend refuses to start)
};
KernelDecision decide_kernels(std::string_view library_choice, SimdLevel cpu, bool amd,
                              const char* openblas_coretype, const char* dcalign_blas_kernels);

/// The BLAS as it runs in this process.
struct BlasRuntime {
  std::string library;         ///< e.g. "OpenBLAS 0.3.21"
  std::string config;          ///< openblas_get_config()
  std::string library_choice;  ///< the kernel set OpenBLAS picked at load
  std::string kernels;         ///< the kernel set in use
  std::string chosen_by;       ///< see KernelDecision
  std::string reason;          ///< see KernelDecision
  std::string error;           ///< non-empty: DCALIGN_BLAS_KERNELS was bad
  SimdLevel cpu = SimdLevel::unknown;
  bool switchable = false;  ///< OpenBLAS built with DYNAMIC_ARCH (its kernels can be reloaded)
};

/// The selection made at load (once per process; later calls return the same record).
const BlasRuntime& blas_runtime();

namespace detail {
/// Decides and applies afresh, reading the environment now. For tests, which start a process
/// with OPENBLAS_CORETYPE set to simulate a library's fallback and then unset it; never call
/// it while another thread may be inside BLAS.
BlasRuntime select_blas_kernels();
/// Loads the kernel set `name` as OPENBLAS_CORETYPE=name would at start, and returns the set in
/// use afterwards (the library falls back to its generic set for a name it lacks). For tests
/// and bench/bm_blas_kernels; the same conditions as select_blas_kernels.
std::string load_kernel_set(const std::string& name);
}  // namespace detail

}  // namespace dcalign::base
