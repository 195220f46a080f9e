// ODC-GOPP, paper 003 Appendix B / paper 004 section 3.4: alternating minimisation of
// f(G, Z) = sum_i ||A_i G_i - Z||_F^2 over orthogonal G_i and Z. Given Z, each G_i is a
// Procrustes solution (the ODC step); given the G_i, the best Z is their mean
// Z = (1/c) sum_i A_i G_i = (1/c) W [G_1; ...; G_c]. Each half-step cannot increase f.
//
// With Z the mean and G_i orthogonal, f = sum_i ||A_i||_F^2 - c ||Z||_F^2, so tracking the
// objective costs O(a l) per iteration (O(c l^2) in the Gram form) instead of another pass over
// the anchors. The stopping rule, and why each test is there, is src/core/gopp_stop.hpp; its
// iterate test costs one pass over the c l^2 values of G per iteration.
#include <algorithm>
#include <cmath>

#include "core/common.hpp"
#include "core/gopp_stop.hpp"

namespace dcalign::core {

template <typename T>
void run_gopp(Context<T>& ctx, MatrixView<T> target) {
  auto& p = ctx.p;
  // c counts every process's users; this one's hold the n rows of Gv (src/core/team.hpp).
  const index_t a = ctx.rows(), l = ctx.dim(), c = ctx.all_users(), n = ctx.users() * l;
  const auto W = ctx.A.concatenated();
  Buffer<T> gv = p.allocate(n * l), scratch = p.allocate(n * l), step = p.allocate(n * l);
  MatrixView<T> Z = target, Gv(gv.data(), n, l), M(scratch.data(), n, l), D(step.data(), n, l);
  // User i's block of rows of Gv and D.
  const StackView<const T> Dblocks(step.data(), ctx.users(), l, l, n, l);
  // Gram form, when W = [A_1 ... A_c] has no more columns than rows: with K = W^T W (n x n,
  // formed once, a n^2 flops) the next products are W^T Z = K Gv / c, 2 n^2 l flops per
  // iteration instead of the 4 a n l of Z = W Gv / c and W^T Z, and Z itself is formed once at
  // the end. At paper 004's Heart disease size (a = 1000, n = 288, l = 16) an iteration costs
  // 7x less. The spectral start reuses K (spectral_basis's Gram route). Over several processes
  // K would couple every pair of users: the direct form, whose Z is one sum over the team.
  bool gram_form = n <= a && ctx.team.solo();
  Buffer<T> kb;
  MatrixView<const T> K;
  if (gram_form) {
    kb = p.allocate(n * n);
    gram_of(p, W, MatrixView<T>(kb.data(), n, n));
    // Squares of huge (finite) anchors can overflow where the direct products do not.
    gram_form = p.all_finite(kb.data(), n * n);
    if (gram_form) K = MatrixView<const T>(kb.data(), n, n);
    ctx.timer.lap("gram");
  }
  if (ctx.opts.gopp.init == GoppInit::spectral) {
    spectral_basis(ctx, Z, K);
  } else {
    reference_target(ctx, Z);
  }
  ctx.timer.lap("init");

  // sum_i ||A_i||^2, from the scale check when it read them (src/core/align.cpp).
  double total = 0;
  if (ctx.anchor_energy.empty())
    total = p.sum_squares(ctx.A.data(), ctx.A.size());
  else
    for (double e : ctx.anchor_energy) total += e;
  total = ctx.team.sum_host(total);
  const GoppStop stop = GoppStop::make<T>(ctx.opts, total, l);
  double min_ratio = 1.0;
  ctx.report.converged = false;
  ctx.report.stop_reason = kStopCap;
  for (index_t it = 0; it < ctx.opts.gopp.max_iterations; ++it) {
    // G_i = polar(A_i^T Z): the first products from Z (which proves the anchors finite when
    // nothing has yet), later ones from the previous iteration's K Gv / c.
    PolarInfo<T> info = it == 0 || !gram_form
                            ? procrustes_step(ctx, MatrixView<const T>(Z), M.data())
                            : polar_of_products(ctx, M.data());
    // The rank decision at the start; float32 users it cannot resolve are recomputed in
    // float64 then and at every later iteration where they fail again (decide_ranks). The Gram
    // form forms this iteration's target Z = W Gv / c (Gv still the previous G_i) only then.
    const auto current_target = [&] {
      if (it > 0 && gram_form)
        p.gemm(Op::none, Op::none, T(1) / T(c), W, MatrixView<const T>(Gv), T(0), Z);
      return MatrixView<const T>(Z);
    };
    const std::vector<double> ratio =
        decide_ranks<T>(ctx, info, current_target, nullptr, "A_i^T Z (GOPP start)", it == 0);
    if (it == 0) min_ratio = *std::min_element(ratio.begin(), ratio.end());
    p.vstack(StackView<const T>(ctx.G), Gv);
    // The step of every user, D = Gv - (the previous Gv), which D then keeps for the next one.
    bool stationary = false;
    if (it > 0) {
      p.geam(T(1), MatrixView<const T>(Gv), T(-1), MatrixView<const T>(D), D);
      double moving = 0;  // users whose step was more than rounding
      for (double s : p.inner_products(Dblocks, Dblocks))
        if (!stop.step_is_rounding(s)) moving += 1;
      stationary = ctx.team.sum_host(moving) == 0;
    }
    p.copy(Gv.data(), D.data(), n * l);
    // f = sum_i ||A_i||^2 - c ||Z||^2 with Z = W Gv / c; in the Gram form
    // c ||Z||^2 = <Gv, K Gv> / c = <Gv, M> for the next products M = K Gv / c.
    double czz = 0;
    if (gram_form) {
      p.gemm(Op::none, Op::none, T(1) / T(c), K, MatrixView<const T>(Gv), T(0), M);
      czz = p.inner_products(StackView<const T>(Gv.data(), 1, n, l),
                             StackView<const T>(M.data(), 1, n, l))[0];
    } else {
      p.gemm(Op::none, Op::none, T(1) / T(c), W, MatrixView<const T>(Gv), T(0), Z);
      ctx.team.sum(Z.data(), a * l);
      czz = static_cast<double>(c) * p.sum_squares(Z.data(), a * l);
    }
    const double f = std::max(0.0, total - czz);
    ctx.report.objective_history.push_back(f);
    ctx.report.iterations = it + 1;
    if (!std::isfinite(f)) throw NumericalError("GOPP: the objective became non-finite");
    if (const char* why = stop.reason(ctx.report.objective_history, stationary)) {
      ctx.report.converged = true;
      ctx.report.stop_reason = why;
      break;
    }
  }
  // The target that matches the final G_i (the Gram form has not formed it yet).
  if (gram_form) p.gemm(Op::none, Op::none, T(1) / T(c), W, MatrixView<const T>(Gv), T(0), Z);
  ctx.report.min_rank_ratio = min_ratio;
  ctx.timer.lap("iterations");
}

template void run_gopp<float>(Context<float>&, MatrixView<float>);
template void run_gopp<double>(Context<double>&, MatrixView<double>);

}  // namespace dcalign::core
