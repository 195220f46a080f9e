// OPP, paper 004 eqs. 17-19 (section 3.3.1): the orthogonal Procrustes problem against the
// spectral target Z = U_1, the top-l left singular vectors of W = [A_1 ... A_c]:
//   min sum_i ||A_i G_i - U_1||_F^2  s.t.  G_i^T G_i = I,  solved by G_i = polar(A_i^T U_1).
// It is ODC with an explicit target U_1 (one product W^T U_1, one batched polar step) and GOPP's
// first half-step from the spectral start, so it is written on exactly those pieces.
#include "core/common.hpp"

namespace dcalign::core {

template <typename T>
void run_opp(Context<T>& ctx, MatrixView<T> target) {
  spectral_basis(ctx, target);  // U_1 (exact or randomized, AlignOptions::svd)
  ctx.timer.lap("svd");
  procrustes_to_target(ctx, MatrixView<const T>(target), "A_i^T U_1");
}

template void run_opp<float>(Context<float>&, MatrixView<float>);
template void run_opp<double>(Context<double>&, MatrixView<double>);

}  // namespace dcalign::core
