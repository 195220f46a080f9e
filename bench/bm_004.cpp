// Paper 004's timing tables (Table 4, Pima Indians Diabetes; Table 8, Heart Disease): the time
// to compute all G_i with LS (imakura), GEP (kawakami eigen), OPP, GOPP, RDP-LS and RDP-OPP at
// the paper's sizes: anchor of r = 1000 standard normal rows and m features, c users, each
// A_i = anchor F_i with F_i the orthonormal basis of a random l-dimensional subspace (the paper
// uses each user's PCA basis). Pima: m = 8, l = 6, c = 13; Heart Disease: m = 20, l = 16,
// c = 18. Double precision on the CPU backend, no evaluation (G only). The counters give RDP's
// iterations, final gradient norm and objective.
//
//   OPENBLAS_CORETYPE=CooperLake DCALIGN_BENCH_THREADS=1 bm_004 [--benchmark_filter=Pima]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/random.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace {

using dcalign::index_t;

int threads() {
  const char* t = std::getenv("DCALIGN_BENCH_THREADS");
  const int n = t ? std::atoi(t) : 0;
  return n > 0 ? n : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

struct Problem {
  index_t m, l, c;
};
constexpr Problem kPima{8, 6, 13};
constexpr Problem kHeart{20, 16, 18};
constexpr index_t kAnchorRows = 1000;

dcalign::Stack<double> anchors(const Problem& pr, std::uint64_t seed) {
  dcalign::Rng rng(seed);
  const auto X = dcalign::random_normal<double>(kAnchorRows, pr.m, rng);
  dcalign::Stack<double> A(pr.c, kAnchorRows, pr.l);
  for (index_t i = 0; i < pr.c; ++i) {
    const auto q = dcalign::random_orthogonal<double>(pr.m, rng);  // F_i: its first l columns
    for (index_t j = 0; j < pr.l; ++j)
      for (index_t r = 0; r < kAnchorRows; ++r) {
        double s = 0;
        for (index_t k = 0; k < pr.m; ++k) s += X(r, k) * q(k, j);
        A(i, r, j) = s;
      }
  }
  return A;
}

struct Variant {
  const char* name;
  dcalign::Method method;
  dcalign::KawakamiForm form;
  dcalign::SvdAlgorithm svd;
};

void run(benchmark::State& st, const Problem& pr, const Variant& v) {
  const dcalign::Method method = v.method;
  const int nt = threads();
  openblas_set_num_threads(nt);
  auto backend = dcalign::make_backend(dcalign::Device::cpu, dcalign::BackendOptions{nt, 0, false});
  const auto A = anchors(pr, 2024);
  dcalign::AlignOptions o;
  o.method = method;
  o.kawakami_form = v.form;
  o.svd.algorithm = v.svd;
  o.evaluate = false;
  dcalign::AlignReport last;
  for (auto _ : st) {
    auto res = dcalign::align(A, o, *backend);
    last = res.report;
    benchmark::DoNotOptimize(res.G.data());
  }
  st.counters["iterations"] = static_cast<double>(last.iterations);
  if (method == dcalign::Method::rdp_ls || method == dcalign::Method::rdp_opp) {
    st.counters["gradient_norm"] = last.gradient_norm;
    st.counters["objective"] = last.objective_history.empty() ? 0 : last.objective_history.back();
    st.counters["converged"] = last.converged ? 1 : 0;
  }
}

void configure(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MinTime(0.05)
      ->Repetitions(21)
      ->ReportAggregatesOnly(true);
}

void register_all() {
  const std::pair<const char*, Problem> problems[] = {{"Pima", kPima}, {"Heart", kHeart}};
  using dcalign::KawakamiForm;
  using dcalign::Method;
  using dcalign::SvdAlgorithm;
  // The defaults (U_1 by the Gram route) and, as peers in the same run, the exact SVD that was
  // the default before, and GEP's QR-SVD form (the same G_i up to column signs, 001 Alg. 3).
  const Variant variants[] = {
      {"LS_imakura", Method::imakura, KawakamiForm::eigen, SvdAlgorithm::gram},
      {"LS_imakura_exact_svd", Method::imakura, KawakamiForm::eigen, SvdAlgorithm::exact},
      {"GEP_kawakami_eigen", Method::kawakami, KawakamiForm::eigen, SvdAlgorithm::gram},
      {"GEP_kawakami_qr_svd", Method::kawakami, KawakamiForm::qr_svd, SvdAlgorithm::gram},
      {"OPP", Method::opp, KawakamiForm::eigen, SvdAlgorithm::gram},
      {"OPP_exact_svd", Method::opp, KawakamiForm::eigen, SvdAlgorithm::exact},
      {"GOPP", Method::gopp, KawakamiForm::eigen, SvdAlgorithm::gram},
      {"RDP_LS", Method::rdp_ls, KawakamiForm::eigen, SvdAlgorithm::gram},
      {"RDP_OPP", Method::rdp_opp, KawakamiForm::eigen, SvdAlgorithm::gram}};
  for (const auto& [pname, pr] : problems)
    for (const Variant& variant : variants) {
      const Problem p = pr;
      const Variant v = variant;
      configure(benchmark::RegisterBenchmark((std::string(pname) + "/" + v.name).c_str(),
                                             [p, v](benchmark::State& st) { run(st, p, v); }));
    }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
