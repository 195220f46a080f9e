// The polar factor of one l x l matrix on one thread, by each route a CPU has: LAPACK's divide
// and conquer SVD (gesdd, what polar_batched runs), its QR-iteration SVD (gesvd), its one-sided
// Jacobi SVD (gesvj), each followed by G = U V^T, and the batched Newton iteration of
// src/core/polar.cpp (PolarMethod::iterative, no SVD fallback). M = U diag(s) V^T with
// geometrically spaced singular values of condition number kappa, as bench/bm_polar.
// Counters: orthogonality error ||G^T G - I||_F and forward error ||G - U V^T||_F / sqrt(l).
//
// Arguments: l, log10(kappa), route (0 gesdd, 1 gesvd, 2 gesvj, 3 iterative). float64.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "dcalign/backend.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/random.hpp"
#include "spectrum.hpp"

extern "C" void openblas_set_num_threads(int);

namespace {

using dcalign::index_t;

dcalign::Backend& one_thread() {
  static const std::shared_ptr<dcalign::Backend> b = [] {
    dcalign::BackendOptions o;
    o.threads = 1;
    return dcalign::make_backend(dcalign::Device::cpu, o);
  }();
  return *b;
}

struct Problem {
  dcalign::Matrix<double> M, exact;
};

Problem make_problem(index_t l, double kappa) {
  dcalign::Rng rng(7);
  Problem pr{dcalign::Matrix<double>(l, l), dcalign::Matrix<double>(l, l)};
  dcalign::bench::matrix_with_spectrum(l, kappa, rng, pr.M.view(), pr.exact.view());
  return pr;
}

// G = polar factor of M by LAPACK route 0-2; `a`, `u`, `vt`, `s` are scratch.
void lapack_polar(int route, int n, const double* M, double* G, std::vector<double>& a,
                  std::vector<double>& u, std::vector<double>& vt, std::vector<double>& s) {
  std::copy(M, M + static_cast<size_t>(n) * n, a.begin());
  lapack_int info = 0;
  if (route == 0) {
    info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', n, n, a.data(), n, s.data(), u.data(), n,
                          vt.data(), n);
  } else if (route == 1) {
    std::vector<double> superb(static_cast<size_t>(n));
    info = LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'S', 'S', n, n, a.data(), n, s.data(), u.data(), n,
                          vt.data(), n, superb.data());
  } else {
    // gesvj: A = U diag(s) V^T with U written over A and V (not V^T) into `u`.
    std::vector<double> stat(6);
    info = LAPACKE_dgesvj(LAPACK_COL_MAJOR, 'G', 'U', 'V', n, n, a.data(), n, s.data(), n, u.data(),
                          n, stat.data());
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0, a.data(), n, u.data(), n,
                0.0, G, n);
  }
  if (info != 0) throw std::runtime_error("LAPACK SVD failed");
  if (route != 2)
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, u.data(), n, vt.data(), n,
                0.0, G, n);
}

void polar_paths(benchmark::State& st) {
  const index_t l = st.range(0);
  const double kappa = std::pow(10.0, static_cast<double>(st.range(1)));
  const int route = static_cast<int>(st.range(2));
  const int n = static_cast<int>(l);
  const Problem pr = make_problem(l, kappa);
  dcalign::Matrix<double> G(l, l);
  openblas_set_num_threads(1);
  const size_t nn = static_cast<size_t>(n) * n;
  std::vector<double> a(nn), u(nn), vt(nn), s(static_cast<size_t>(n));
  if (route < 3) {
    for (auto _ : st) lapack_polar(route, n, pr.M.data(), G.data(), a, u, vt, s);
  } else {
    auto& p = one_thread().f64();
    dcalign::Stack<double> M(1, l, l), Gs(1, l, l);
    std::copy(pr.M.data(), pr.M.data() + nn, M.data());
    dcalign::PolarOptions o;
    o.method = dcalign::PolarMethod::iterative;
    o.measure_orthogonality = false;
    o.fallback_ratio = 0;
    dcalign::PolarInfo<double> info;
    for (auto _ : st)
      info =
          dcalign::polar_factor(p, dcalign::StackView<const double>(M.view()), false, Gs.view(), o);
    std::copy(Gs.data(), Gs.data() + nn, G.data());
    st.counters["newton_steps"] = info.max_iterations;
  }
  std::vector<double> gtg(nn);
  cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, n, n, n, 1.0, G.data(), n, G.data(), n, 0.0,
              gtg.data(), n);
  double orth = 0, fwd = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      const double d = gtg[i + static_cast<size_t>(j) * n] - (i == j ? 1.0 : 0.0);
      orth += d * d;
      const double e = G(i, j) - pr.exact(i, j);
      fwd += e * e;
    }
  st.counters["orth_error"] = std::sqrt(orth);
  st.counters["forward_error"] = std::sqrt(fwd / static_cast<double>(l));
  st.SetLabel(route == 0 ? "gesdd" : route == 1 ? "gesvd" : route == 2 ? "gesvj" : "iterative");
}

void cases(benchmark::internal::Benchmark* b) {
  b->ArgNames({"l", "log10kappa", "route"});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
  for (index_t l : {128, 256, 500, 1000})
    for (int k : {0, 3, 6})
      for (int route : {0, 1, 2, 3}) b->Args({l, k, route});
}
BENCHMARK(polar_paths)->Apply(cases);

}  // namespace

BENCHMARK_MAIN();
