// Imakura-DC, paper 001 Algorithm 2: target Z = U R with U the top-l left singular vectors of
// [A_1 ... A_c] (exact or randomized SVD) and R = I, a Unif[0,1) matrix, or a supplied one;
// G_i = A_i^+ Z (least squares, eq. 27-29).
#include <algorithm>

#include "core/common.hpp"

namespace dcalign::core {

template <typename T>
void run_imakura(Context<T>& ctx, MatrixView<T> target) {
  auto& p = ctx.p;
  const index_t a = ctx.rows(), l = ctx.dim();
  MatrixView<T> Z = target;  // align_resident always provides it for targeted methods
  if (ctx.opts.right == RightFactor::identity) {
    spectral_basis(ctx, Z);
    ctx.timer.lap("svd");
  } else {
    Buffer<T> u = p.allocate(a * l);
    MatrixView<T> U(u.data(), a, l);
    spectral_basis(ctx, U);
    ctx.timer.lap("svd");
    Buffer<T> r = upload(p, right_factor(ctx.opts, l));
    p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(U), MatrixView<const T>(r.data(), l, l),
           T(0), Z);
  }
  ctx.timer.lap("target");

  auto ratio = least_squares(p, ctx.A, MatrixView<const T>(Z), ctx.G, ctx.rank_tolerance);
  ctx.timer.lap("least_squares");
  ctx.report.min_rank_ratio = *std::min_element(ratio.begin(), ratio.end());
  check_rank(ratio, ctx.rank_tolerance, "A_i");
}

template void run_imakura<float>(Context<float>&, MatrixView<float>);
template void run_imakura<double>(Context<double>&, MatrixView<double>);

}  // namespace dcalign::core
