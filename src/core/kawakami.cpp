// Kawakami-DC. Problem (47) of paper 001: minimise sum_{i,j} ||A_i g_ik - A_j g_jk||^2 subject to
// sum_i ||A_i g_ik||^2 = 1 for every column k.
//
// qr_svd (Alg. 3): A_i = Q_i R_i; the top-l right singular vectors of W_Q = [Q_1 ... Q_c] give
//   blocks g^_ik, and G_i = R_i^{-1} [g^_i1 ... g^_il].
// eigen (papers 000/003/004): S v = lambda B v with S_ii = 2(c-1) A_i^T A_i, S_ij = -2 A_i^T A_j
//   and B = blkdiag(A_i^T A_i), the l smallest eigenpairs, normalised v^T B v = 1. Writing
//   K = W^T W, S = 2c B - 2K, so S v = lambda B v <=> K v = (c - lambda/2) B v: the same
//   subspace as the QR-SVD form, which is why both agree up to column signs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/common.hpp"

namespace dcalign::core {
namespace {

template <typename T>
void kawakami_qr_svd(Context<T>& ctx) {
  auto& p = ctx.p;
  const index_t a = ctx.rows(), l = ctx.dim(), c = ctx.users();
  Buffer<T> q = p.allocate(a * l * c);
  Buffer<T> r = p.allocate(l * l * c);
  p.copy(ctx.A.data(), q.data(), a * l * c);
  StackView<T> Q(q.data(), c, a, l), R(r.data(), c, l, l);
  auto ratio = p.qr_batched(Q, R);
  ctx.timer.lap("qr");
  ctx.report.min_rank_ratio = *std::min_element(ratio.begin(), ratio.end());
  check_rank(ratio, ctx.rank_tolerance, "A_i (min |R_jj| / max |R_jj| of its QR factor)");

  Buffer<T> v = p.allocate(c * l * l);
  std::vector<T> s(static_cast<size_t>(l));
  MatrixView<T> V(v.data(), c * l, l);
  if (ctx.team.solo()) {
    ctx.report.svd = topk_svd(p, StackView<const T>(Q).concatenated(), l, ctx.opts.svd, s.data(),
                              MatrixView<T>(), V)
                         .describe();
  } else {
    // The left vectors U and S of W_Q over every process; this process's blocks of the right
    // ones follow from W_Q^T U = V S: V_i = Q_i^T U S^-1.
    Buffer<T> u = p.allocate(a * l), d = p.allocate(l * l), w = p.allocate(c * l * l);
    MatrixView<T> U(u.data(), a, l);
    ctx.report.svd = sharded_left_vectors(ctx, StackView<const T>(Q), U, s);
    std::vector<T> inverse(static_cast<size_t>(l * l), T(0));
    for (index_t j = 0; j < l; ++j) inverse[static_cast<size_t>(j * l + j)] = T(1) / s[j];
    p.to_device(inverse.data(), d.data(), l * l);
    p.gemm(Op::trans, Op::none, T(1), StackView<const T>(Q).concatenated(), MatrixView<const T>(U),
           T(0), MatrixView<T>(w.data(), c * l, l));
    p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(w.data(), c * l, l),
           MatrixView<const T>(d.data(), l, l), T(0), V);
  }
  ctx.timer.lap("svd");

  p.unvstack(MatrixView<const T>(V), ctx.G);
  p.trsm_upper_batched(StackView<const T>(R), ctx.G);
  ctx.timer.lap("back_substitution");
}

template <typename T>
bool by_magnitude(T x, T y) {
  return std::abs(x) < std::abs(y);
}

template <typename T>
void kawakami_eigen(Context<T>& ctx) {
  auto& p = ctx.p;
  const index_t l = ctx.dim(), c = ctx.users(), n = c * l;
  Buffer<T> s = p.allocate(n * n), b = p.allocate(n * n);
  MatrixView<T> S(s.data(), n, n), B(b.data(), n, n);
  const auto W = ctx.A.concatenated();
  // S = -2 K, then the diagonal blocks get + 2c K_ii and B = blkdiag(K_ii).
  p.syrk(Op::trans, T(-2), W, T(0), S);
  p.fill(b.data(), n * n, T(0));
  for (index_t i = 0; i < c; ++i) {
    MatrixView<T> Sii = S.rows_range(i * l, l).cols_range(i * l, l);
    MatrixView<T> Bii = B.rows_range(i * l, l).cols_range(i * l, l);
    p.geam(T(-0.5), MatrixView<const T>(Sii), T(0), MatrixView<const T>(Sii), Bii);
    p.geam(T(1), MatrixView<const T>(Sii), T(2 * c), MatrixView<const T>(Bii), Sii);
  }
  ctx.timer.lap("gram");
  Buffer<T> v = p.allocate(n * l);
  std::vector<T> evals(static_cast<size_t>(l));
  p.sygv_smallest(S, B, l, evals.data(), MatrixView<T>(v.data(), n, l));
  canonical_signs(p, MatrixView<T>(v.data(), n, l), MatrixView<T>());
  ctx.timer.lap("eigensolver");
  // The rank decision of the QR-SVD form, from B's Cholesky factor: its diagonal block L_i
  // satisfies A_i^T A_i = L_i L_i^T, so L_i = R_i^T up to signs and min |L_jj| / max |L_jj| is
  // the ratio qr_svd reads from R_i. The Gram matrix cannot resolve it below about sqrt(eps):
  // its rounding, of order eps ||A_i||^2 (at worst a eps ||A_i||^2), leaves an exactly
  // rank-deficient A_i a pivot ratio of order sqrt(eps) instead of 0, and need not make the
  // Cholesky factorisation fail (it did not with OpenBLAS's Cooper Lake kernels). Measured with
  // a duplicated column (a = 40, 1000, 20000, 12 seeds): at most 1.2 sqrt(eps), so the
  // tolerance has a floor of 4 sqrt(eps).
  // L's diagonal as one 1 x n row: entry j sits at B.data() + j (ld + 1).
  Buffer<T> d = p.allocate(n);
  const MatrixView<const T> diagonal(B.data(), 1, n, B.ld() + 1);
  p.geam(T(1), diagonal, T(0), diagonal, MatrixView<T>(d.data(), 1, n));
  std::vector<T> h(static_cast<size_t>(n)), ratio(static_cast<size_t>(c));
  p.to_host(d.data(), h.data(), n);
  for (index_t i = 0; i < c; ++i) {
    const auto first = h.begin() + i * l, last = first + l;
    const T lo = std::abs(*std::min_element(first, last, by_magnitude<T>));
    const T hi = std::abs(*std::max_element(first, last, by_magnitude<T>));
    ratio[static_cast<size_t>(i)] = hi > T(0) ? lo / hi : T(0);
  }
  ctx.report.min_rank_ratio = *std::min_element(ratio.begin(), ratio.end());
  check_rank(ratio,
             std::max(ctx.rank_tolerance, 4 * std::sqrt(double(std::numeric_limits<T>::epsilon()))),
             "A_i (min |L_jj| / max |L_jj| of the Cholesky factor of A_i^T A_i)");
  p.unvstack(MatrixView<const T>(v.data(), n, l), ctx.G);
}

}  // namespace

template <typename T>
void run_kawakami(Context<T>& ctx) {
  if (ctx.opts.kawakami_form == KawakamiForm::qr_svd) {
    kawakami_qr_svd(ctx);
  } else if (ctx.team.solo()) {
    kawakami_eigen(ctx);
  } else {
    // The pencil is c l x c l over every user; its equivalent QR-SVD form is not.
    kawakami_qr_svd(ctx);
    ctx.report.svd += "; eigen form solved through its equivalent QR-SVD form";
  }
}

template void run_kawakami<float>(Context<float>&);
template void run_kawakami<double>(Context<double>&);

}  // namespace dcalign::core
