// What the BLAS kernel selection (src/base/blas_runtime.cpp) is worth where OpenBLAS falls back
// to its generic kernels: the same work on the generic SSE3 set ("Prescott", what Debian's
// OpenBLAS 0.3.21 picks on a CPU newer than itself) and on the set dcalign loads for this CPU.
// Both run in one process; each benchmark loads its set first (arg 0: Prescott, 1: dcalign's).
//
//   BM_Dgemm/<set>/n          C = A B, n x n, float64, one thread
//   BM_Odc/<set>/a/l/c        `align` ODC with its default evaluation, float64, all threads
#include <benchmark/benchmark.h>

#include <string>

#include "base/blas_runtime.hpp"
#include "base/host_blas.hpp"
#include "dcalign/align.hpp"
#include "dcalign/random.hpp"

namespace {

using dcalign::index_t;

std::string cpu_set() {
  __builtin_cpu_init();
  const std::string s =
      dcalign::base::kernel_set_for(dcalign::base::cpu_level(), __builtin_cpu_is("amd"));
  return s.empty() ? "Prescott" : s;
}

bool load(benchmark::State& state) {
  const std::string want = state.range(0) == 0 ? "Prescott" : cpu_set();
  const std::string got = dcalign::base::detail::load_kernel_set(want);
  state.SetLabel(got);
  if (got != want) {
    state.SkipWithError(("this OpenBLAS has no " + want + " kernels").c_str());
    return false;
  }
  return true;
}

void BM_Dgemm(benchmark::State& state) {
  if (!load(state)) return;
  const int n = static_cast<int>(state.range(1));
  dcalign::Rng rng(1);
  const auto A = dcalign::random_normal<double>(n, n, rng);
  const auto B = dcalign::random_normal<double>(n, n, rng);
  dcalign::Matrix<double> C(n, n);
  openblas_set_num_threads(1);
  for (auto _ : state) {
    dcalign::base::gemm(false, false, n, n, n, 1.0, A.data(), n, B.data(), n, 0.0, C.data(), n);
    benchmark::DoNotOptimize(C.data());
  }
  state.counters["GFlop/s"] = benchmark::Counter(
      2.0 * n * n * n * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Dgemm)->ArgsProduct({{0, 1}, {500, 1000}})->Unit(benchmark::kMillisecond);

void BM_Odc(benchmark::State& state) {
  if (!load(state)) return;
  const index_t a = state.range(1), l = state.range(2), c = state.range(3);
  dcalign::Rng rng(2);
  dcalign::Stack<double> anchors(c, a, l);
  for (index_t k = 0; k < c; ++k)
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < a; ++i) anchors[k](i, j) = rng.normal();
  dcalign::AlignOptions opts;
  for (auto _ : state) benchmark::DoNotOptimize(dcalign::align(anchors, opts).G.data());
}
BENCHMARK(BM_Odc)
    ->Args({0, 20000, 50, 50})
    ->Args({1, 20000, 50, 50})
    ->Args({0, 1000, 500, 50})
    ->Args({1, 1000, 500, 50})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
