// ODC, paper 001 Algorithm 4: G_i = U_i V_i^T from the SVD of A_i^T A_r O (orthogonal
// Procrustes per user, eq. 70-71). All products A_i^T (A_r O) come from ONE matrix product
// (A_r O)^T [A_1 ... A_c], followed by one batched polar step. With an explicit target Z
// (paper 004, eqs. 17-20) the same step aligns every user to Z.
#include <algorithm>
#include <cmath>

#include "core/common.hpp"

namespace dcalign::core {

template <typename T>
void run_odc(Context<T>& ctx, MatrixView<T> target) {
  auto& p = ctx.p;
  const index_t a = ctx.rows(), l = ctx.dim();
  MatrixView<T> Z = target;  // align_resident always provides it for targeted methods
  if (ctx.opts.target.size() > 0) {
    const auto& given = ctx.opts.target;
    if (given.rows() != a || given.cols() != l)
      throw InvalidInput("explicit ODC target Z is " + std::to_string(given.rows()) + " x " +
                         std::to_string(given.cols()) + ", expected a x l = " + std::to_string(a) +
                         " x " + std::to_string(l));
    require_finite(given, "explicit ODC target Z");
    Buffer<T> up = upload(p, given);
    p.copy(up.data(), Z.data(), a * l);
  } else {
    reference_target(ctx, Z);
  }
  ctx.timer.lap("target");
  procrustes_to_target(
      ctx, MatrixView<const T>(Z),
      ctx.opts.target.size() > 0 ? "A_i^T Z" : "A_i^T A_r O (r the reference user)");
}

template <typename T>
void reference_target(Context<T>& ctx, MatrixView<T> Z) {
  auto& p = ctx.p;
  const index_t l = ctx.dim();
  // Every process draws O (cheap, l x l): a bad supplied O fails everywhere alike.
  Buffer<T> o = upload(p, target_rotation(ctx.opts, l));
  const int owner = ctx.team.owner(ctx.opts.reference_user);
  if (ctx.team.rank() == owner)
    p.gemm(Op::none, Op::none, T(1), ctx.A[ctx.opts.reference_user - ctx.team.first()],
           MatrixView<const T>(o.data(), l, l), T(0), Z);
  ctx.team.broadcast(Z.data(), Z.rows() * l, owner);
}

template <typename T>
void procrustes_to_target(Context<T>& ctx, MatrixView<const T> Z, const std::string& what) {
  const index_t l = ctx.dim(), c = ctx.users();
  ctx.products = ctx.p.allocate(c * l * l);
  PolarInfo<T> info = procrustes_step(ctx, Z, ctx.products.data());
  ctx.timer.lap("procrustes");
  const std::vector<double> ratio = decide_ranks<T>(
      ctx, info, [&] { return Z; }, ctx.products.data(), what, true);
  if (ctx.report.promoted_users > 0) ctx.timer.lap("promote");
  ctx.report.min_rank_ratio = *std::min_element(ratio.begin(), ratio.end());
  ctx.report.iterations = info.max_iterations;
}

template void run_odc<float>(Context<float>&, MatrixView<float>);
template void run_odc<double>(Context<double>&, MatrixView<double>);
template void reference_target<float>(Context<float>&, MatrixView<float>);
template void reference_target<double>(Context<double>&, MatrixView<double>);
template void procrustes_to_target<float>(Context<float>&, MatrixView<const float>,
                                          const std::string&);
template void procrustes_to_target<double>(Context<double>&, MatrixView<const double>,
                                           const std::string&);

}  // namespace dcalign::core
