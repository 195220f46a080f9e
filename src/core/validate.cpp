// Input checks shared by all methods, and small helpers used by several of them.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/host_blas.hpp"
#include "core/common.hpp"
#include "dcalign/options.hpp"
#include "dcalign/random.hpp"

namespace dcalign {

template <typename T>
void validate_anchors([[maybe_unused]] Primitives<T>& p, StackView<const T> A,
                      const AlignOptions& opts) {
  if (A.count() < 1)
    throw InvalidInput("no users: the anchor stack is empty (expected c >= 1 matrices A_i)");
  if (A.rows() < 1 || A.cols() < 1)
    throw InvalidInput("anchor representations are " + std::to_string(A.rows()) + " x " +
                       std::to_string(A.cols()) + "; expected a >= 1 rows and l >= 1 columns");
  if (A.cols() > A.rows())
    throw InvalidInput("dimension l = " + std::to_string(A.cols()) +
                       " exceeds the anchor rows a = " + std::to_string(A.rows()) +
                       ": each A_i (a x l) must have full column rank, which needs l <= a");
  if (opts.reference_user < 0 || opts.reference_user >= A.count())
    throw InvalidInput("reference user " + std::to_string(opts.reference_user) +
                       " out of range: there are " + std::to_string(A.count()) +
                       " users (0-based)");
  // The options the method uses, against the schema (dcalign/options.hpp): the library must
  // not, e.g., return the all-zero G that zero GOPP iterations would leave, nor iterate on a
  // meaningless tolerance. The entry points have checked them already, with their own keys.
  check_align_options(opts);
}

template <typename T>
void validate_anchor_values(Primitives<T>& p, StackView<const T> A) {
  const auto bad = p.first_nonfinite_batched(A);
  for (index_t k = 0; k < A.count(); ++k)
    if (bad[k] >= 0) {
      const index_t i = bad[k] % A.rows(), j = bad[k] / A.rows();
      throw InvalidInput("user " + std::to_string(k) + ": anchor representation A_" +
                         std::to_string(k) + " has a non-finite value (NaN or Inf) at row " +
                         std::to_string(i) + ", column " + std::to_string(j) +
                         "; every entry must be finite");
    }
}

namespace core {

template <typename T>
Buffer<T> upload(Primitives<T>& p, const Matrix<double>& m) {
  std::vector<T> host(m.values().begin(), m.values().end());
  Buffer<T> b = p.allocate(m.size());
  p.to_device(host.data(), b.data(), m.size());
  return b;
}

void require_finite(const Matrix<double>& m, const std::string& what) {
  for (index_t j = 0; j < m.cols(); ++j)
    for (index_t i = 0; i < m.rows(); ++i)
      if (!std::isfinite(m(i, j)))
        throw InvalidInput(what + " has a non-finite entry (NaN or Inf) at row " +
                           std::to_string(i) + ", column " + std::to_string(j) +
                           "; every entry must be finite");
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
index_t first_overflowing(Primitives<T>& p, StackView<const T> M) {
  const std::vector<double> norms = p.inner_products(M, M);
  index_t k = 0;
  while (k < M.count() && std::isfinite(norms[static_cast<size_t>(k)])) ++k;
  return k;
}

template <typename T>
void check_rank(const std::vector<T>& ratio, double tolerance, const std::string& what) {
  for (size_t k = 0; k < ratio.size(); ++k)
    if (!(static_cast<double>(ratio[k]) > tolerance)) {
      std::ostringstream os;
      os << "user " << k << ": " << what << " is numerically rank deficient (sigma_min/sigma_max = "
         << static_cast<double>(ratio[k]) << ", tolerance " << tolerance
         << "); every A_i must have full column rank l";
      throw InvalidInput(os.str());
    }
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

#define DCALIGN_INSTANTIATE_COMMON(T)                                                            \
  template Buffer<T> upload<T>(Primitives<T>&, const Matrix<double>&);                           \
  template Buffer<T> gather<T>(Primitives<T>&, StackView<const T>, const std::vector<index_t>&); \
  template index_t first_overflowing<T>(Primitives<T>&, StackView<const T>);                     \
  template void check_rank<T>(const std::vector<T>&, double, const std::string&);                \
  template void spectral_basis<T>(Context<T>&, MatrixView<T>, MatrixView<const T>);              \
  template PolarInfo<T> procrustes_step<T>(Context<T>&, MatrixView<const T>, T*);                \
  template PolarInfo<T> polar_of_products<T>(Context<T>&, const T*);
DCALIGN_INSTANTIATE_COMMON(float)
DCALIGN_INSTANTIATE_COMMON(double)

}  // namespace core

template void validate_anchors<float>(Primitives<float>&, StackView<const float>,
                                      const AlignOptions&);
template void validate_anchor_values<float>(Primitives<float>&, StackView<const float>);
template void validate_anchor_values<double>(Primitives<double>&, StackView<const double>);
template void validate_anchors<double>(Primitives<double>&, StackView<const double>,
                                       const AlignOptions&);

}  // namespace dcalign
