// The batched polar factor on the CPU backend: the SVD path (one gesdd per matrix) against the
// batched Newton iteration (src/core/polar.cpp), on c matrices M_k = U_k diag(s) V_k^T with
// geometrically spaced singular values of condition number kappa. Counters: the Newton steps
// of the slowest matrix, the orthogonality error max_k ||G_k^T G_k - I||_F and the forward error
// max_k ||G_k - U_k V_k^T||_F / sqrt(l), both measured in double.
//
// Arguments: l, c, log10(kappa), precision (32 or 64), path (0: svd, 1: iterative).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "dcalign/backend.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/random.hpp"
#include "spectrum.hpp"

namespace {

using dcalign::index_t;

dcalign::Backend& cpu() {
  static const std::shared_ptr<dcalign::Backend> b = dcalign::make_backend(dcalign::Device::cpu);
  return *b;
}

struct Problem {
  dcalign::Stack<double> M, exact;
};

Problem make_problem(index_t l, index_t c, double kappa) {
  Problem pr{dcalign::Stack<double>(c, l, l), dcalign::Stack<double>(c, l, l)};
  for (index_t k = 0; k < c; ++k) {
    dcalign::Rng rng = dcalign::Rng::stream(7, static_cast<std::uint64_t>(k));
    dcalign::bench::matrix_with_spectrum(l, kappa, rng, pr.M[k], pr.exact[k]);
  }
  return pr;
}

template <typename T>
void run(benchmark::State& st) {
  const index_t l = st.range(0), c = st.range(1);
  const double kappa = std::pow(10.0, static_cast<double>(st.range(2)));
  const bool iterative = st.range(4) != 0;
  const Problem pr = make_problem(l, c, kappa);
  dcalign::Stack<T> M(c, l, l), G(c, l, l);
  for (index_t i = 0; i < M.size(); ++i) M.data()[i] = static_cast<T>(pr.M.data()[i]);
  auto& p = cpu().primitives<T>();
  dcalign::PolarOptions o;
  o.method = iterative ? dcalign::PolarMethod::iterative : dcalign::PolarMethod::svd;
  o.measure_orthogonality = false;
  o.fallback_ratio = 0;  // time the iteration itself, whatever the condition
  dcalign::PolarInfo<T> info;
  for (auto _ : st)
    info = dcalign::polar_factor(p, dcalign::StackView<const T>(M.view()), false, G.view(), o);
  dcalign::Stack<double> Gd(c, l, l);
  double fwd = 0;
  for (index_t k = 0; k < c; ++k) {
    double d = 0;
    for (index_t i = 0; i < l * l; ++i) {
      Gd.data()[k * l * l + i] = G.data()[k * l * l + i];
      const double e = Gd.data()[k * l * l + i] - pr.exact.data()[k * l * l + i];
      d += e * e;
    }
    fwd = std::max(fwd, std::sqrt(d / static_cast<double>(l)));
  }
  double orth = 0;
  for (double e : cpu().f64().orthogonality_errors(Gd.view())) orth = std::max(orth, e);
  st.counters["newton_steps"] = info.max_iterations;
  st.counters["schulz_steps"] = info.schulz_steps;
  st.counters["svd_fallback"] = iterative && info.used_svd ? 1 : 0;
  st.counters["orth_error"] = orth;
  st.counters["forward_error"] = fwd;
}

void polar(benchmark::State& st) {
  if (st.range(3) == 32)
    run<float>(st);
  else
    run<double>(st);
}

void cases(benchmark::internal::Benchmark* b) {
  b->ArgNames({"l", "c", "log10kappa", "bits", "iterative"});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
  struct Shape {
    index_t l, c;
  };
  for (Shape s : {Shape{2, 1000}, Shape{16, 1000}, Shape{50, 1000}, Shape{64, 500}, Shape{96, 200},
                  Shape{128, 100}, Shape{500, 4}})
    for (int bits : {32, 64})
      for (int k : {0, 3, 6, 12}) {
        if (bits == 32 && k > 3) continue;  // float: kappa beyond ~1/(l u) is rank-deficient
        if (k == 12 && s.l > 128) continue;
        for (int it : {0, 1}) b->Args({s.l, s.c, k, bits, it});
      }
}
BENCHMARK(polar)->Apply(cases);

}  // namespace

BENCHMARK_MAIN();
