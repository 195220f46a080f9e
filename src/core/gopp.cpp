// ODC-GOPP, paper 003 Appendix B / paper 004 section 3.4: alternating minimisation of
// f(G, Z) = sum_i ||A_i G_i - Z||_F^2 over orthogonal G_i and Z. Given Z, each G_i is a
// Procrustes solution (the ODC step); given the G_i, the best Z is their mean
// Z = (1/c) sum_i A_i G_i = (1/c) W [G_1; ...; G_c]. Each half-step cannot increase f.
//
// With Z the mean and G_i orthogonal, f = sum_i ||A_i||_F^2 - c ||Z||_F^2, so tracking the
// objective costs O(a l) per iteration instead of another pass over the anchors.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/common.hpp"

namespace dcalign::core {

template <typename T>
void run_gopp(Context<T>& ctx, MatrixView<T> target) {
  auto& p = ctx.p;
  const index_t a = ctx.rows(), l = ctx.dim(), c = ctx.users();
  Buffer<T> gv = p.allocate(c * l * l), scratch = p.allocate(c * l * l);
  MatrixView<T> Z = target, Gv(gv.data(), c * l, l);
  if (ctx.opts.gopp_init == GoppInit::spectral) {
    spectral_basis(ctx, Z);
  } else {
    Buffer<T> o = upload(p, target_rotation(ctx.opts, l));
    p.gemm(Op::none, Op::none, T(1), ctx.A[ctx.opts.reference_user],
           MatrixView<const T>(o.data(), l, l), T(0), Z);
  }
  ctx.timer.lap("init");

  const double total = p.sum_squares(ctx.A.data(), ctx.A.size());
  // Below this the objective is rounding noise of the anchors' own size.
  const double noise = 8.0 * std::numeric_limits<T>::epsilon() * total;
  double previous = std::numeric_limits<double>::infinity();
  double min_ratio = 1.0;
  ctx.report.converged = false;
  for (index_t it = 0; it < ctx.opts.gopp_max_iterations; ++it) {
    PolarInfo<T> info = procrustes_step(ctx, MatrixView<const T>(Z), scratch.data());
    if (it == 0) {
      std::vector<T> ratio(static_cast<size_t>(c));
      for (index_t k = 0; k < c; ++k)
        ratio[k] = info.sigma_max[k] > 0 ? info.sigma_min[k] / info.sigma_max[k] : T(0);
      min_ratio = *std::min_element(ratio.begin(), ratio.end());
      check_rank(ratio, ctx.rank_tolerance, "A_i^T Z (GOPP start)");
    }
    p.vstack(StackView<const T>(ctx.G), Gv);
    p.gemm(Op::none, Op::none, T(1) / T(c), ctx.A.concatenated(), MatrixView<const T>(Gv), T(0), Z);
    const double f = std::max(0.0, total - static_cast<double>(c) * p.sum_squares(Z.data(), a * l));
    ctx.report.objective_history.push_back(f);
    ctx.report.iterations = it + 1;
    if (!std::isfinite(f)) throw NumericalError("GOPP: the objective became non-finite");
    if (f <= noise || (it > 0 && previous - f <= ctx.opts.gopp_tolerance * previous)) {
      ctx.report.converged = true;
      break;
    }
    previous = f;
  }
  ctx.report.min_rank_ratio = min_ratio;
  ctx.timer.lap("iterations");
}

template void run_gopp<float>(Context<float>&, MatrixView<float>);
template void run_gopp<double>(Context<double>&, MatrixView<double>);

}  // namespace dcalign::core
