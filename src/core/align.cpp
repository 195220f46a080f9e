// Entry points: validation, dispatch to the method, output checks and the report.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>

#include "core/common.hpp"

namespace dcalign {
namespace {

template <typename T>
const char* precision_name() {
  return std::is_same_v<T, float> ? "float32" : "float64";
}

// Objective, consensus objective, orthogonality and (Kawakami) constraint error.
template <typename T>
void evaluate(core::Context<T>& ctx, MatrixView<const T> target) {
  auto& p = ctx.p;
  auto& r = ctx.report;
  const index_t a = ctx.rows(), l = ctx.dim(), c = ctx.users();
  const auto orth = p.orthogonality_errors(StackView<const T>(ctx.G));
  r.orthogonality_error = *std::max_element(orth.begin(), orth.end());

  Buffer<T> zbar = p.allocate(a * l), gv = p.allocate(c * l * l);
  p.vstack(StackView<const T>(ctx.G), MatrixView<T>(gv.data(), c * l, l));
  p.gemm(Op::none, Op::none, T(1) / T(c), ctx.A.concatenated(),
         MatrixView<const T>(gv.data(), c * l, l), T(0), MatrixView<T>(zbar.data(), a, l));
  auto sum = [](const std::vector<T>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0,
                           [](double s, T x) { return s + static_cast<double>(x); });
  };
  r.consensus_objective =
      sum(p.residuals(ctx.A, StackView<const T>(ctx.G), MatrixView<const T>(zbar.data(), a, l)));
  r.objective = target.data() ? sum(p.residuals(ctx.A, StackView<const T>(ctx.G), target))
                              : r.consensus_objective;
  if (ctx.opts.method == Method::kawakami) {
    const auto norms = p.product_column_norms(ctx.A, StackView<const T>(ctx.G));
    double worst = 0;
    for (index_t j = 0; j < l; ++j) {
      double s = 0;
      for (index_t k = 0; k < c; ++k) s += norms[k + j * c];
      worst = std::max(worst, std::abs(s - 1.0));
    }
    r.constraint_error = worst;
  }
  r.evaluated = true;
}

}  // namespace

template <typename T>
AlignReport align_resident(Primitives<T>& p, StackView<const T> anchors, StackView<T> G,
                           MatrixView<T> target, const AlignOptions& opts) {
  AlignReport report;
  report.method = to_string(opts.method);
  report.device = to_string(p.device());
  report.precision = precision_name<T>();
  report.users = anchors.count();
  report.anchor_rows = anchors.rows();
  report.dim = anchors.cols();
  core::PhaseTimer<T> timer(p, report);

  validate_anchors(p, anchors, opts);
  const index_t a = anchors.rows(), l = anchors.cols(), c = anchors.count();
  if (G.count() != c || G.rows() != l || G.cols() != l)
    throw InvalidInput("output stack G must be c x l x l = " + std::to_string(c) + " x " +
                       std::to_string(l) + " x " + std::to_string(l));
  if (target.data() && (target.rows() != a || target.cols() != l))
    throw InvalidInput("target output must be a x l");
  timer.lap("validate");

  const double tol = opts.rank_tolerance >= 0
                         ? opts.rank_tolerance
                         : static_cast<double>(l) * std::numeric_limits<T>::epsilon();
  core::Context<T> ctx{p, anchors, G, opts, report, timer, tol};
  // ODC (and GOPP from the ODC start) prove finiteness through their first product (see
  // procrustes_step); methods that begin with an SVD or QR of the anchors scan first, because
  // LAPACK's behaviour on NaN input is unspecified.
  if (opts.method == Method::imakura || opts.method == Method::kawakami ||
      (opts.method == Method::gopp && opts.gopp_init == GoppInit::spectral)) {
    validate_anchor_values(p, anchors);
    ctx.values_checked = true;
  }
  // Methods with a target write it here so that evaluation can use it.
  Buffer<T> z;
  MatrixView<T> Z = target;
  if (!Z.data() && opts.method != Method::kawakami) {
    z = p.allocate(a * l);
    Z = MatrixView<T>(z.data(), a, l);
  }
  switch (opts.method) {
    case Method::odc:
      core::run_odc(ctx, Z);
      break;
    case Method::imakura:
      core::run_imakura(ctx, Z);
      break;
    case Method::kawakami:
      core::run_kawakami(ctx);
      break;
    case Method::gopp:
      core::run_gopp(ctx, Z);
      break;
  }
  if (!p.all_finite(G.data(), G.size()))
    throw NumericalError(report.method +
                         ": the computed change-of-basis matrices contain NaN or "
                         "Inf (input passed validation; please report this)");
  if (opts.evaluate) {
    evaluate(ctx, MatrixView<const T>(Z));
    timer.lap("evaluate");
  }
  return report;
}

template <typename T>
Alignment<T> align(const Stack<T>& anchors, const AlignOptions& opts, Backend& backend) {
  auto& p = backend.primitives<T>();
  Alignment<T> out;
  const index_t c = anchors.count(), a = anchors.rows(), l = anchors.cols();
  out.G = Stack<T>(c, l, l);
  const bool has_target = opts.method != Method::kawakami;
  if (has_target) out.target = Matrix<T>(a, l);
  if (p.device() == Device::cpu) {
    out.report = align_resident(p, anchors.view(), out.G.view(),
                                has_target ? out.target.view() : MatrixView<T>(), opts);
    return out;
  }
  // Device backends: explicit, timed copies in and out.
  const auto t0 = std::chrono::steady_clock::now();
  Buffer<T> dA = p.allocate(anchors.size()), dG = p.allocate(out.G.size());
  Buffer<T> dZ = p.allocate(has_target ? a * l : 0);
  p.to_device(anchors.data(), dA.data(), anchors.size());
  p.synchronize();
  const auto t1 = std::chrono::steady_clock::now();
  AlignReport rep =
      align_resident(p, StackView<const T>(dA.data(), c, a, l), StackView<T>(dG.data(), c, l, l),
                     has_target ? MatrixView<T>(dZ.data(), a, l) : MatrixView<T>(), opts);
  const auto t2 = std::chrono::steady_clock::now();
  p.to_host(dG.data(), out.G.data(), out.G.size());
  if (has_target) p.to_host(dZ.data(), out.target.data(), a * l);
  p.synchronize();
  const auto t3 = std::chrono::steady_clock::now();
  AlignReport full;
  full = rep;
  full.seconds.clear();
  full.total_seconds = 0;
  full.add_phase("upload", std::chrono::duration<double>(t1 - t0).count());
  for (const auto& [name, s] : rep.seconds) full.add_phase(name, s);
  full.add_phase("download", std::chrono::duration<double>(t3 - t2).count());
  out.report = full;
  return out;
}

template <typename T>
Alignment<T> align(const Stack<T>& anchors, const AlignOptions& opts) {
  auto backend = make_backend(Device::cpu);
  return align(anchors, opts, *backend);
}

#define DCALIGN_INSTANTIATE_ALIGN(T)                                                       \
  template AlignReport align_resident<T>(Primitives<T>&, StackView<const T>, StackView<T>, \
                                         MatrixView<T>, const AlignOptions&);              \
  template Alignment<T> align<T>(const Stack<T>&, const AlignOptions&, Backend&);          \
  template Alignment<T> align<T>(const Stack<T>&, const AlignOptions&);
DCALIGN_INSTANTIATE_ALIGN(float)
DCALIGN_INSTANTIATE_ALIGN(double)

}  // namespace dcalign
