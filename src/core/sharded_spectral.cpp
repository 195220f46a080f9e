// The top-l left singular vectors of W = [X_1 ... X_c] when the X_i are spread over the
// processes of a team (src/core/team.hpp). One process's routes (src/core/spectral.cpp) use
// W^T W or a factorisation of all of W; here every route reduces W to something every process
// can sum or gather:
//
//   gram        the a x a Gram matrix sum_i X_i X_i^T (one sum of a^2 values), its l largest
//               eigenpairs on process 0, given to every process (a x l). While a <= 8192.
//   randomized  Halko, Martinsson and Tropp's range finder: Y = sum_i X_i Omega_i (a x k,
//               k = l + oversampling) with Omega_i drawn from the seed and the user's global
//               index, so Y does not depend on the number of processes; q power steps
//               Y = sum_i X_i (X_i^T Q), one sum of a k values each; then the k x k matrix
//               sum_i (Q^T X_i)(X_i^T Q), whose top-l eigenvectors V give U = Q V. Also gram's
//               route above 8192 rows, where the a x a matrix (512 MiB in double) and its sum
//               outweigh the sketch.
//   exact       W itself gathered on every process (a sum of the zero-padded a x c l matrix),
//               the single process's SVD on process 0: a c l values per process, as in one.
//
// Each route ends as one process's does: canonical column signs, and an error on every process
// alike when W has rank below l.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/common.hpp"
#include "dcalign/random.hpp"

namespace dcalign::core {
namespace {

/// Above this many anchor rows the gram route takes the sketch instead.
constexpr index_t kShardedGramMaxRows = 8192;

/// U (backend memory) and s from process 0 to every process, which then agree on the rank.
template <typename T>
void share_basis(Context<T>& ctx, MatrixView<T> U, std::vector<T>& s) {
  const index_t l = U.cols();
  ctx.timer.lap("eigensolver");
  ctx.team.broadcast(U.data(), U.rows() * l, 0);
  ctx.team.broadcast_host(s.data(), l * index_t(sizeof(T)), 0);
  ctx.timer.lap("broadcast");
  if (!(s.back() > T(0)))
    throw InvalidInput("the concatenated anchor [A_1 ... A_c] has rank below l = " +
                       std::to_string(l) + "; no l-dimensional target exists");
}

/// s_j = sqrt(lambda_j) of the l largest eigenpairs of the symmetric S (overwritten), and their
/// vectors V.
template <typename T>
void largest_eigenpairs(Primitives<T>& p, MatrixView<T> S, MatrixView<T> V, std::vector<T>& s) {
  const index_t l = V.cols();
  std::vector<T> lambda(static_cast<size_t>(l));
  p.syev_largest(S, l, lambda.data(), V);
  for (index_t j = 0; j < l; ++j) s[j] = std::sqrt(std::max(lambda[j], T(0)));
}

template <typename T>
std::string gram_route(Context<T>& ctx, StackView<const T> X, MatrixView<T> U, std::vector<T>& s) {
  auto& p = ctx.p;
  const index_t a = X.rows();
  Buffer<T> kb = p.allocate(a * a);
  MatrixView<T> K(kb.data(), a, a);
  p.syrk(Op::none, T(1), X.concatenated(), T(0), K);
  ctx.timer.lap("gram");
  ctx.team.sum(kb.data(), a * a);
  ctx.timer.lap("allreduce_gram");
  if (ctx.team.rank() == 0) {
    if (!p.all_finite(kb.data(), a * a))
      throw NumericalError(
          "the Gram matrix sum_i A_i A_i^T overflowed although the anchors are finite; rescale "
          "the anchors (or use float64)");
    largest_eigenpairs(p, K, U, s);
    canonical_signs(p, U, MatrixView<T>());
  }
  share_basis(ctx, U, s);
  std::string what = "gram (distributed: sum over ranks of the a x a Gram matrix)";
  const double ratio = static_cast<double>(s.front()) / static_cast<double>(s.back());
  if (ratio > kGramMaxRatio) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "; sigma_1/sigma_l = %.3g > %g: subspace error up to eps (sigma_1/sigma_l)^2, "
                  "where a single process would take the exact SVD",
                  ratio, kGramMaxRatio);
    what += buf;
  }
  return what;
}

template <typename T>
std::string sketch_route(Context<T>& ctx, StackView<const T> X, MatrixView<T> U,
                         std::vector<T>& s) {
  auto& p = ctx.p;
  const SvdOptions& o = ctx.opts.svd;
  const index_t a = X.rows(), l = U.cols(), n = X.count() * l;
  const index_t k = std::min(a, l + std::max<index_t>(0, o.oversampling));
  const auto W = X.concatenated();
  Buffer<T> yb = p.allocate(a * k), bb = p.allocate(n * k), rb = p.allocate(k * k);
  MatrixView<T> Y(yb.data(), a, k), B(bb.data(), n, k);
  {
    Matrix<double> omega(n, k);  // [Omega_1; ...; Omega_c] of this process's users
    for (index_t i = 0; i < X.count(); ++i) {
      Rng rng = Rng::stream(
          o.seed, 0x5CE7C40000000000ULL + static_cast<std::uint64_t>(ctx.team.first() + i));
      const Matrix<double> om = random_normal<double>(l, k, rng);
      for (index_t j = 0; j < k; ++j)
        for (index_t r = 0; r < l; ++r) omega(i * l + r, j) = om(r, j);
    }
    Buffer<T> om = upload(p, omega);
    p.gemm(Op::none, Op::none, T(1), W, MatrixView<const T>(om.data(), n, k), T(0), Y);
  }
  // Y <- orth(sum over the team of Y), on process 0, given to all.
  auto orthonormalise = [&] {
    ctx.team.sum(yb.data(), a * k);
    if (ctx.team.rank() == 0) {
      if (!p.all_finite(yb.data(), a * k))
        throw NumericalError("the randomized sketch of [A_1 ... A_c] is not finite");
      p.qr_batched(StackView<T>(yb.data(), 1, a, k), StackView<T>(rb.data(), 1, k, k));
    }
    ctx.team.broadcast(yb.data(), a * k, 0);
  };
  orthonormalise();
  for (int q = 0; q < o.power_iterations; ++q) {
    p.gemm(Op::trans, Op::none, T(1), W, MatrixView<const T>(Y), T(0), B);
    p.gemm(Op::none, Op::none, T(1), W, MatrixView<const T>(B), T(0), Y);
    orthonormalise();
  }
  ctx.timer.lap("sketch");
  Buffer<T> cb = p.allocate(k * k), vb = p.allocate(k * l);
  p.gemm(Op::trans, Op::none, T(1), W, MatrixView<const T>(Y), T(0), B);
  p.syrk(Op::trans, T(1), MatrixView<const T>(B), T(0), MatrixView<T>(cb.data(), k, k));
  ctx.timer.lap("projection");
  ctx.team.sum(cb.data(), k * k);
  if (ctx.team.rank() == 0) {
    MatrixView<T> V(vb.data(), k, l);
    largest_eigenpairs(p, MatrixView<T>(cb.data(), k, k), V, s);
    p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(Y), MatrixView<const T>(V), T(0), U);
    canonical_signs(p, U, MatrixView<T>());
  }
  share_basis(ctx, U, s);
  return "randomized (distributed sketch: oversampling " + std::to_string(k - l) + ", " +
         std::to_string(o.power_iterations) + " power iterations)";
}

template <typename T>
std::string exact_route(Context<T>& ctx, StackView<const T> X, MatrixView<T> U, std::vector<T>& s) {
  auto& p = ctx.p;
  const index_t a = X.rows(), l = U.cols(), mine = X.count() * l, all = ctx.all_users() * l;
  Buffer<T> wb = p.allocate(a * all);
  p.fill(wb.data(), a * all, T(0));
  // This process's [X_1 ... X_c] at its users' columns (column-major: one contiguous range).
  p.copy(X.data(), wb.data() + ctx.team.first() * l * a, a * mine);
  ctx.team.sum(wb.data(), a * all);
  ctx.timer.lap("gather");
  if (ctx.team.rank() == 0)
    topk_svd(p, MatrixView<const T>(wb.data(), a, all), l, ctx.opts.svd, s.data(), U,
             MatrixView<T>());
  share_basis(ctx, U, s);
  return "exact (distributed: [A_1 ... A_c] gathered, a c l values per rank)";
}

}  // namespace

template <typename T>
std::string sharded_left_vectors(Context<T>& ctx, StackView<const T> X, MatrixView<T> U,
                                 std::vector<T>& s) {
  s.assign(static_cast<size_t>(U.cols()), T(0));
  switch (ctx.opts.svd.algorithm) {
    case SvdAlgorithm::exact:
      return exact_route(ctx, X, U, s);
    case SvdAlgorithm::randomized:
      return sketch_route(ctx, X, U, s);
    case SvdAlgorithm::gram:
      break;
  }
  if (X.rows() > kShardedGramMaxRows)
    return sketch_route(ctx, X, U, s) + "; gram asked, but a = " + std::to_string(X.rows()) +
           " > " + std::to_string(kShardedGramMaxRows) + " makes the a x a Gram matrix too large";
  return gram_route(ctx, X, U, s);
}

template std::string sharded_left_vectors<float>(Context<float>&, StackView<const float>,
                                                 MatrixView<float>, std::vector<float>&);
template std::string sharded_left_vectors<double>(Context<double>&, StackView<const double>,
                                                  MatrixView<double>, std::vector<double>&);

}  // namespace dcalign::core
