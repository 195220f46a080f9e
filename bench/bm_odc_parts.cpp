// Where ODC's time goes on the CPU backend: the whole align() call and its two kernels, the
// product W^T Z (one GEMM over all users) and the batched polar step (one small SVD per user),
// each also in the form the NumPy peer uses (one GEMM per user; users one after the other).
// Used to explain the dcalign/NumPy ratios at the comparison points (bench/README.md,
// results/issue2/). Only the public API is used.
//
//   bm_odc_parts --benchmark_filter=. [--benchmark_min_time=1s]
//   DCALIGN_BENCH_THREADS=1 bm_odc_parts ...   (default: all logical CPUs)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/random.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace {

int threads() {
  const char* t = std::getenv("DCALIGN_BENCH_THREADS");
  const int n = t ? std::atoi(t) : 0;
  return n > 0 ? n : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

struct Setup {
  std::shared_ptr<dcalign::Backend> backend;
  dcalign::Stack<double> A;
  dcalign::Matrix<double> Z;
  Setup(long a, long l, long c, int nthreads) : A(c, a, l), Z(a, l) {
    openblas_set_num_threads(nthreads);
    backend =
        dcalign::make_backend(dcalign::Device::cpu, dcalign::BackendOptions{nthreads, 0, false});
    dcalign::Rng rng(7);
    for (dcalign::index_t i = 0; i < A.size(); ++i) A.data()[i] = rng.uniform();
    for (dcalign::index_t i = 0; i < Z.size(); ++i) Z.data()[i] = rng.uniform();
  }
  /// The products M = W^T Z of procrustes_step, (c l) x l, computed once.
  std::vector<double> products() {
    const dcalign::index_t l = A.cols(), c = A.count();
    std::vector<double> m(static_cast<size_t>(c * l * l));
    backend->f64().gemm(dcalign::Op::trans, dcalign::Op::none, 1.0, A.view().concatenated(),
                        Z.view(), 0.0, dcalign::MatrixView<double>(m.data(), c * l, l));
    return m;
  }
  /// Row block i of `m` is M_i = A_i^T Z: the strided stack the polar step reads.
  dcalign::StackView<const double> blocks(const std::vector<double>& m) const {
    const dcalign::index_t l = A.cols(), c = A.count();
    return dcalign::StackView<const double>(m.data(), c, l, l, c * l, l);
  }
};

void args(benchmark::internal::Benchmark* b) {
  // The comparison points (a, l, c) of bench/README.md, and (1000, 500, 50).
  b->Args({1000, 50, 50})->Args({20000, 50, 50})->Args({1000, 50, 1000})->Args({1000, 500, 50});
  b->Args({1000, 950, 50});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

void BM_OdcAlign(benchmark::State& st) {
  Setup s(st.range(0), st.range(1), st.range(2), threads());
  dcalign::AlignOptions o;
  o.evaluate = false;
  for (auto _ : st) benchmark::DoNotOptimize(dcalign::align(s.A, o, *s.backend));
}
BENCHMARK(BM_OdcAlign)->Apply(args);

// The same with the report's evaluation (objective, orthogonality): against BM_OdcAlign, what
// the evaluation adds (the goal: at most a quarter of the alignment). Counters: the report's own
// phase split, evaluate_ms against the alignment's other phases (align_ms), last iteration.
void BM_OdcAlignEvaluated(benchmark::State& st) {
  Setup s(st.range(0), st.range(1), st.range(2), threads());
  dcalign::AlignOptions o;
  o.evaluate = true;
  double eval = 0, rest = 0;
  for (auto _ : st) {
    const auto r = dcalign::align(s.A, o, *s.backend).report;
    eval = rest = 0;
    for (const auto& [phase, sec] : r.seconds) (phase == "evaluate" ? eval : rest) += sec;
  }
  st.counters["evaluate_ms"] = 1e3 * eval;
  st.counters["align_ms"] = 1e3 * rest;
}
BENCHMARK(BM_OdcAlignEvaluated)->Apply(args);

// M = W^T Z, (c l) x l: the product of procrustes_step.
void BM_ProductOneGemm(benchmark::State& st) {
  const long a = st.range(0), l = st.range(1), c = st.range(2);
  Setup s(a, l, c, threads());
  auto& p = s.backend->f64();
  std::vector<double> m(static_cast<size_t>(c * l * l));
  for (auto _ : st)
    p.gemm(dcalign::Op::trans, dcalign::Op::none, 1.0, s.A.view().concatenated(), s.Z.view(), 0.0,
           dcalign::MatrixView<double>(m.data(), c * l, l));
}
BENCHMARK(BM_ProductOneGemm)->Apply(args);

// The same products as c GEMMs A_i^T Z with threaded BLAS: what the NumPy loop does.
void BM_ProductPerUser(benchmark::State& st) {
  const long a = st.range(0), l = st.range(1), c = st.range(2);
  Setup s(a, l, c, threads());
  auto& p = s.backend->f64();
  std::vector<double> m(static_cast<size_t>(c * l * l));
  for (auto _ : st)
    for (long k = 0; k < c; ++k)
      p.gemm(dcalign::Op::trans, dcalign::Op::none, 1.0, s.A[k], s.Z.view(), 0.0,
             dcalign::MatrixView<double>(m.data() + k * l * l, l, l));
}
BENCHMARK(BM_ProductPerUser)->Apply(args);

// c polar factors of l x l matrices (one gesdd and one l x l GEMM each), parallel over users.
void BM_PolarBatched(benchmark::State& st) {
  const long a = st.range(0), l = st.range(1), c = st.range(2);
  Setup s(a, l, c, threads());
  auto& p = s.backend->f64();
  const std::vector<double> m = s.products();
  std::vector<double> g(m.size());
  for (auto _ : st)
    benchmark::DoNotOptimize(
        p.polar_batched(s.blocks(m), false, dcalign::StackView<double>(g.data(), c, l, l)));
}
BENCHMARK(BM_PolarBatched)->Apply(args);

// The batched scaled Newton iteration (dcalign::polar_factor, iterative path) on the same M_i;
// counters: Newton steps of the slowest matrix, Newton-Schulz steps and the orthogonality error
// reached.
void BM_PolarIterative(benchmark::State& st) {
  const long a = st.range(0), l = st.range(1), c = st.range(2);
  Setup s(a, l, c, threads());
  auto& p = s.backend->f64();
  const std::vector<double> m = s.products();
  std::vector<double> g(m.size());
  dcalign::PolarOptions o;
  o.method = dcalign::PolarMethod::iterative;
  o.measure_orthogonality = false;
  dcalign::PolarInfo<double> info;
  for (auto _ : st)
    info = dcalign::polar_factor(p, s.blocks(m), false,
                                 dcalign::StackView<double>(g.data(), c, l, l), o);
  st.counters["newton_steps"] = info.max_iterations;
  st.counters["schulz_steps"] = info.schulz_steps;
  st.counters["svd_fallback"] = info.used_svd ? 1 : 0;
  double worst = 0;
  for (double e : p.orthogonality_errors(dcalign::StackView<const double>(g.data(), c, l, l)))
    worst = std::max(worst, e);
  st.counters["orth_error"] = worst;
}
BENCHMARK(BM_PolarIterative)->Apply(args);

// The same on one thread: the users one after the other, as in the NumPy loop.
void BM_PolarOneThread(benchmark::State& st) {
  const long a = st.range(0), l = st.range(1), c = st.range(2);
  Setup s(a, l, c, 1);
  auto& p = s.backend->f64();
  const std::vector<double> m = s.products();
  std::vector<double> g(m.size());
  for (auto _ : st)
    benchmark::DoNotOptimize(
        p.polar_batched(s.blocks(m), false, dcalign::StackView<double>(g.data(), c, l, l)));
  openblas_set_num_threads(threads());
}
BENCHMARK(BM_PolarOneThread)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
