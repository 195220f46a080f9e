#include "base/blas_runtime.hpp"

#include <strings.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include "base/host_blas.hpp"
#include "dcalign/backend.hpp"

// openblas_get_config, openblas_get_corename and openblas_get_num_threads come with OpenBLAS's
// cblas.h (through host_blas.hpp).
extern "C" {
// OpenBLAS's kernel-table loader, exported by DYNAMIC_ARCH builds only (hence weak: a build
// with one fixed kernel set leaves them null, and its kernels are not switchable).
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
// OpenBLAS's thread pool shutdown (what its fork handler calls); the pool starts again on the
// next threaded call. Weak: a build without the pthreads server lacks it.
int blas_thread_shutdown_(void) __attribute__((weak));
}

namespace dcalign::base {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool cpu_is_amd() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

/// "OpenBLAS 0.3.21" from the configuration string "OpenBLAS 0.3.21 DYNAMIC_ARCH ...".
std::string library_name(const std::string& config) {
  std::istringstream in(config);
  std::string name, version;
  in >> name >> version;
  return version.empty() ? name : name + " " + version;
}

/// Reloads OpenBLAS's kernel table as if the process had started with OPENBLAS_CORETYPE=name,
/// then restores the environment (unset, as the caller found it). Returns the set now in use.
std::string reload_kernels(const std::string& name) {
  // OpenBLAS's constructor has just started its server threads, and a thread that is still
  // starting reads the kernel table: swapped under it, the process crashed in
  // gotoblas_dynamic_init (`gotoblas` NULL; about 1 in 7000 starts with 6 processes at once on
  // 2 cores). The pool is stopped first, as OpenBLAS does before a fork.
  if (blas_thread_shutdown_) blas_thread_shutdown_();
  setenv("OPENBLAS_CORETYPE", name.c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  return openblas_get_corename();
}

}  // namespace

namespace detail {
std::string load_kernel_set(const std::string& name) {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return openblas_get_corename();
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = user ? user : "";
  const std::string now = reload_kernels(name);
  if (user) setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  return now;
}
}  // namespace detail

std::string to_string(SimdLevel level) {
  switch (level) {
    case SimdLevel::unknown:
      return "unknown";
    case SimdLevel::sse:
      return "SSE";
    case SimdLevel::avx:
      return "AVX";
    case SimdLevel::avx2:
      return "AVX2";
    case SimdLevel::avx512:
      return "AVX-512";
    case SimdLevel::avx512_bf16:
      return "AVX-512 with BF16";
  }
  return "unknown";
}

SimdLevel kernel_level(std::string_view core) {
  // OpenBLAS's x86-64 DYNAMIC_ARCH core names (driver/others/dynamic.c).
  for (const char* n : {"Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2",
                        "Penryn", "Dunnington", "Nehalem", "Athlon", "Opteron", "Opteron_SSE3",
                        "Barcelona", "Nano", "Bobcat"})
    if (iequals(core, n)) return SimdLevel::sse;
  for (const char* n : {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller"})
    if (iequals(core, n)) return SimdLevel::avx;
  for (const char* n : {"Haswell", "Zen", "Excavator"})
    if (iequals(core, n)) return SimdLevel::avx2;
  if (iequals(core, "SkylakeX")) return SimdLevel::avx512;
  // Sapphire Rapids adds AMX and FP16 on top of Cooper Lake's set; nothing here asks for more.
  if (iequals(core, "Cooperlake") || iequals(core, "SapphireRapids")) return SimdLevel::avx512_bf16;
  return SimdLevel::unknown;
}

SimdLevel cpu_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // __builtin_cpu_supports reports a vector extension only where the OS saves its registers
  // (XCR0), so a kernel set chosen from it never faults.
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return SimdLevel::avx512_bf16;
  if (avx512) return SimdLevel::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdLevel::avx2;
  if (__builtin_cpu_supports("avx")) return SimdLevel::avx;
  return SimdLevel::sse;
#else
  return SimdLevel::unknown;
#endif
}

std::string kernel_set_for(SimdLevel level, bool amd) {
  switch (level) {
    case SimdLevel::avx512_bf16:
      return "Cooperlake";
    case SimdLevel::avx512:
      return "SkylakeX";
    case SimdLevel::avx2:
      return amd ? "Zen" : "Haswell";
    case SimdLevel::avx:
      return "Sandybridge";
    case SimdLevel::sse:
    case SimdLevel::unknown:
      break;
  }
  return {};
}

KernelDecision decide_kernels(std::string_view library_choice, SimdLevel cpu, bool amd,
                              const char* openblas_coretype, const char* dcalign_blas_kernels) {
  KernelDecision d;
  const std::string lib(library_choice);
  if (openblas_coretype && *openblas_coretype) {
    d.chosen_by = "OPENBLAS_CORETYPE";
    d.reason = std::string("set by the user to ") + openblas_coretype;
    return d;
  }
  const std::string mode = dcalign_blas_kernels ? dcalign_blas_kernels : "";
  if (!mode.empty() && mode != "auto" && mode != "library") {
    d.chosen_by = "OpenBLAS";
    d.error = "DCALIGN_BLAS_KERNELS='" + mode +
              "' is not a kernel policy (expected auto, the default, which corrects a library "
              "that chose kernels below the CPU's level, or library, which keeps its choice)";
    return d;
  }
  if (mode == "library") {
    d.chosen_by = "DCALIGN_BLAS_KERNELS=library";
    d.reason = "the library's own choice, kept as asked";
    return d;
  }
  d.chosen_by = "OpenBLAS";
  const SimdLevel have = kernel_level(lib);
  if (cpu == SimdLevel::unknown) {
    d.reason = "the library's own choice (this CPU's vector level is not known to dcalign)";
    return d;
  }
  if (have == SimdLevel::unknown) {
    d.reason = "the library's own choice (a kernel set dcalign does not rank: " + lib + ")";
    return d;
  }
  if (static_cast<int>(have) >= static_cast<int>(cpu)) {
    d.reason = "the library's own choice, which matches the CPU's " + to_string(cpu);
    return d;
  }
  d.target = kernel_set_for(cpu, amd);
  if (d.target.empty() || iequals(d.target, lib)) {
    d.target.clear();
    d.reason = "the library's own choice";
    return d;
  }
  d.chosen_by = "dcalign";
  d.reason = "OpenBLAS chose " + lib + " (" + to_string(have) + ") on a CPU with " +
             to_string(cpu) + "; dcalign loaded " + d.target;
  return d;
}

namespace detail {
BlasRuntime select_blas_kernels() {
  BlasRuntime r;
  r.config = openblas_get_config();
  r.library = library_name(r.config);
  r.library_choice = openblas_get_corename();
  r.kernels = r.library_choice;
  r.cpu = cpu_level();
  r.switchable = gotoblas_dynamic_init != nullptr && gotoblas_dynamic_quit != nullptr;
  KernelDecision d =
      decide_kernels(r.library_choice, r.cpu, cpu_is_amd(), std::getenv("OPENBLAS_CORETYPE"),
                     std::getenv("DCALIGN_BLAS_KERNELS"));
  r.chosen_by = d.chosen_by;
  r.reason = d.reason;
  r.error = d.error;
  if (d.target.empty()) return r;
  if (!r.switchable) {
    r.chosen_by = "OpenBLAS";
    r.reason = "OpenBLAS chose " + r.library_choice + " on a CPU with " + to_string(r.cpu) +
               "; this OpenBLAS has one fixed kernel set (no DYNAMIC_ARCH), so it stays";
    return r;
  }
  const std::string now = reload_kernels(d.target);
  if (iequals(now, d.target)) {
    r.kernels = now;
    return r;
  }
  // The library does not have the set (an OpenBLAS older than the name): back to its choice.
  r.kernels = reload_kernels(r.library_choice);
  r.chosen_by = "OpenBLAS";
  r.reason = "OpenBLAS chose " + r.library_choice + " on a CPU with " + to_string(r.cpu) +
             "; it has no " + d.target + " kernels, so its choice stays";
  return r;
}
}  // namespace detail

const BlasRuntime& blas_runtime() {
  static const BlasRuntime r = detail::select_blas_kernels();
  return r;
}

}  // namespace dcalign::base

namespace dcalign {
BlasInfo blas_info() {
  const base::BlasRuntime& r = base::blas_runtime();
  BlasInfo info;
  info.library = r.library;
  info.kernels = r.kernels;
  info.chosen_by = r.chosen_by;
  info.reason = r.reason;
  info.cpu = to_string(r.cpu);
  info.threads = openblas_get_num_threads();
  return info;
}
}  // namespace dcalign

namespace dcalign::base {
namespace {
// At load: OpenBLAS, a shared library this one depends on, has initialised by now, and no BLAS
// call of dcalign's can have run yet.
[[maybe_unused]] const bool kSelectedAtLoad = (blas_runtime(), true);
}  // namespace

}  // namespace dcalign::base
