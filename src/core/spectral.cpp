// Top-k singular triplets through the Gram matrix of W's smaller side, written once on the
// primitives syrk, syev_largest, gemm and qr_batched.
//
// Why: LS, OPP, GOPP and RDP need U_1, the top-l left singular vectors of W = [A_1 ... A_c]
// (a x c l). An exact SVD bidiagonalises all of W (about 4 a (cl)^2 flops); for paper 004's
// Heart disease shape (1000 x 288) that is ~90% of OPP's time. The Gram route costs a (cl)^2
// (one syrk) plus a tridiagonalisation of the c l x c l Gram matrix and k eigenvectors, and it
// keeps the matrix K = W^T W that GOPP then iterates on (src/core/gopp.cpp).
//
// Accuracy (Golub & Van Loan, sec. 8.6 and 8.1.4): for W^T W = V S^2 V^T the eigensolver's
// backward error perturbs the top-k invariant subspace by about eps sigma_1^2 / (sigma_k^2 -
// sigma_{k+1}^2), against eps sigma_1 / (sigma_k - sigma_{k+1}) for an SVD of W: a factor
// sigma_1 / (sigma_k + sigma_{k+1}) < sigma_1 / sigma_k = kappa_k more. Hence the rule: the
// Gram route is used while kappa_k <= kGramMaxRatio = 100 (at most two digits fewer than the
// exact SVD) and the exact SVD otherwise. U = W V S^-1 loses orthogonality like eps kappa_k^2,
// so it is re-orthonormalised by one Householder QR (its R is S up to that error), which brings
// ||U^T U - I|| back to rounding level without moving the subspace.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "core/common.hpp"
#include "dcalign/random.hpp"

namespace dcalign::core {
namespace {

/// out = orthonormalised (M D) with D = diag(1 / s): QR of M D, columns signed so that the
/// diagonal of R is positive (so out is M D up to rounding when M D is nearly orthonormal).
template <typename T>
void orthonormal_columns(Primitives<T>& p, MatrixView<const T> M, const std::vector<T>& s,
                         MatrixView<T> out) {
  const index_t m = M.rows(), k = M.cols();
  std::vector<T> d(static_cast<size_t>(k * k), T(0));
  for (index_t j = 0; j < k; ++j) d[static_cast<size_t>(j * k + j)] = T(1) / s[j];
  Buffer<T> dd = p.allocate(k * k), q = p.allocate(m * k), r = p.allocate(k * k);
  p.to_device(d.data(), dd.data(), k * k);
  MatrixView<T> Q(q.data(), m, k);
  p.gemm(Op::none, Op::none, T(1), M, MatrixView<const T>(dd.data(), k, k), T(0), Q);
  p.qr_batched(StackView<T>(q.data(), 1, m, k), StackView<T>(r.data(), 1, k, k));
  std::vector<T> rh(static_cast<size_t>(k * k));
  p.to_host(r.data(), rh.data(), k * k);
  for (index_t j = 0; j < k; ++j) {
    const T rjj = rh[static_cast<size_t>(j * k + j)];
    d[static_cast<size_t>(j * k + j)] = rjj < T(0) ? T(-1) : T(1);
  }
  p.to_device(d.data(), dd.data(), k * k);
  p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(Q), MatrixView<const T>(dd.data(), k, k),
         T(0), out);
}

/// Top-k triplets of W from its Gram matrix K (as gram_of computes it; K is not modified).
/// Returns algorithm gram on success; algorithm exact, with nothing written, when K is not
/// finite or sigma_1 / sigma_k exceeds kGramMaxRatio (topk_svd then runs the exact SVD).
template <typename T>
SvdPath gram_topk(Primitives<T>& p, MatrixView<const T> W, MatrixView<const T> K, index_t k, T* s,
                  MatrixView<T> U, MatrixView<T> V) {
  const index_t m = W.rows(), n = W.cols();
  const bool columns = n <= m;  // K = W^T W (n x n), else K = W W^T (m x m)
  const index_t g = columns ? n : m;
  if (K.rows() != g || K.cols() != g || k < 1 || k > g)
    throw InvalidInput("gram_topk: shapes do not match (internal error)");
  Buffer<T> sk = p.allocate(g * g), ev = p.allocate(g * k);
  for (index_t j = 0; j < g; ++j) p.copy(&K(0, j), sk.data() + j * g, g);
  SvdPath path;
  if (!p.all_finite(sk.data(), g * g)) {  // W's squares overflowed: the exact SVD scales W
    path.algorithm = SvdAlgorithm::exact;
    path.ratio = std::numeric_limits<double>::infinity();
    return path;
  }
  std::vector<T> lambda(static_cast<size_t>(k));
  MatrixView<T> E(ev.data(), g, k);
  p.syev_largest(MatrixView<T>(sk.data(), g, g), k, lambda.data(), E);
  path.algorithm = SvdAlgorithm::gram;
  const double l1 = static_cast<double>(lambda.front()), lk = static_cast<double>(lambda.back());
  path.ratio = l1 > 0 && lk > 0 ? std::sqrt(l1 / lk) : std::numeric_limits<double>::infinity();
  if (!std::isfinite(l1) || !(path.ratio <= kGramMaxRatio)) {
    path.algorithm = SvdAlgorithm::exact;  // the caller falls back
    return path;
  }
  std::vector<T> sv(static_cast<size_t>(k));
  for (index_t j = 0; j < k; ++j) sv[j] = s[j] = std::sqrt(lambda[j]);
  // The eigenvectors are the singular vectors of the Gram's side; the other side is W times
  // them over sigma, re-orthonormalised.
  MatrixView<T> same = columns ? V : U, other = columns ? U : V;
  if (same.data())
    for (index_t j = 0; j < k; ++j) p.copy(&E(0, j), &same(0, j), g);
  if (other.data()) {
    const index_t h = columns ? m : n;
    Buffer<T> wb = p.allocate(h * k);
    MatrixView<T> WE(wb.data(), h, k);
    p.gemm(columns ? Op::none : Op::trans, Op::none, T(1), W, MatrixView<const T>(E), T(0), WE);
    orthonormal_columns(p, MatrixView<const T>(WE), sv, other);
  }
  return path;
}

}  // namespace

template <typename T>
void canonical_signs(Primitives<T>& p, MatrixView<T> X, MatrixView<T> Y) {
  const index_t n = X.rows(), k = X.cols();
  if (n == 0 || k == 0) return;
  // The probe r: entries in [-1/2, 1/2) from a hash of the row index (splitmix64), the same on
  // every machine and for every call, and generic, so that x_j^T r is far from 0 for any
  // vector met in practice (|x_j^T r| is of order ||x_j|| / sqrt(12)).
  std::vector<T> r(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    std::uint64_t state = static_cast<std::uint64_t>(i);
    const std::uint64_t z = Rng::splitmix64(state);
    r[static_cast<size_t>(i)] = static_cast<T>(static_cast<double>(z >> 11) * 0x1.0p-53 - 0.5);
  }
  Buffer<T> rb = p.allocate(n), db = p.allocate(k);
  p.to_device(r.data(), rb.data(), n);
  p.gemm(Op::trans, Op::none, T(1), MatrixView<const T>(X), MatrixView<const T>(rb.data(), n, 1),
         T(0), MatrixView<T>(db.data(), k, 1));
  std::vector<T> d(static_cast<size_t>(k));
  p.to_host(db.data(), d.data(), k);
  for (index_t j = 0; j < k; ++j) {
    if (!(d[static_cast<size_t>(j)] < T(0))) continue;
    for (MatrixView<T> M : {X, Y}) {
      if (!M.data()) continue;
      MatrixView<T> col = M.cols_range(j, 1);
      p.geam(T(-1), MatrixView<const T>(col), T(0), MatrixView<const T>(col), col);
    }
  }
}

template <typename T>
void gram_of(Primitives<T>& p, MatrixView<const T> W, MatrixView<T> K) {
  p.syrk(W.cols() <= W.rows() ? Op::trans : Op::none, T(1), W, T(0), K);
}

// Randomized range finder (Halko, Martinsson & Tropp 2011, Alg. 4.4), written once on the
// backend primitives: Y = W Omega with a Gaussian Omega (n x width, from dcalign::Rng with the
// options' seed, the same draw on every backend), then q power iterations Y = W (W^T Q), each
// step re-orthonormalised (qr_batched on one matrix) for stability; B = Q^T W (width x n) and its
// exact SVD B = Ub S V^T give W ~ (Q Ub) S V^T.
template <typename T>
void randomized_topk(Primitives<T>& p, MatrixView<const T> W, index_t k, index_t width,
                     const SvdOptions& opts, T* s, MatrixView<T> U, MatrixView<T> V) {
  const index_t m = W.rows(), n = W.cols();
  Rng rng(opts.seed);
  const Matrix<T> omega = random_normal<T>(n, width, rng);
  Buffer<T> om = p.allocate(n * width), q = p.allocate(m * width), z = p.allocate(n * width),
            r = p.allocate(width * width), b = p.allocate(width * n), ub;
  p.to_device(omega.data(), om.data(), n * width);
  MatrixView<T> Q(q.data(), m, width), Z(z.data(), n, width);
  const auto orthonormalise = [&](MatrixView<T> Y) {
    (void)p.qr_batched(StackView<T>(Y.data(), 1, Y.rows(), width, Y.rows(), Y.rows() * width),
                       StackView<T>(r.data(), 1, width, width));
  };
  p.gemm(Op::none, Op::none, T(1), W, MatrixView<const T>(om.data(), n, width), T(0), Q);
  orthonormalise(Q);
  for (int it = 0; it < opts.power_iterations; ++it) {
    p.gemm(Op::trans, Op::none, T(1), W, MatrixView<const T>(Q), T(0), Z);
    orthonormalise(Z);
    p.gemm(Op::none, Op::none, T(1), W, MatrixView<const T>(Z), T(0), Q);
    orthonormalise(Q);
  }
  MatrixView<T> B(b.data(), width, n);
  p.gemm(Op::trans, Op::none, T(1), MatrixView<const T>(Q), W, T(0), B);
  MatrixView<T> Ub;
  if (U.data()) {
    ub = p.allocate(width * k);
    Ub = MatrixView<T>(ub.data(), width, k);
  }
  p.svd_topk(MatrixView<const T>(B), k, s, Ub, V);
  if (U.data())
    p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(Q), MatrixView<const T>(Ub), T(0), U);
}

template <typename T>
SvdPath topk_svd(Primitives<T>& p, MatrixView<const T> W, index_t k, const SvdOptions& opts, T* s,
                 MatrixView<T> U, MatrixView<T> V, MatrixView<const T> gram) {
  // Each pair (u_j, v_j) is unique up to one sign, which LAPACK leaves to the algorithm (and so
  // to the BLAS kernels and the backend); canonical_signs fixes it, from U where it is asked for.
  auto fix_signs = [&] {
    if (U.data())
      canonical_signs(p, U, V);
    else if (V.data())
      canonical_signs(p, V, MatrixView<T>());
  };
  if (opts.algorithm != SvdAlgorithm::gram) {
    // The randomized route decomposes a sketch of `width` columns; one as wide as W is the
    // exact SVD.
    const index_t full = std::min(W.rows(), W.cols());
    const index_t width = std::min<index_t>(full, k + std::max<index_t>(opts.oversampling, 0));
    if (opts.algorithm == SvdAlgorithm::randomized && width < full)
      randomized_topk(p, W, k, width, opts, s, U, V);
    else
      p.svd_topk(W, k, s, U, V);
    fix_signs();
    SvdPath path;
    path.algorithm = opts.algorithm;
    return path;
  }
  Buffer<T> kb;
  if (!gram.data()) {
    const index_t g = std::min(W.rows(), W.cols());
    kb = p.allocate(g * g);
    gram_of(p, W, MatrixView<T>(kb.data(), g, g));
    gram = MatrixView<const T>(kb.data(), g, g);
  }
  SvdPath path = gram_topk(p, W, gram, k, s, U, V);
  if (path.algorithm != SvdAlgorithm::gram) {
    p.svd_topk(W, k, s, U, V);  // gram_topk wrote nothing: the exact SVD, as the fallback
    path.gram_fallback = true;
  }
  fix_signs();
  return path;
}

std::string SvdPath::describe() const {
  if (!gram_fallback) return to_string(algorithm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "exact (gram fallback: sigma_1/sigma_k = %.3g > %g)", ratio,
                kGramMaxRatio);
  return buf;
}

#define DCALIGN_INSTANTIATE_SPECTRAL(T)                                                         \
  template void canonical_signs<T>(Primitives<T>&, MatrixView<T>, MatrixView<T>);               \
  template void gram_of<T>(Primitives<T>&, MatrixView<const T>, MatrixView<T>);                 \
  template SvdPath topk_svd<T>(Primitives<T>&, MatrixView<const T>, index_t, const SvdOptions&, \
                               T*, MatrixView<T>, MatrixView<T>, MatrixView<const T>);
DCALIGN_INSTANTIATE_SPECTRAL(float)
DCALIGN_INSTANTIATE_SPECTRAL(double)

}  // namespace dcalign::core
