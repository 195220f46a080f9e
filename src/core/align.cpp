// Entry points: validation, dispatch to the method, output checks and the report.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <type_traits>

#include "core/common.hpp"
#include "core/methods.hpp"

namespace dcalign {
namespace {

template <typename T>
const char* precision_name() {
  return std::is_same_v<T, float> ? "float32" : "float64";
}

// Objective, consensus objective, orthogonality and (Kawakami) constraint error. Costs, with
// W = [A_1 ... A_c]: ODC and GOPP derive the objective (no product over W); the consensus
// objective needs Zbar = W [G_1; ...; G_c] / c, one product as large as ODC's own. Every sum
// over users is this process's, then summed over the team (src/core/team.hpp).
template <typename T>
void evaluate(core::Context<T>& ctx, MatrixView<const T> target) {
  auto& p = ctx.p;
  auto& r = ctx.report;
  auto& team = ctx.team;
  const index_t a = ctx.rows(), l = ctx.dim(), n = ctx.users(), c = ctx.all_users();
  const Method method = ctx.opts.method;
  const StackView<const T> G(ctx.G);
  const auto orth = p.orthogonality_errors(G);
  r.orthogonality_error = team.max_host(*std::max_element(orth.begin(), orth.end()));
  auto sum = [&](const auto& v) {
    return team.sum_host(std::accumulate(
        v.begin(), v.end(), 0.0, [](double s, auto x) { return s + static_cast<double>(x); }));
  };
  // sum_i ||A_i||_F^2 = sum_i ||A_i G_i||_F^2 for orthogonal G_i.
  double anchors_sq = -1;
  auto anchor_norms = [&] {
    if (anchors_sq < 0)
      anchors_sq =
          sum(ctx.anchor_energy.empty() ? p.inner_products(ctx.A, ctx.A) : ctx.anchor_energy);
    return anchors_sq;
  };
  const core::MethodInfo& info = core::method_info(method);
  const bool orthogonal = info.orthogonal;
  const bool tracked = info.objective == core::ObjectiveKind::tracked;
  r.consensus_objective = std::numeric_limits<double>::quiet_NaN();
  if (tracked && !info.tracked_is_consensus) {
    // The value of eq. 24 that L-BFGS minimised, tracked by the method; Z is the mean of the
    // A_i G_i, so the residuals against it are the consensus objective (a direct sum).
    r.objective = r.objective_history.empty() ? 0.0 : r.objective_history.back();
    r.consensus_objective = sum(p.residuals(ctx.A, G, target));
  } else if (tracked) {
    // Z is the mean of the A_i G_i: the tracked objective is the consensus objective too.
    r.objective = r.objective_history.empty() ? 0.0 : r.objective_history.back();
    r.consensus_objective = r.objective;
  } else if (orthogonal && ctx.products.data()) {
    // ||A_i G_i - Z||^2 = ||A_i||^2 + ||Z||^2 - 2 <G_i, A_i^T Z> for orthogonal G_i, from the
    // products M_i the Procrustes step computed. Its rounding is eps * sum_i ||A_i||^2, not
    // eps^2 as for the direct sum; the orthogonality error says how exact the identity is.
    const double zz = p.sum_squares(target.data(), a * l);
    const auto tr = p.inner_products(G, StackView<const T>(ctx.products.data(), n, l, l, n * l, l));
    r.objective = std::max(0.0, anchor_norms() + static_cast<double>(c) * zz - 2.0 * sum(tr));
  } else if (target.data()) {
    r.objective = sum(p.residuals(ctx.A, G, target));
  }
  const bool consensus = info.objective == core::ObjectiveKind::consensus;
  if (ctx.opts.evaluate_consensus || consensus) {
    if (!tracked) {
      Buffer<T> zbar = p.allocate(a * l), gv = p.allocate(n * l * l);
      p.vstack(G, MatrixView<T>(gv.data(), n * l, l));
      p.gemm(Op::none, Op::none, T(1) / T(c), ctx.A.concatenated(),
             MatrixView<const T>(gv.data(), n * l, l), T(0), MatrixView<T>(zbar.data(), a, l));
      team.sum(zbar.data(), a * l);
      // sum_i ||Y_i - Ybar||^2 = sum_i ||Y_i||^2 - c ||Ybar||^2 for any Y_i; ||Y_i|| = ||A_i||
      // for orthogonal G_i, otherwise the direct sum.
      r.consensus_objective =
          orthogonal ? std::max(0.0, anchor_norms() -
                                         static_cast<double>(c) * p.sum_squares(zbar.data(), a * l))
                     : sum(p.residuals(ctx.A, G, MatrixView<const T>(zbar.data(), a, l)));
    }
    if (consensus) r.objective = r.consensus_objective;
  }
  if (info.column_constraint) {
    // sum_i ||A_i g_ij||^2 for every column j, which the constraint sets to 1.
    const auto norms = p.product_column_norms(ctx.A, G);
    std::vector<double> column(static_cast<size_t>(l), 0.0);
    for (index_t j = 0; j < l; ++j)
      for (index_t k = 0; k < n; ++k) column[j] += norms[k + j * n];
    team.sum_host(column.data(), l);
    double worst = 0;
    for (double s : column) worst = std::max(worst, std::abs(s - 1.0));
    r.constraint_error = worst;
  }
  r.evaluated = true;
}

// Scale: every method is scale invariant (A_i -> s A_i leaves the G_i of ODC, GOPP and OPP
// alone and divides Imakura-DC's, Kawakami-DC's and RDP-LS's by s), but the arithmetic is not:
// squares of anchors far from 1 underflow or overflow (GOPP's objective becomes 0 after one
// step, RDP's gradient 0, an orthogonality error NaN). Anchors whose root-mean-square entry is
// outside [lo, hi] of the precision (below) are refused with that advice, never answered with
// a meaningless result.
//
// The check reads the anchors once (their per-user sums of squares) and hands those sums on:
// the evaluation's sum_i ||A_i||^2 and GOPP's tracked total use them, and a finite sum proves
// the user's entries finite, so the methods that would scan the values first skip that scan.
// It therefore costs no pass of its own wherever one was made anyway; only ODC without the
// evaluation makes none, and there it runs only if the method fails (align_resident).
template <typename T>
std::vector<double> check_anchor_scale(Primitives<T>& p, StackView<const T> A) {
  constexpr bool single = std::is_same_v<T, float>;
  const double lo = single ? 1e-12 : 1e-100, hi = single ? 1e12 : 1e100;
  auto energy = p.inner_products(A, A);
  const double entries = static_cast<double>(A.rows()) * static_cast<double>(A.cols());
  for (index_t k = 0; k < A.count(); ++k) {
    const double ss = energy[static_cast<size_t>(k)];
    if (std::isnan(ss) || std::isinf(ss)) {
      validate_anchor_values(p, A);  // a NaN or Inf entry is reported with its position
    }
    double rms = std::sqrt(ss / entries);
    if (ss == 0) {
      // All zero (the rank checks say so), or squares that underflowed: the largest entry tells.
      const MatrixView<const T> Ak = A[k];
      std::vector<T> column(static_cast<size_t>(A.rows()));
      double largest = 0;
      for (index_t j = 0; j < A.cols(); ++j) {
        p.to_host(Ak.data() + j * Ak.ld(), column.data(), A.rows());
        p.synchronize();
        for (T v : column) largest = std::max(largest, std::abs(static_cast<double>(v)));
      }
      if (largest == 0) continue;
      rms = largest;
    }
    if (!(rms >= lo && rms <= hi)) {
      std::ostringstream os;
      os << "user " << k << ": the anchor representation A_" << k << " has entries of scale "
         << (std::isfinite(rms) ? rms : std::numeric_limits<double>::infinity())
         << " (root mean square; its squares " << (rms < lo ? "underflow" : "overflow") << " in "
         << precision_name<T>() << "); anchors must have a root-mean-square entry between " << lo
         << " and " << hi << " in " << precision_name<T>()
         << ". Every method is scale invariant: multiply all A_i by one power of two to bring "
            "them near 1 (the G_i of odc, gopp and opp do not change; those of imakura, kawakami "
            "and rdp-ls scale by its inverse)";
      throw InvalidInput(os.str());
    }
  }
  return energy;
}

}  // namespace

namespace core {

template <typename T>
AlignReport align_shared(Team<T>& team, Primitives<T>& p, StackView<const T> anchors,
                         StackView<T> G, MatrixView<T> target, const AlignOptions& opts) {
  AlignReport report;
  report.method = to_string(opts.method);
  report.device = to_string(p.device());
  report.blas = blas_info();
  report.precision = precision_name<T>();
  report.users = anchors.count();
  report.anchor_rows = anchors.rows();
  report.dim = anchors.cols();
  core::PhaseTimer<T> timer(p, report);

  if (team.solo()) {
    validate_anchors(p, anchors, opts);
  } else {  // the reference user is a global index, which src/dist checked against the total
    AlignOptions local = opts;
    local.reference_user = 0;
    validate_anchors(p, anchors, local);
  }
  const index_t a = anchors.rows(), l = anchors.cols(), c = anchors.count();
  if (G.count() != c || G.rows() != l || G.cols() != l)
    throw InvalidInput("output stack G must be c x l x l = " + std::to_string(c) + " x " +
                       std::to_string(l) + " x " + std::to_string(l));
  if (target.data() && (target.rows() != a || target.cols() != l))
    throw InvalidInput("target output must be a x l");
  timer.lap("validate");

  // The scale check reads every anchor once; its finite sums also prove the entries finite,
  // which the methods that begin with an SVD or QR of the anchors need (LAPACK's behaviour on
  // NaN input is unspecified). ODC without the evaluation reads no anchor twice: it proves
  // finiteness through its first product (procrustes_step) and checks the scale only if it
  // fails.
  const core::MethodInfo& method = core::method_info(opts.method);
  // (Over several processes always first: a failure must not start another pass on one.)
  const bool scale_first = opts.evaluate || !method.lazy_scale_check || !team.solo();
  std::vector<double> energy;
  if (scale_first) energy = check_anchor_scale(p, anchors);

  const double tol = opts.rank_tolerance >= 0
                         ? opts.rank_tolerance
                         : static_cast<double>(l) * std::numeric_limits<T>::epsilon();
  core::Context<T> ctx{
      p,  anchors,           G,   opts, report, timer, tol, scale_first, Buffer<T>(),
      {}, std::move(energy), team};
  // Methods with a target write it here so that evaluation can use it.
  Buffer<T> z;
  MatrixView<T> Z = target;
  if (!Z.data() && method.has_target) {
    z = p.allocate(a * l);
    Z = MatrixView<T>(z.data(), a, l);
  }
  try {
    method.run<T>()(ctx, Z);
  } catch (const Error&) {
    // Anchors far from scale 1 make ODC's products underflow (a rank error) or overflow: say
    // what the cause is, when it is the scale.
    if (!scale_first) check_anchor_scale(p, anchors);
    throw;
  }
  // The report's extremes and counts over every process's users.
  report.min_rank_ratio = team.min_host(report.min_rank_ratio);
  report.iterations = static_cast<index_t>(team.max_host(static_cast<double>(report.iterations)));
  report.promoted_users =
      static_cast<index_t>(team.sum_host(static_cast<double>(report.promoted_users)));
  if (!p.all_finite(G.data(), G.size()))
    throw NumericalError(report.method +
                         ": the computed change-of-basis matrices contain NaN or Inf; the "
                         "anchors are too ill-conditioned or too far from scale 1 for " +
                         report.precision +
                         ": rescale them (every method is scale invariant) or use float64");
  if (opts.evaluate) {
    evaluate(ctx, MatrixView<const T>(Z));
    timer.lap("evaluate");
  }
  return report;
}

}  // namespace core

template <typename T>
AlignReport align_resident(Primitives<T>& p, StackView<const T> anchors, StackView<T> G,
                           MatrixView<T> target, const AlignOptions& opts) {
  core::Team<T> alone;
  return core::align_shared(alone, p, anchors, G, target, opts);
}

template <typename T>
Alignment<T> align(const Stack<T>& anchors, const AlignOptions& opts, Backend& backend) {
  auto& p = backend.primitives<T>();
  Alignment<T> out;
  const index_t c = anchors.count(), a = anchors.rows(), l = anchors.cols();
  out.G = Stack<T>(c, l, l);
  const bool has_target = core::method_info(opts.method).has_target;
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

#define DCALIGN_INSTANTIATE_ALIGN(T)                                                             \
  template AlignReport core::align_shared<T>(core::Team<T>&, Primitives<T>&, StackView<const T>, \
                                             StackView<T>, MatrixView<T>, const AlignOptions&);  \
  template AlignReport align_resident<T>(Primitives<T>&, StackView<const T>, StackView<T>,       \
                                         MatrixView<T>, const AlignOptions&);                    \
  template Alignment<T> align<T>(const Stack<T>&, const AlignOptions&, Backend&);                \
  template Alignment<T> align<T>(const Stack<T>&, const AlignOptions&);
DCALIGN_INSTANTIATE_ALIGN(float)
DCALIGN_INSTANTIATE_ALIGN(double)

}  // namespace dcalign
