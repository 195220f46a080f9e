// The orthogonal Procrustes step that ODC, GOPP and OPP share: the products M_i = A_i^T Z of
// every user from one matrix product, their batched polar factors G_i (the polar method is the
// one the options ask for), and the rank decision and promotion that follow.
#include <algorithm>
#include <string>
#include <vector>

#include "core/common.hpp"

namespace dcalign::core {

template <typename T>
PolarInfo<T> procrustes_step(Context<T>& ctx, MatrixView<const T> Z, T* scratch) {
  const index_t l = ctx.dim(), c = ctx.users();
  // W^T Z (c*l x l) has the M_i = A_i^T Z as row blocks. This orientation of the product runs
  // ~1.4x faster in OpenBLAS than Z^T W for these skinny shapes (bench/results).
  MatrixView<T> Mv(scratch, c * l, l);
  ctx.p.gemm(Op::trans, Op::none, T(1), ctx.A.concatenated(), Z, T(0), Mv);
  // Any NaN or Inf in the anchors reaches the product (IEEE: NaN*x = NaN, Inf*0 = NaN; one in Z
  // reaches every M_i), so finite products prove finite anchors at O(c l^2) cost instead of a
  // pass over all c*a*l. polar_of_products' sums of squares of the M_i are finite exactly when
  // the products are finite and do not overflow, so they answer both questions with one read
  // back (two finiteness scans before them cost the GPU two more). Where they fail on anchors
  // not yet checked (ODC without the evaluation), align_shared's scale check, run on the
  // error, names a NaN or Inf entry with its position.
  PolarInfo<T> info = polar_of_products(ctx, scratch);
  ctx.values_checked = true;
  return info;
}

template <typename T>
PolarInfo<T> polar_of_products(Context<T>& ctx, const T* products) {
  const index_t l = ctx.dim(), c = ctx.users();
  // Finite anchors whose products overflow, or whose products' squares do (GOPP's K Gv / c
  // too): name the user and the cure instead of the polar factor's "matrix k contains NaN or
  // Inf". ||M_i||_F^2 summed in double is infinite or NaN exactly then; O(c l^2), next to the
  // product's O(a c l^2).
  const StackView<const T> M(products, c, l, l, c * l, l);
  if (const index_t user = first_overflowing(ctx.p, M); user < c) {
    throw NumericalError("user " + std::to_string(user) +
                         ": A_i^T Z overflowed to Inf although every anchor entry is finite; "
                         "rescale the anchors (every method is scale invariant: multiply all "
                         "A_i by one power of two to bring them near 1)");
  }
  PolarOptions po;
  po.method = ctx.opts.polar;
  po.fallback_ratio = ctx.rank_tolerance;  // rank decisions on doubtful users use exact SVDs
  po.measure_orthogonality = false;        // the report's evaluation measures it
  po.promote = false;        // float32: decide_ranks recomputes M_i itself, from A_i and Z,
  po.defer_doubtful = true;  // for every doubtful user, with no float32 SVD before it
  return polar_factor(ctx.p, M, false, ctx.G, po);
}

template <typename T>
void procrustes_to_target(Context<T>& ctx, MatrixView<const T> Z, const std::string& what) {
  const index_t l = ctx.dim(), c = ctx.users();
  ctx.products = ctx.p.allocate(c * l * l);
  finish_procrustes(ctx, Z, procrustes_step(ctx, Z, ctx.products.data()), what);
}

template <typename T>
void finish_procrustes(Context<T>& ctx, MatrixView<const T> Z, const PolarInfo<T>& info,
                       const std::string& what) {
  ctx.timer.lap("procrustes");
  const std::vector<double> ratio = decide_ranks<T>(
      ctx, info, [&] { return Z; }, ctx.products.data(), what, true);
  if (ctx.report.promoted_users > 0) ctx.timer.lap("promote");
  ctx.report.min_rank_ratio = *std::min_element(ratio.begin(), ratio.end());
  ctx.report.iterations = info.max_iterations;
}

#define DCALIGN_INSTANTIATE_PROCRUSTES(T)                                                      \
  template PolarInfo<T> procrustes_step<T>(Context<T>&, MatrixView<const T>, T*);              \
  template PolarInfo<T> polar_of_products<T>(Context<T>&, const T*);                           \
  template void procrustes_to_target<T>(Context<T>&, MatrixView<const T>, const std::string&); \
  template void finish_procrustes<T>(Context<T>&, MatrixView<const T>, const PolarInfo<T>&,    \
                                     const std::string&);
DCALIGN_INSTANTIATE_PROCRUSTES(float)
DCALIGN_INSTANTIATE_PROCRUSTES(double)

}  // namespace dcalign::core
