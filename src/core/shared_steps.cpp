// Steps several methods share: the matrices of their targets (ODC's O, Imakura-DC's R), moving
// matrices to the backend, gathering users, and the top-l left singular vectors of the
// concatenated anchors.
#include <vector>

#include "base/host_blas.hpp"
#include "core/common.hpp"
#include "dcalign/random.hpp"

namespace dcalign::core {

template <typename T>
Buffer<T> upload(Primitives<T>& p, const Matrix<double>& m) {
  std::vector<T> host(m.values().begin(), m.values().end());
  Buffer<T> b = p.allocate(m.size());
  p.to_device(host.data(), b.data(), m.size());
  return b;
}

Matrix<double> target_rotation(const AlignOptions& opts, index_t l) {
  switch (opts.rotation) {
    case TargetRotation::identity:
      return Matrix<double>::identity(l);
    case TargetRotation::haar: {
      Rng rng = Rng::stream(opts.seed, kHaarStream);
      return random_orthogonal<double>(l, rng);
    }
    case TargetRotation::supplied: {
      const auto& O = opts.rotation_matrix;
      if (O.rows() != l || O.cols() != l)
        throw InvalidInput("supplied target rotation O is " + std::to_string(O.rows()) + " x " +
                           std::to_string(O.cols()) + ", expected " + std::to_string(l) + " x " +
                           std::to_string(l));
      // Before the orthogonality test: std::max drops NaN, so a NaN would pass it and surface
      // later as overflowing anchors.
      require_finite(O, "supplied target rotation O");
      // O must be orthogonal for Theorem 5.3; 1e-6 admits matrices stored in float. O^T O by
      // BLAS, its lower triangle: at l = 950 on a 2-core Zen the loop of sums it replaces took
      // 0.9 s timed alone; the 'target' phase with a supplied O is now 0.12 s (0.06 s, O = I).
      Matrix<double> gram(l, l);
      if (l > 0) {
        const auto n = static_cast<lapack_int>(l);
        base::syrk_lower(true, n, n, 1.0, O.data(), n, 0.0, gram.data(), n);
      }
      double err = 0;
      for (index_t j = 0; j < l; ++j)
        for (index_t i = j; i < l; ++i)
          err = std::max(err, std::abs(gram(i, j) - (i == j ? 1.0 : 0.0)));
      if (!(err <= 1e-6))
        throw InvalidInput("supplied target rotation O is not orthogonal: max |O^T O - I| = " +
                           std::to_string(err) + " (tolerance 1e-6)");
      return O;
    }
  }
  return Matrix<double>::identity(l);
}

Matrix<double> right_factor(const AlignOptions& opts, index_t l) {
  if (opts.right == RightFactor::identity) return Matrix<double>::identity(l);
  if (opts.right == RightFactor::uniform) {
    Rng rng = Rng::stream(opts.seed, 0x1AA);
    return random_uniform<double>(l, l, rng);
  }
  const Matrix<double>& R = opts.right_matrix;
  if (R.rows() != l || R.cols() != l)
    throw InvalidInput("supplied right factor R is " + std::to_string(R.rows()) + " x " +
                       std::to_string(R.cols()) + ", expected " + std::to_string(l) + " x " +
                       std::to_string(l));
  require_finite(R, "supplied right factor R");
  return R;
}

template <typename T>
Buffer<T> gather(Primitives<T>& p, StackView<const T> M, const std::vector<index_t>& which) {
  const index_t r = M.rows(), k = M.cols(), per = r * k, n = static_cast<index_t>(which.size());
  Buffer<T> packed = p.allocate(n * per);
  for (index_t i = 0; i < n; ++i)
    p.vstack(StackView<const T>(M[which[i]].data(), 1, r, k, M.ld(), per),
             MatrixView<T>(packed.data() + i * per, r, k));
  return packed;
}

template <typename T>
void spectral_basis(Context<T>& ctx, MatrixView<T> U, MatrixView<const T> gram) {
  std::vector<T> s(static_cast<size_t>(ctx.dim()));
  if (!ctx.team.solo()) {
    ctx.report.svd = sharded_left_vectors(ctx, ctx.A, U, s);
    return;
  }
  ctx.report.svd = topk_svd(ctx.p, ctx.A.concatenated(), ctx.dim(), ctx.opts.svd, s.data(), U,
                            MatrixView<T>(), gram)
                       .describe();
  if (!(s.back() > T(0)))
    throw InvalidInput("the concatenated anchor [A_1 ... A_c] has rank below l = " +
                       std::to_string(ctx.dim()) + "; no l-dimensional target exists");
}

#define DCALIGN_INSTANTIATE_SHARED(T)                                                            \
  template Buffer<T> upload<T>(Primitives<T>&, const Matrix<double>&);                           \
  template Buffer<T> gather<T>(Primitives<T>&, StackView<const T>, const std::vector<index_t>&); \
  template void spectral_basis<T>(Context<T>&, MatrixView<T>, MatrixView<const T>);
DCALIGN_INSTANTIATE_SHARED(float)
DCALIGN_INSTANTIATE_SHARED(double)

}  // namespace dcalign::core
