// The CUDA backend against the CPU reference backend: every primitive of backend.hpp on the same
// random inputs (fixed seeds), float and double, orders on both sides of cuSOLVER's 32 x 32
// batched-SVD limit; the polar iteration's primitives step by step; polar_factor and every
// alignment method end to end. Every test skips where no usable GPU is present, except the one
// that checks the failure without a GPU.
//
// Tolerances are stated next to each check with a one-line reason; eps = eps(T), u = eps / 2.
// Where both backends run the same arithmetic on the same data (copies, one multiplication per
// entry) results must be equal; elsewhere they differ by rounding, bounded in terms of the
// dimensions, eps and (where it matters) the condition of the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "base/polar_block.hpp"
#include "base/polar_scalar.hpp"
#include "core/common.hpp"
#include "cuda/cuda_api.hpp"
#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/polar.hpp"
#include "dcalign/random.hpp"
#include "gpu_test_shapes.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

using testing::frob;
using testing::frob_diff;
using testing::mul;
using testing::to_double;

bool have_gpu(std::string* why) { return cuda_available(why); }

#define DCALIGN_REQUIRE_GPU()                                        \
  do {                                                               \
    std::string why_;                                                \
    if (!have_gpu(&why_)) GTEST_SKIP() << "no usable GPU: " << why_; \
  } while (0)

// One backend of each kind for the whole suite (context creation takes a while).
Backend& cpu_backend() {
  static const std::shared_ptr<Backend> b = make_backend(Device::cpu);
  return *b;
}
Backend& gpu_backend() {
  static const std::shared_ptr<Backend> b = make_backend(Device::cuda);
  return *b;
}

template <typename T>
double eps() {
  return std::numeric_limits<T>::epsilon();
}

template <typename T>
std::vector<T> normal_values(index_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<T>(rng.normal());
  return v;
}

// ||a - b|| / ||b|| over n values (0 when both vanish).
template <typename T>
double rel_diff(const T* a, const T* b, index_t n) {
  double d = 0, s = 0;
  for (index_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    d += e * e;
    s += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return s > 0 ? std::sqrt(d / s) : std::sqrt(d);
}
template <typename T>
double rel_diff(const std::vector<T>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  return rel_diff(a.data(), b.data(), static_cast<index_t>(std::min(a.size(), b.size())));
}

// Stack of c matrices M_k = U_k diag(s) V_k^T with singular values spread over [1, kappa]:
// controlled conditioning for the factorisation comparisons.
template <typename T>
std::vector<T> conditioned_stack(index_t c, index_t l, double kappa, std::uint64_t seed) {
  std::vector<T> out(static_cast<size_t>(c * l * l));
  for (index_t k = 0; k < c; ++k) {
    Rng rng = Rng::stream(seed, static_cast<std::uint64_t>(k));
    Matrix<double> U = random_orthogonal<double>(l, rng), V = random_orthogonal<double>(l, rng);
    for (index_t j = 0; j < l; ++j) {
      const double s = l == 1 ? 1.0 : std::pow(kappa, static_cast<double>(j) / (l - 1));
      for (index_t i = 0; i < l; ++i) U(i, j) *= s;
    }
    const Matrix<double> M = mul(U, V, false, true);
    for (index_t i = 0; i < l * l; ++i) out[k * l * l + i] = static_cast<T>(M.data()[i]);
  }
  return out;
}

template <typename T>
class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override { DCALIGN_REQUIRE_GPU(); }
  Primitives<T>& cpu() { return cpu_backend().primitives<T>(); }
  Primitives<T>& gpu() { return gpu_backend().primitives<T>(); }
  Buffer<T> up(const std::vector<T>& v) {
    Buffer<T> b = gpu().allocate(static_cast<index_t>(v.size()));
    gpu().to_device(v.data(), b.data(), static_cast<index_t>(v.size()));
    return b;
  }
  std::vector<T> down(const Buffer<T>& b) { return down(b.data(), b.size()); }
  std::vector<T> down(const T* p, index_t n) {
    std::vector<T> v(static_cast<size_t>(n));
    gpu().to_host(p, v.data(), n);
    return v;
  }
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CudaVsCpu, Precisions);

// Orders on both sides of the 32 limits (cuSOLVER's batched Jacobi SVD, cuBLAS's batched LU,
// one warp). DCALIGN_GPU_TEST_SMALL=1 (compute-sanitizer runs) keeps 5, 32 and 33, and the
// counts 1 (single matrix) and 7 (batched).
const std::vector<index_t> kOrders =
    dcalign_gpu_small() ? std::vector<index_t>{5, 32, 33} : std::vector<index_t>{5, 31, 32, 33, 64};
const std::vector<index_t> kCounts =
    dcalign_gpu_small() ? std::vector<index_t>{1, 7} : std::vector<index_t>{1, 7, 100};

// ------------------------------------------------------------------ memory and BLAS level

TYPED_TEST(CudaVsCpu, MemoryRoundTripCopyFill) {
  using T = TypeParam;
  const index_t n = 100003;  // not a multiple of any block size
  const auto v = normal_values<T>(n, 1);
  Buffer<T> d = this->up(v);
  EXPECT_EQ(this->down(d), v);  // exact: plain copies
  // copy, including overlapping ranges (memmove semantics like the CPU backend).
  Buffer<T> e = this->gpu().allocate(n);
  this->gpu().copy(d.data(), e.data(), n);
  EXPECT_EQ(this->down(e), v);
  std::vector<T> h = v;
  this->cpu().copy(h.data(), h.data() + 7, n - 7);
  this->gpu().copy(e.data(), e.data() + 7, n - 7);
  EXPECT_EQ(this->down(e), h);
  this->cpu().copy(h.data() + 11, h.data(), n - 11);
  this->gpu().copy(e.data() + 11, e.data(), n - 11);
  EXPECT_EQ(this->down(e), h);
  // fill, also of a sub-range.
  this->cpu().fill(h.data() + 5, n - 10, T(2.5));
  this->gpu().fill(e.data() + 5, n - 10, T(2.5));
  EXPECT_EQ(this->down(e), h);
  // allocate(0) gives a usable (empty) buffer.
  Buffer<T> z = this->gpu().allocate(0);
  EXPECT_EQ(z.size(), 0);
  this->gpu().synchronize();
}

TYPED_TEST(CudaVsCpu, GemmAllTransposesAndStridedViews) {
  using T = TypeParam;
  const index_t m = 37, n = 29, k = 45;
  // Operands are sub-blocks of larger matrices: leading dimensions exceed the rows.
  const index_t big = 80;
  const auto a = normal_values<T>(big * big, 2), b = normal_values<T>(big * big, 3),
             c0 = normal_values<T>(big * big, 4);
  Buffer<T> da = this->up(a), db = this->up(b);
  for (Op ta : {Op::none, Op::trans})
    for (Op tb : {Op::none, Op::trans}) {
      SCOPED_TRACE(std::string(ta == Op::trans ? "A^T" : "A") + (tb == Op::trans ? " B^T" : " B"));
      const index_t ar = ta == Op::trans ? k : m, ac = ta == Op::trans ? m : k;
      const index_t br = tb == Op::trans ? n : k, bc = tb == Op::trans ? k : n;
      std::vector<T> c = c0;
      Buffer<T> dc = this->up(c0);
      auto view = [&](T* p, index_t r, index_t cl) {
        return MatrixView<T>(p, big, big).rows_range(3, r).cols_range(2, cl);
      };
      this->cpu().gemm(ta, tb, T(0.7), view(const_cast<T*>(a.data()), ar, ac),
                       view(const_cast<T*>(b.data()), br, bc), T(-0.3), view(c.data(), m, n));
      this->gpu().gemm(ta, tb, T(0.7), view(da.data(), ar, ac), view(db.data(), br, bc), T(-0.3),
                       view(dc.data(), m, n));
      // Two summation orders of k products differ by <= 2 k u |A||B| per entry, and |A||B| is
      // about sqrt(k) |AB| for Gaussian factors.
      EXPECT_LE(rel_diff(this->down(dc), c), 4 * k * std::sqrt(double(k)) * eps<T>());
    }
}

TYPED_TEST(CudaVsCpu, GemmBatchedBroadcastAndStrided) {
  using T = TypeParam;
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      const index_t a = l + 9;
      const auto A = normal_values<T>(c * a * l, 10 + l), B = normal_values<T>(c * l * l, 20 + l);
      Buffer<T> dA = this->up(A), dB = this->up(B);
      // (1) C_k = A_k^T A_k (the Gram matrices), contiguous.
      std::vector<T> C(static_cast<size_t>(c * l * l));
      Buffer<T> dC = this->gpu().allocate(c * l * l);
      this->cpu().gemm_batched(Op::trans, Op::none, T(1), StackView<const T>(A.data(), c, a, l),
                               StackView<const T>(A.data(), c, a, l), T(0),
                               StackView<T>(C.data(), c, l, l));
      this->gpu().gemm_batched(Op::trans, Op::none, T(1), StackView<const T>(dA.data(), c, a, l),
                               StackView<const T>(dA.data(), c, a, l), T(0),
                               StackView<T>(dC.data(), c, l, l));
      // Summation-order bound as for gemm, inner dimension a.
      const double tol = 4 * a * std::sqrt(double(a)) * eps<T>();
      EXPECT_LE(rel_diff(this->down(dC), C), tol);
      // (2) broadcast B (count 1) into the row blocks of a (c*a) x l matrix (strided C).
      std::vector<T> Y(static_cast<size_t>(c * a * l), T(1));
      Buffer<T> dY = this->up(Y);
      this->cpu().gemm_batched(Op::none, Op::trans, T(2), StackView<const T>(A.data(), c, a, l),
                               StackView<const T>(B.data(), 1, l, l), T(0.5),
                               StackView<T>(Y.data(), c, a, l, c * a, a));
      this->gpu().gemm_batched(Op::none, Op::trans, T(2), StackView<const T>(dA.data(), c, a, l),
                               StackView<const T>(dB.data(), 1, l, l), T(0.5),
                               StackView<T>(dY.data(), c, a, l, c * a, a));
      EXPECT_LE(rel_diff(this->down(dY), Y), 4 * l * std::sqrt(double(l)) * eps<T>() + tol);
      // (3) broadcast A (count 1), B strided (row blocks of a (c*l) x l matrix).
      std::vector<T> D(static_cast<size_t>(c * a * l));
      Buffer<T> dD = this->gpu().allocate(c * a * l);
      this->cpu().gemm_batched(Op::none, Op::none, T(1), StackView<const T>(A.data(), 1, a, l),
                               StackView<const T>(B.data(), c, l, l, c * l, l), T(0),
                               StackView<T>(D.data(), c, a, l));
      this->gpu().gemm_batched(Op::none, Op::none, T(1), StackView<const T>(dA.data(), 1, a, l),
                               StackView<const T>(dB.data(), c, l, l, c * l, l), T(0),
                               StackView<T>(dD.data(), c, a, l));
      EXPECT_LE(rel_diff(this->down(dD), D), 4 * l * std::sqrt(double(l)) * eps<T>());
    }
}

TYPED_TEST(CudaVsCpu, TrsmUpperBatched) {
  using T = TypeParam;
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      // Upper triangular R_k with diagonal l + |N(0,1)|: diagonally dominant, cond(R_k) < 10.
      auto R = normal_values<T>(c * l * l, 30 + l);
      for (index_t k = 0; k < c; ++k)
        for (index_t j = 0; j < l; ++j)
          for (index_t i = 0; i < l; ++i) {
            T& r = R[k * l * l + i + j * l];
            if (i > j) r = T(0);
            if (i == j) r = T(l) + std::abs(r);
          }
      const index_t nb = 3 + l / 2;
      auto B = normal_values<T>(c * l * nb, 40 + l);
      Buffer<T> dR = this->up(R), dB = this->up(B);
      this->cpu().trsm_upper_batched(StackView<const T>(R.data(), c, l, l),
                                     StackView<T>(B.data(), c, l, nb));
      this->gpu().trsm_upper_batched(StackView<const T>(dR.data(), c, l, l),
                                     StackView<T>(dB.data(), c, l, nb));
      // Backward-stable triangular solves agree to about cond(R) l u; cond(R) < 10.
      EXPECT_LE(rel_diff(this->down(dB), B), 20 * l * eps<T>());
    }
}

TYPED_TEST(CudaVsCpu, VstackUnvstackGeam) {
  using T = TypeParam;
  for (index_t c : kCounts) {
    const index_t r = 33, cl = 40;
    const auto in = normal_values<T>(c * r * cl, 50 + c);
    Buffer<T> din = this->up(in);
    // vstack into a matrix with ld > rows, unvstack back into a strided stack: exact.
    const index_t ld = c * r + 5;
    std::vector<T> V(static_cast<size_t>(ld * cl), T(-1));
    Buffer<T> dV = this->up(V);
    this->cpu().vstack(StackView<const T>(in.data(), c, r, cl),
                       MatrixView<T>(V.data(), c * r, cl, ld));
    this->gpu().vstack(StackView<const T>(din.data(), c, r, cl),
                       MatrixView<T>(dV.data(), c * r, cl, ld));
    EXPECT_EQ(this->down(dV), V);
    std::vector<T> S(static_cast<size_t>(c * (r + 2) * cl + 3), T(7));
    Buffer<T> dS = this->up(S);
    const StackView<T> hs(S.data(), c, r, cl, r + 2, (r + 2) * cl),
        ds(dS.data(), c, r, cl, r + 2, (r + 2) * cl);
    this->cpu().unvstack(MatrixView<const T>(V.data(), c * r, cl, ld), hs);
    this->gpu().unvstack(MatrixView<const T>(dV.data(), c * r, cl, ld), ds);
    EXPECT_EQ(this->down(dS), S);
  }
  // geam, in place (C = A) on sub-blocks as Kawakami's eigen form does.
  const index_t n = 70;
  auto A = normal_values<T>(n * n, 60), B = normal_values<T>(n * n, 61);
  Buffer<T> dA = this->up(A), dB = this->up(B);
  auto blk = [&](T* p) { return MatrixView<T>(p, n, n).rows_range(10, 30).cols_range(20, 40); };
  this->cpu().geam(T(1), blk(A.data()), T(6), blk(B.data()), blk(A.data()));
  this->gpu().geam(T(1), blk(dA.data()), T(6), blk(dB.data()), blk(dA.data()));
  this->cpu().geam(T(-0.5), blk(A.data()), T(0), blk(A.data()), blk(B.data()));
  this->gpu().geam(T(-0.5), blk(dA.data()), T(0), blk(dA.data()), blk(dB.data()));
  // alpha a + beta b per entry: at most a fused multiply-add apart, 2 eps relative.
  EXPECT_LE(rel_diff(this->down(dA), A), 2 * eps<T>());
  EXPECT_LE(rel_diff(this->down(dB), B), 2 * eps<T>());
}

// ------------------------------------------------------------------ factorisations

TYPED_TEST(CudaVsCpu, PolarBatchedBothFlagsAndStridedInput) {
  using T = TypeParam;
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      // kappa = 10: the polar factor's condition is 2 / (sigma_{l-1} + sigma_l) <= 1.
      const auto M = conditioned_stack<T>(c, l, 10.0, 70 + l + c);
      Buffer<T> dM = this->up(M);
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(transposed ? "transposed" : "not transposed");
        std::vector<T> G(static_cast<size_t>(c * l * l));
        Buffer<T> dG = this->gpu().allocate(c * l * l);
        auto ci = this->cpu().polar_batched(StackView<const T>(M.data(), c, l, l), transposed,
                                            StackView<T>(G.data(), c, l, l));
        auto gi = this->gpu().polar_batched(StackView<const T>(dM.data(), c, l, l), transposed,
                                            StackView<T>(dG.data(), c, l, l));
        const auto g = this->down(dG);
        // Backward-stable SVDs of a kappa = 10 matrix: G to within ~ l u kappa.
        EXPECT_LE(rel_diff(g, G), 50 * l * eps<T>());
        // Singular values are perfectly conditioned: |ds| <= ||dM||_2 ~ l u sigma_max.
        for (index_t k = 0; k < c; ++k) {
          EXPECT_NEAR(gi.sigma_max[k], ci.sigma_max[k], 20 * l * eps<T>() * ci.sigma_max[k]);
          EXPECT_NEAR(gi.sigma_min[k], ci.sigma_min[k], 20 * l * eps<T>() * ci.sigma_max[k]);
        }
        // Orthogonality of each G_k (Jacobi or QR iteration SVD): ~ l u.
        auto orth = this->gpu().orthogonality_errors(StackView<const T>(dG.data(), c, l, l));
        for (T e : orth) EXPECT_LE(e, 20 * l * eps<T>());
      }
      // Strided input: the row blocks of a (c*l) x l matrix (ODC's layout of W^T Z).
      std::vector<T> W(static_cast<size_t>(c * l * l));
      for (index_t k = 0; k < c; ++k)
        for (index_t j = 0; j < l; ++j)
          for (index_t i = 0; i < l; ++i) W[k * l + i + j * c * l] = M[k * l * l + i + j * l];
      Buffer<T> dW = this->up(W);
      std::vector<T> G(static_cast<size_t>(c * l * l));
      Buffer<T> dG = this->gpu().allocate(c * l * l);
      this->cpu().polar_batched(StackView<const T>(W.data(), c, l, l, c * l, l), false,
                                StackView<T>(G.data(), c, l, l));
      this->gpu().polar_batched(StackView<const T>(dW.data(), c, l, l, c * l, l), false,
                                StackView<T>(dG.data(), c, l, l));
      EXPECT_LE(rel_diff(this->down(dG), G), 50 * l * eps<T>());
    }
}

TYPED_TEST(CudaVsCpu, QrBatched) {
  using T = TypeParam;
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      const index_t a = 2 * l + 3;  // Gaussian a x l with a > 2l: cond(A_k) < ~6
      const auto A = normal_values<T>(c * a * l, 80 + l + c);
      std::vector<T> Q = A, R(static_cast<size_t>(c * l * l));
      Buffer<T> dQ = this->up(A), dR = this->gpu().allocate(c * l * l);
      const auto rc =
          this->cpu().qr_batched(StackView<T>(Q.data(), c, a, l), StackView<T>(R.data(), c, l, l));
      const auto rg = this->gpu().qr_batched(StackView<T>(dQ.data(), c, a, l),
                                             StackView<T>(dR.data(), c, l, l));
      const auto q = this->down(dQ), r = this->down(dR);
      // Householder QR is backward stable: Q^T Q = I and QR = A to ~ a u; R (unique up to row
      // signs for full rank) and the diagonal ratio to ~ cond(A) a u, cond(A) < 6.
      const double tol = 20 * a * eps<T>();
      for (index_t k = 0; k < c; ++k) {
        const Matrix<double> qk = to_double(MatrixView<const T>(q.data() + k * a * l, a, l));
        Matrix<double> rk = to_double(MatrixView<const T>(r.data() + k * l * l, l, l));
        const Matrix<double> rck = to_double(MatrixView<const T>(R.data() + k * l * l, l, l));
        const Matrix<double> ak = to_double(MatrixView<const T>(A.data() + k * a * l, a, l));
        EXPECT_LE(testing::orthogonality_error(qk), tol);
        EXPECT_LE(frob_diff(mul(qk, rk), ak), tol * frob(ak));
        for (index_t i = 0; i < l; ++i) {
          const double sign = (rk(i, i) < 0) == (rck(i, i) < 0) ? 1.0 : -1.0;
          for (index_t j = 0; j < l; ++j) {
            if (j < i) {  // exactly upper triangular
              EXPECT_EQ(rk(i, j), 0.0);
            }
            rk(i, j) *= sign;
          }
        }
        EXPECT_LE(frob_diff(rk, rck), 6 * tol * frob(rck));
        EXPECT_NEAR(rg[k], rc[k], 6 * tol * rc[k]);
      }
    }
}

// ODC's Haar O drawn on the GPU, as reference_target does from l = haar_on_backend_from on
// (src/core/odc.cpp): the host route's O for the same seed. Both factorise one float64
// Gaussian; CholeskyQR2 (or its Householder fallback) and LAPACK's QR give the same Q up to
// cond(G) l u, cond(G) ~ l for a square Gaussian, so 1e-9 in float64 leaves a margin of about
// 100 at l = 300. In float32 the rounding of the entries (6e-8) dominates.
TYPED_TEST(CudaVsCpu, HaarRotationOnTheDevice) {
  using T = TypeParam;
  for (const index_t l : {index_t{5}, core::haar_on_backend_from, index_t{300}}) {
    SCOPED_TRACE("l = " + std::to_string(l));
    AlignOptions opts;
    opts.seed = 11 + static_cast<std::uint64_t>(l);
    opts.rotation = TargetRotation::haar;
    const Matrix<double> host = core::target_rotation(opts, l);
    const Buffer<T> o = core::haar_rotation_on_backend(this->gpu(), opts.seed, l);
    const auto got = this->down(o);
    double worst = 0;
    for (index_t i = 0; i < l * l; ++i)
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - host.data()[i]));
    EXPECT_LE(worst, (std::is_same_v<T, double> ? 1e-9 : 2e-7));
  }
}

// ODC where the GPU draws O (l = 160 >= haar_on_backend_from) and the CPU uploads the host's:
// the same G_i to the AlignEveryMethod tolerances of ODC.
TYPED_TEST(CudaVsCpu, OdcWithTheHaarRotationDrawnOnTheDevice) {
  using T = TypeParam;
  const bool dbl = std::is_same_v<T, double>;
  const index_t l = dcalign_gpu_small() ? core::haar_on_backend_from : 160;
  const auto syn =
      testing::make_synthetic(2 * l + 40, l + 20, l, 3, SpanCondition::diff_span_orth, 3);
  const auto anchors = testing::released_anchors<T>(syn);
  AlignOptions o;
  o.method = Method::odc;
  o.polar = PolarMethod::iterative;
  o.seed = 17;
  const auto rc = align(anchors, o, cpu_backend());
  const auto rg = align(anchors, o, gpu_backend());
  EXPECT_LE(rel_diff(rg.G.data(), rc.G.data(), rc.G.size()), dbl ? 1e-9 : 1e-3);
  EXPECT_NEAR(rg.report.objective, rc.report.objective,
              (dbl ? 1e-9 : 1e-3) * std::max(1.0, rc.report.objective));
}

// W (m x n) = sum_j (10 - j) u_j v_j^T over j < k plus 1e-3 noise: a clear gap after s_k.
template <typename T>
std::vector<T> low_rank_plus_noise(index_t m, index_t n, index_t k, std::uint64_t seed) {
  Rng rng(seed);
  Matrix<double> U0 = random_orthogonal<double>(m, rng), V0 = random_orthogonal<double>(n, rng);
  std::vector<T> W(static_cast<size_t>(m * n));
  for (index_t c = 0; c < n; ++c)
    for (index_t r = 0; r < m; ++r) {
      double v = 1e-3 * rng.normal();
      for (index_t j = 0; j < k; ++j) v += (10.0 - j) * U0(r, j) * V0(c, j);
      W[r + c * m] = static_cast<T>(v);
    }
  return W;
}

// Largest deviation of |X^T Y| from I for two m x k bases of the same subspace with the same
// (simple) singular values: each column agrees up to sign.
template <typename T>
double basis_mismatch(const std::vector<T>& X, const std::vector<T>& Y, index_t m, index_t k) {
  const Matrix<double> x = to_double(MatrixView<const T>(X.data(), m, k));
  const Matrix<double> y = to_double(MatrixView<const T>(Y.data(), m, k));
  Matrix<double> p = mul(x, y, true, false);
  for (index_t i = 0; i < p.size(); ++i) p.data()[i] = std::abs(p.data()[i]);
  return frob_diff(p, Matrix<double>::identity(k));
}

TYPED_TEST(CudaVsCpu, SvdTopkExactRandomizedAndGram) {
  using T = TypeParam;
  struct Shape {
    index_t m, n, k;
  };
  for (const Shape sh : {Shape{300, 200, 8}, Shape{120, 500, 8}, Shape{64, 64, 5}}) {
    SCOPED_TRACE("m = " + std::to_string(sh.m) + ", n = " + std::to_string(sh.n));
    const auto W = low_rank_plus_noise<T>(sh.m, sh.n, sh.k, 90 + sh.m);
    Buffer<T> dW = this->up(W);
    const MatrixView<const T> hW(W.data(), sh.m, sh.n), gW(dW.data(), sh.m, sh.n);
    // Through core::topk_svd, which runs the primitive svd_topk for exact, the range finder
    // (gemm, qr_batched, svd_topk) for randomized and the Gram route (syrk, syev_largest, gemm,
    // qr_batched) for gram.
    for (SvdAlgorithm alg : {SvdAlgorithm::exact, SvdAlgorithm::randomized, SvdAlgorithm::gram}) {
      SCOPED_TRACE(to_string(alg));
      SvdOptions opts;
      opts.algorithm = alg;
      opts.seed = 11;
      std::vector<T> Uc(sh.m * sh.k), Vc(sh.n * sh.k), sc(sh.k), sg(sh.k);
      Buffer<T> dU = this->gpu().allocate(sh.m * sh.k), dV = this->gpu().allocate(sh.n * sh.k);
      core::topk_svd(this->cpu(), hW, sh.k, opts, sc.data(), MatrixView<T>(Uc.data(), sh.m, sh.k),
                     MatrixView<T>(Vc.data(), sh.n, sh.k));
      core::topk_svd(this->gpu(), gW, sh.k, opts, sg.data(), MatrixView<T>(dU.data(), sh.m, sh.k),
                     MatrixView<T>(dV.data(), sh.n, sh.k));
      // Singular values: perturbation <= ||dW||_2 ~ max(m, n) u s_max (both backward stable).
      for (index_t j = 0; j < sh.k; ++j) {
        EXPECT_NEAR(sg[j], sc[j], 10 * std::max(sh.m, sh.n) * eps<T>() * sc[0]);
        if (j > 0) {  // descending
          EXPECT_GE(sg[j - 1], sg[j]);
        }
      }
      // Vectors: gaps between the top k values are >= 1 (s_max = 10), so each singular vector
      // moves by ~ ||dW|| / gap ~ 10 max(m, n) u.
      // The Gram route's bound is larger by sigma_1 / sigma_k <= 10 here.
      const double vtol =
          (alg == SvdAlgorithm::gram ? 1000 : 100) * std::max(sh.m, sh.n) * eps<T>();
      EXPECT_LE(basis_mismatch(this->down(dU), Uc, sh.m, sh.k), vtol);
      EXPECT_LE(basis_mismatch(this->down(dV), Vc, sh.n, sh.k), vtol);
      // Only U, or only V, wanted.
      std::vector<T> s2(sh.k);
      Buffer<T> dU2 = this->gpu().allocate(sh.m * sh.k), dV2 = this->gpu().allocate(sh.n * sh.k);
      core::topk_svd(this->gpu(), gW, sh.k, opts, s2.data(), MatrixView<T>(dU2.data(), sh.m, sh.k),
                     MatrixView<T>());
      EXPECT_LE(basis_mismatch(this->down(dU2), Uc, sh.m, sh.k), vtol);
      core::topk_svd(this->gpu(), gW, sh.k, opts, s2.data(), MatrixView<T>(),
                     MatrixView<T>(dV2.data(), sh.n, sh.k));
      EXPECT_LE(basis_mismatch(this->down(dV2), Vc, sh.n, sh.k), vtol);
      for (index_t j = 0; j < sh.k; ++j)
        EXPECT_NEAR(s2[j], sc[j], 10 * std::max(sh.m, sh.n) * eps<T>() * sc[0]);
    }
  }
}

TYPED_TEST(CudaVsCpu, LeastSquaresBatched) {
  using T = TypeParam;
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      const index_t a = 3 * l;  // Gaussian a x l, a = 3l: cond(A_k) ~ 4
      const auto A = normal_values<T>(c * a * l, 100 + l + c);
      const auto Z = normal_values<T>(a * l, 110 + l);
      std::vector<T> G(static_cast<size_t>(c * l * l));
      Buffer<T> dA = this->up(A), dZ = this->up(Z), dG = this->gpu().allocate(c * l * l);
      const auto rc = this->cpu().lstsq_batched(StackView<const T>(A.data(), c, a, l),
                                                MatrixView<const T>(Z.data(), a, l),
                                                StackView<T>(G.data(), c, l, l));
      const auto rg = this->gpu().lstsq_batched(StackView<const T>(dA.data(), c, a, l),
                                                MatrixView<const T>(dZ.data(), a, l),
                                                StackView<T>(dG.data(), c, l, l));
      double kappa = 1;
      for (index_t k = 0; k < c; ++k) {
        ASSERT_GT(rc[k], 0);
        kappa = std::max(kappa, 1.0 / rc[k]);
        // Ratios of singular values: each to ~ a u relative.
        EXPECT_NEAR(rg[k], rc[k], 20 * a * eps<T>() * kappa * rc[k]);
      }
      // Least-squares solutions with a non-zero residual are sensitive to kappa^2 u.
      EXPECT_LE(rel_diff(this->down(dG), G), 10 * a * eps<T>() * kappa * kappa);
    }
}

// The QR route that Imakura-DC and enrolment take on the GPU (core::least_squares: batched QR,
// one GEMM, batched triangular solve, ratios from the polar iteration on the R_k) against the
// CPU's SVD route: the same solutions to kappa^2 u, ratios between exact / l and exact.
TYPED_TEST(CudaVsCpu, LeastSquaresQrRoute) {
  using T = TypeParam;
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      const index_t a = 3 * l;
      const auto A = normal_values<T>(c * a * l, 130 + l + c);
      const auto Z = normal_values<T>(a * l, 140 + l);
      std::vector<T> G(static_cast<size_t>(c * l * l));
      Buffer<T> dA = this->up(A), dZ = this->up(Z), dG = this->gpu().allocate(c * l * l);
      ASSERT_TRUE(core::qr_least_squares_preferred(this->gpu()));
      const double tol = double(l) * eps<T>();
      const auto rc = this->cpu().lstsq_batched(StackView<const T>(A.data(), c, a, l),
                                                MatrixView<const T>(Z.data(), a, l),
                                                StackView<T>(G.data(), c, l, l));
      const auto rg = core::least_squares(this->gpu(), StackView<const T>(dA.data(), c, a, l),
                                          MatrixView<const T>(dZ.data(), a, l),
                                          StackView<T>(dG.data(), c, l, l), tol);
      double kappa = 1;
      for (index_t k = 0; k < c; ++k) {
        ASSERT_GT(rc[k], 0);
        kappa = std::max(kappa, 1.0 / rc[k]);
        EXPECT_LE(double(rg[k]), double(rc[k]) * (1 + 1e-3));
        EXPECT_GE(double(rg[k]), double(rc[k]) / double(l) * (1 - 1e-3));
      }
      EXPECT_LE(rel_diff(this->down(dG), G), 10 * a * eps<T>() * kappa * kappa);
    }
}

TYPED_TEST(CudaVsCpu, GeneralizedEigenproblem) {
  using T = TypeParam;
  for (index_t n : {12, 64}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const index_t k = 4;
    Rng rng(120 + n);
    // S = X X^T (PSD), B = Y^T Y with Y (3n x n) Gaussian: cond(B) ~ 15.
    const Matrix<double> X = random_normal<double>(n, n, rng),
                         Y = random_normal<double>(3 * n, n, rng);
    const Matrix<double> S = mul(X, X, false, true), B = mul(Y, Y, true, false);
    std::vector<T> hs(S.values().begin(), S.values().end()),
        hb(B.values().begin(), B.values().end());
    Buffer<T> ds = this->up(hs), db = this->up(hb), dv = this->gpu().allocate(n * k);
    std::vector<T> vc(n * k), wc(k), wg(k);
    this->cpu().sygv_smallest(MatrixView<T>(hs.data(), n, n), MatrixView<T>(hb.data(), n, n), k,
                              wc.data(), MatrixView<T>(vc.data(), n, k));
    this->gpu().sygv_smallest(MatrixView<T>(ds.data(), n, n), MatrixView<T>(db.data(), n, n), k,
                              wg.data(), MatrixView<T>(dv.data(), n, k));
    const auto vg = this->down(dv);
    const Matrix<double> v = to_double(MatrixView<const T>(vg.data(), n, k));
    // Backward-stable reduction B^{-1/2} S B^{-1/2}: eigenvalues to ~ n u cond(B) ||S|| / ||B||
    // in absolute terms; the normalisation V^T B V = I to ~ n u cond(B).
    const double scale = frob(S) / frob(B) * 15.0;
    for (index_t j = 0; j < k; ++j) {
      EXPECT_NEAR(wg[j], wc[j], 100 * n * eps<T>() * scale);
      if (j > 0) {  // ascending
        EXPECT_LE(wg[j - 1], wg[j]);
      }
    }
    EXPECT_LE(frob_diff(mul(v, mul(B, v), true, false), Matrix<double>::identity(k)),
              100 * n * eps<T>() * 15.0);
    const Matrix<double> sv = mul(S, v), bv = mul(B, v);
    for (index_t j = 0; j < k; ++j)
      for (index_t i = 0; i < n; ++i)
        EXPECT_NEAR(sv(i, j), wg[j] * bv(i, j), 100 * n * eps<T>() * 15.0 * frob(S));
  }
  // Not positive definite B: the same InvalidInput message as the CPU backend.
  const index_t n = 6;
  std::vector<T> S(n * n, T(0)), B(n * n, T(0));
  for (index_t i = 0; i < n; ++i) {
    S[i + i * n] = T(1 + i);
    B[i + i * n] = i == 2 ? T(-1) : T(1);
  }
  Buffer<T> ds = this->up(S), db = this->up(B), dv = this->gpu().allocate(n * 2);
  std::vector<T> v(n * 2), w(2);
  std::string cpu_message, gpu_message;
  try {
    this->cpu().sygv_smallest(MatrixView<T>(S.data(), n, n), MatrixView<T>(B.data(), n, n), 2,
                              w.data(), MatrixView<T>(v.data(), n, 2));
  } catch (const InvalidInput& e) {
    cpu_message = e.what();
  }
  try {
    this->gpu().sygv_smallest(MatrixView<T>(ds.data(), n, n), MatrixView<T>(db.data(), n, n), 2,
                              w.data(), MatrixView<T>(dv.data(), n, 2));
  } catch (const InvalidInput& e) {
    gpu_message = e.what();
  }
  EXPECT_NE(cpu_message.find("not positive definite"), std::string::npos) << cpu_message;
  EXPECT_EQ(gpu_message, cpu_message);
}

// ------------------------------------------------------------------ reductions

TYPED_TEST(CudaVsCpu, NonFiniteScans) {
  using T = TypeParam;
  const index_t c = 100, r = 37, cl = 29;
  auto x = normal_values<T>(c * r * cl, 130);
  Buffer<T> clean = this->up(x);
  EXPECT_TRUE(this->gpu().all_finite(clean.data(), c * r * cl));
  // Planted: NaN in matrix 3, Inf in matrix 50 (two places, the first one counts), -Inf in 99.
  x[3 * r * cl + 5 + 7 * r] = std::numeric_limits<T>::quiet_NaN();
  x[50 * r * cl + 20 + 10 * r] = std::numeric_limits<T>::infinity();
  x[50 * r * cl + 2 + 11 * r] = std::numeric_limits<T>::infinity();
  x[99 * r * cl + r * cl - 1] = -std::numeric_limits<T>::infinity();
  Buffer<T> dirty = this->up(x);
  EXPECT_FALSE(this->gpu().all_finite(dirty.data(), c * r * cl));
  EXPECT_TRUE(this->gpu().all_finite(dirty.data() + 4 * r * cl, 46 * r * cl));  // the clean span
  const auto fc = this->cpu().first_nonfinite_batched(StackView<const T>(x.data(), c, r, cl));
  const auto fg = this->gpu().first_nonfinite_batched(StackView<const T>(dirty.data(), c, r, cl));
  EXPECT_EQ(fg, fc);  // exact: indices
  EXPECT_EQ(fg[3], 5 + 7 * r);
  EXPECT_EQ(fg[50], 20 + 10 * r);
  EXPECT_EQ(fg[0], -1);
}

TYPED_TEST(CudaVsCpu, OrthogonalityResidualsColumnNormsSumSquares) {
  using T = TypeParam;
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      const index_t a = l + 20;
      // Near-orthogonal G_k (orthogonal + 1e-2 noise): errors ~ 0.1, compared relatively.
      std::vector<T> G(static_cast<size_t>(c * l * l));
      Rng rng(140 + l + c);
      for (index_t k = 0; k < c; ++k) {
        const Matrix<double> q = random_orthogonal<double>(l, rng);
        for (index_t i = 0; i < l * l; ++i)
          G[k * l * l + i] = static_cast<T>(q.data()[i] + 1e-2 * rng.normal());
      }
      const auto A = normal_values<T>(c * a * l, 150 + l), Z = normal_values<T>(a * l, 160 + l);
      Buffer<T> dG = this->up(G), dA = this->up(A), dZ = this->up(Z);
      const StackView<const T> hGs(G.data(), c, l, l), gGs(dG.data(), c, l, l);
      const StackView<const T> hAs(A.data(), c, a, l), gAs(dA.data(), c, a, l);
      // ||G^T G - I||_F ~ 0.1 from l^2 products of length l: relative l^1.5 u.
      EXPECT_LE(
          rel_diff(this->gpu().orthogonality_errors(gGs), this->cpu().orthogonality_errors(hGs)),
          10 * l * std::sqrt(double(l)) * eps<T>() / 0.05);
      // Residuals ||A_k G_k - Z||^2 (products in T, sums in double): relative ~ l u sqrt(l).
      const double ptol = 10 * l * std::sqrt(double(l)) * eps<T>();
      EXPECT_LE(rel_diff(this->gpu().residuals(gAs, gGs, MatrixView<const T>(dZ.data(), a, l)),
                         this->cpu().residuals(hAs, hGs, MatrixView<const T>(Z.data(), a, l))),
                ptol);
      EXPECT_LE(rel_diff(this->gpu().product_column_norms(gAs, gGs),
                         this->cpu().product_column_norms(hAs, hGs)),
                ptol);
      // Sums of n positive squares (exact in double) in two orders: relative n u_double at worst.
      const double sc = this->cpu().sum_squares(A.data(), c * a * l);
      const double sg = this->gpu().sum_squares(dA.data(), c * a * l);
      EXPECT_NEAR(sg, sc, double(c * a * l) * eps<double>() * sc);
      EXPECT_EQ(this->gpu().sum_squares(dA.data(), c * a * l), sg);  // reproducible
    }
}

TYPED_TEST(CudaVsCpu, InnerProductsOfStridedStacks) {
  using T = TypeParam;
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      const index_t a = 2 * l + 1;
      const auto A = normal_values<T>(c * a * l, 165 + l), M = normal_values<T>(c * l * l, 166);
      Buffer<T> dA = this->up(A), dM = this->up(M);
      // ||A_k||_F^2 (contiguous, X = Y) and <G_k, M_k> with M_k the row blocks of (c l) x l.
      const auto nc = this->cpu().inner_products(StackView<const T>(A.data(), c, a, l),
                                                 StackView<const T>(A.data(), c, a, l));
      const auto ng = this->gpu().inner_products(StackView<const T>(dA.data(), c, a, l),
                                                 StackView<const T>(dA.data(), c, a, l));
      // Products of T values are exact in double; sums of a l terms in two orders differ by
      // a l u_double relative (for positive terms).
      EXPECT_LE(rel_diff(ng, nc), 2.0 * a * l * eps<double>());
      const StackView<const T> hX(A.data(), c, l, l, a, a * l), gX(dA.data(), c, l, l, a, a * l);
      const StackView<const T> hY(M.data(), c, l, l, c * l, l), gY(dM.data(), c, l, l, c * l, l);
      const auto tc = this->cpu().inner_products(hX, hY), tg = this->gpu().inner_products(gX, gY);
      // Terms of either sign: the error is relative to sum |x y| ~ sqrt(l^2) |<x, y>| here.
      for (index_t k = 0; k < c; ++k) {
        double scale = 0;
        for (index_t j = 0; j < l; ++j)
          for (index_t i = 0; i < l; ++i)
            scale += std::abs(double(A[k * a * l + i + j * a]) * double(M[k * l + i + j * c * l]));
        EXPECT_NEAR(tg[k], tc[k], 2.0 * l * l * eps<double>() * scale);
      }
    }
}

// Residuals over more users than one scratch chunk holds (2^25 values of A_k G_k).
TEST(CudaLarge, ResidualsAndColumnNormsInChunks) {
  DCALIGN_REQUIRE_GPU();
  // A chunk holds 2^25 values whatever the shape, so no smaller input crosses its boundary.
  if (dcalign_gpu_small())
    GTEST_SKIP() << "DCALIGN_GPU_TEST_SMALL: crossing a chunk needs > 2^25 values (136 MB here)";
  auto& cpu = cpu_backend().f32();
  auto& gpu = gpu_backend().f32();
  const index_t a = 8192, l = 32, c = 130;  // 130 * 8192 * 32 > 2^25: two chunks
  const auto A = normal_values<float>(c * a * l, 170), G = normal_values<float>(c * l * l, 171),
             Z = normal_values<float>(a * l, 172);
  Buffer<float> dA = gpu.allocate(c * a * l), dG = gpu.allocate(c * l * l),
                dZ = gpu.allocate(a * l);
  gpu.to_device(A.data(), dA.data(), c * a * l);
  gpu.to_device(G.data(), dG.data(), c * l * l);
  gpu.to_device(Z.data(), dZ.data(), a * l);
  const StackView<const float> hAs(A.data(), c, a, l), gAs(dA.data(), c, a, l);
  const StackView<const float> hGs(G.data(), c, l, l), gGs(dG.data(), c, l, l);
  // As in the typed test: products in float over l terms, sums in double.
  const double tol = 10 * l * std::sqrt(double(l)) * eps<float>();
  EXPECT_LE(rel_diff(gpu.residuals(gAs, gGs, MatrixView<const float>(dZ.data(), a, l)),
                     cpu.residuals(hAs, hGs, MatrixView<const float>(Z.data(), a, l))),
            tol);
  EXPECT_LE(rel_diff(gpu.product_column_norms(gAs, gGs), cpu.product_column_norms(hAs, hGs)), tol);
}

// ------------------------------------------------------------------ the polar iteration

TYPED_TEST(CudaVsCpu, PolarIterationStepByStep) {
  using T = TypeParam;
  using polar::kStateSize;
  const double tolerance = std::sqrt(10.0 * eps<T>() / 2);
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      auto M = conditioned_stack<T>(c, l, 100.0, 180 + l + c);
      // Matrix 1 (if any) is zero, matrix 2 exactly singular (a zero column).
      if (c > 2) {
        std::fill(M.begin() + l * l, M.begin() + 2 * l * l, T(0));
        std::fill(M.begin() + 2 * l * l + 3 * l, M.begin() + 2 * l * l + 4 * l, T(0));
      }
      Buffer<T> dM = this->up(M);
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(transposed ? "transposed" : "not transposed");
        const index_t n = c * l * l;
        std::vector<T> X(n), Y(n), state(c * kStateSize);
        Buffer<T> dX = this->gpu().allocate(n), dY = this->gpu().allocate(n),
                  ds = this->gpu().allocate(c * kStateSize);
        const StackView<T> hX(X.data(), c, l, l), gX(dX.data(), c, l, l);
        const StackView<T> hY(Y.data(), c, l, l), gY(dY.data(), c, l, l);
        // polar_start: X = fl(fl(1 / ||M||_F) M). ||M||_F^2 is a sum of l^2 squares in double,
        // which the GPU's block reduction adds in another order than the CPU's loop: each sum
        // is within (l^2 - 1) u_d of the exact one (Higham, Thm. 4.2), so the two square roots
        // differ by at most (l^2 - 1) u_d relative. Each backend then rounds twice to T (the
        // factor, the product): X agrees to 4 u_T + l^2 u_d = 2 eps_T + l^2 eps_d / 2, and
        // alpha = fl(||M||_F), one rounding each, to eps_T + l^2 eps_d / 2. (2 eps_T alone
        // failed in double on an H200: 4.56e-16 against 4.44e-16.)
        const double sum_bound = double(l * l) * eps<double>() / 2;
        this->cpu().polar_start(StackView<const T>(M.data(), c, l, l), transposed, hX, state.data(),
                                0.0);
        this->gpu().polar_start(StackView<const T>(dM.data(), c, l, l), transposed, gX, ds.data(),
                                0.0);
        EXPECT_LE(rel_diff(this->down(dX), X), 2 * eps<T>() + sum_bound);
        auto sg = this->down(ds);
        for (index_t k = 0; k < c; ++k) {
          EXPECT_EQ(polar::flags(sg.data() + k * kStateSize),
                    polar::flags(state.data() + k * kStateSize));
          EXPECT_NEAR(sg[k * kStateSize + polar::kAlpha], state[k * kStateSize + polar::kAlpha],
                      (eps<T>() + sum_bound) * state[k * kStateSize + polar::kAlpha]);
        }
        if (c > 2) {
          EXPECT_TRUE(polar::flags(state.data() + kStateSize) & polar::kZero);
        }
        // inverse_batched from identical X and state: cond(X) = 100, so inverses agree to
        // ~ l u cond; the singular matrix is flagged by both.
        this->gpu().to_device(X.data(), dX.data(), n);
        this->gpu().to_device(state.data(), ds.data(), c * kStateSize);
        this->cpu().inverse_batched(StackView<const T>(hX), hY, state.data());
        this->gpu().inverse_batched(StackView<const T>(gX), gY, ds.data());
        sg = this->down(ds);
        const auto y = this->down(dY);
        for (index_t k = 0; k < c; ++k) {
          const T* st = state.data() + k * kStateSize;
          EXPECT_EQ(polar::flags(sg.data() + k * kStateSize), polar::flags(st)) << "matrix " << k;
          if (!polar::active(st)) continue;  // the inverse of inactive matrices is unspecified
          EXPECT_LE(rel_diff(y.data() + k * l * l, Y.data() + k * l * l, l * l),
                    10 * l * eps<T>() * 100.0);
        }
        if (c > 2) {
          EXPECT_TRUE(polar::flags(state.data() + 2 * kStateSize) & polar::kSingular);
        }
        // One Newton step from identical X, Y and state: the same a X + b Y^T per entry, with a
        // and b from norms summed in double in another order (l^2 u_d apart at most, as above,
        // i.e. sum_bound after the square roots) and a fused multiply-add on the GPU; since
        // |a x|, |b y| <= |x_new| in norm, X agrees to 8 eps_T + 2 sum_bound. The scalars
        // follow; the step delta (~0.5 at the first step, from two more double sums) to
        // 32 eps_T + 8 sum_bound.
        this->gpu().to_device(Y.data(), dY.data(), n);
        this->gpu().to_device(state.data(), ds.data(), c * kStateSize);
        const index_t ac =
            this->cpu().polar_newton_step(hX, StackView<const T>(hY), state.data(), 0, tolerance);
        const index_t ag =
            this->gpu().polar_newton_step(gX, StackView<const T>(gY), ds.data(), 0, tolerance);
        EXPECT_EQ(ag, ac);
        EXPECT_LE(rel_diff(this->down(dX), X), 8 * eps<T>() + 2 * sum_bound);
        sg = this->down(ds);
        for (index_t k = 0; k < c; ++k) {
          const T* a = sg.data() + k * kStateSize;
          const T* b = state.data() + k * kStateSize;
          EXPECT_EQ(polar::flags(a), polar::flags(b)) << "matrix " << k;
          EXPECT_EQ(a[polar::kIterations], b[polar::kIterations]);
          for (int f : {polar::kInvNorm, polar::kKappa, polar::kZeta, polar::kDelta})
            EXPECT_NEAR(a[f], b[f], (32 * eps<T>() + 8 * sum_bound) * std::abs(b[f]))
                << "field " << f;
        }
        // add_identity_batched: one addition per diagonal entry, exact.
        this->cpu().add_identity_batched(T(0.5), hY);
        this->gpu().add_identity_batched(T(0.5), gY);
        EXPECT_EQ(this->down(dY), Y);
      }
    }
}

// The start of a batched polar iteration on the host: c matrices l x l of condition 1e3 drawn
// from `seed`, X_0 and the states by the CPU's polar_start, Y as workspace, and the stopping
// tolerance polar_factor uses.
template <typename T>
struct HostPolarStart {
  index_t c, l;
  std::vector<T> X, Y, state;
  double tolerance;
  HostPolarStart(Primitives<T>& cpu, index_t c_, index_t l_, std::uint64_t seed)
      : c(c_), l(l_), X(c_ * l_ * l_), Y(X.size()), state(c_ * polar::kStateSize) {
    const auto M = conditioned_stack<T>(c, l, 1e3, seed);
    tolerance = std::sqrt(2.0 * std::sqrt(eps<T>() / 3.0)) / std::sqrt(static_cast<double>(l));
    cpu.polar_start(StackView<const T>(M.data(), c, l, l), false, x(), state.data(), 0.0);
  }
  StackView<T> x() { return StackView<T>(X.data(), c, l, l); }
  StackView<T> y() { return StackView<T>(Y.data(), c, l, l); }
};

// The whole Newton phase (Primitives::polar_newton_steps): on the GPU one kernel per batch
// (kernels/polar_fused.cu, base/polar_block.hpp) up to its order limit, the composed steps
// above. From the same start, the same decisions as the CPU's fused phase (steps, flags, the
// polish's count; a threshold met by rounding may move a step count by one) and the same X to
// the rounding of the inverses amplified by the condition (1e3 here).
TYPED_TEST(CudaVsCpu, PolarNewtonPhase) {
  using T = TypeParam;
  constexpr int kStateSize = polar::kStateSize;
  for (index_t l : {index_t(5), index_t(33), index_t(64), index_t(96), index_t(128), index_t(160)})
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      HostPolarStart<T> h(this->cpu(), c, l, 230 + l + c);
      std::vector<T>&X = h.X, &state = h.state;
      const double tolerance = h.tolerance;
      Buffer<T> dX = this->up(X), dY = this->gpu().allocate(X.size()), ds = this->up(state);
      const index_t ac = this->cpu().polar_newton_steps(h.x(), h.y(), state.data(), 100, tolerance);
      const index_t ag = this->gpu().polar_newton_steps(StackView<T>(dX.data(), c, l, l),
                                                        StackView<T>(dY.data(), c, l, l), ds.data(),
                                                        100, tolerance);
      EXPECT_EQ(ag, ac);
      const auto sg = this->down(ds);
      const auto xg = this->down(dX);
      for (index_t k = 0; k < c; ++k) {
        const T* a = sg.data() + k * kStateSize;
        const T* b = state.data() + k * kStateSize;
        EXPECT_EQ(polar::flags(a), polar::flags(b)) << "matrix " << k;
        EXPECT_LE(std::abs(a[polar::kIterations] - b[polar::kIterations]), T(1)) << k;
        EXPECT_LE(std::abs(a[polar::kSchulz] - b[polar::kSchulz]), T(1)) << k;
        if (a[polar::kIterations] != b[polar::kIterations]) continue;  // X one step apart
        EXPECT_LE(rel_diff(xg.data() + k * l * l, X.data() + k * l * l, l * l),
                  100 * l * eps<T>() * std::sqrt(1e3))
            << "matrix " << k;
      }
    }
}

// The fused Newton phase with the polish (Primitives::polar_newton_polish): where the kernel
// applies (l <= 128 in float, 96 in double, within the device's shared memory), G_k against the
// CPU's Newton phase followed by the same block polish on the host (polar::schulz_phase through
// SerialBlock, each matrix's polar::polish_steps): the same states, G to the Newton phase's
// bound, and orthogonal. Above the limit it declines and queues nothing.
TYPED_TEST(CudaVsCpu, PolarNewtonPolish) {
  using T = TypeParam;
  constexpr int kStateSize = polar::kStateSize;
  constexpr index_t limit = std::is_same_v<T, float> ? 128 : 96;
  for (index_t l : {index_t(5), index_t(33), index_t(64), index_t(96), index_t(128), index_t(160)})
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      HostPolarStart<T> h(this->cpu(), c, l, 260 + l + c);
      std::vector<T>&X = h.X, &state = h.state;
      const double tolerance = h.tolerance;
      Buffer<T> dX = this->up(X), dG = this->gpu().allocate(X.size()), ds = this->up(state);
      const std::vector<T> before = this->down(dX);
      const bool fused = this->gpu().polar_newton_polish(StackView<T>(dX.data(), c, l, l),
                                                         StackView<T>(dG.data(), c, l, l),
                                                         ds.data(), 100, tolerance);
      EXPECT_EQ(fused, l <= limit);
      if (!fused) {
        EXPECT_EQ(this->down(ds), state);  // nothing queued
        EXPECT_EQ(this->down(dX), before);
        continue;
      }
      this->cpu().polar_newton_steps(h.x(), h.y(), state.data(), 100, tolerance);
      const auto sg = this->down(ds);
      const auto gg = this->down(dG);
      polar::SerialBlock b;
      std::vector<T> D(l * l), out(l * l);
      for (index_t k = 0; k < c; ++k) {
        const T* a = sg.data() + k * kStateSize;
        T* s = state.data() + k * kStateSize;
        EXPECT_EQ(polar::flags(a), polar::flags(s)) << "matrix " << k;
        if (a[polar::kIterations] != s[polar::kIterations] ||
            a[polar::kSchulz] != s[polar::kSchulz])
          continue;  // a threshold met by rounding: one step apart, compared by the test above
        polar::schulz_phase(b, X.data() + k * l * l, D.data(), out.data(), static_cast<int>(l),
                            polar::polish_steps(s));
        EXPECT_LE(rel_diff(gg.data() + k * l * l, out.data(), l * l),
                  100 * l * eps<T>() * std::sqrt(1e3))
            << "matrix " << k;
        const MatrixView<const T> g(gg.data() + k * l * l, l, l);
        double worst = 0;
        for (index_t j = 0; j < l; ++j)
          for (index_t i = 0; i < l; ++i) {
            double v = i == j ? -1.0 : 0.0;
            for (index_t r = 0; r < l; ++r) v += double(g(r, i)) * double(g(r, j));
            worst = std::max(worst, std::abs(v));
          }
        EXPECT_LE(worst, 20 * l * eps<T>()) << "matrix " << k;
      }
    }
}

// BackendOptions::cuda_inverse_per_matrix_from: cuSOLVER's getrf + getrs per matrix gives the
// inverses of cuBLAS's batched LU (both backward stable: within ~ kappa n u of each other), marks
// an exactly singular matrix (a zero column, so an exactly zero pivot) as that route does, and
// the polar factor through it, at an order above the fused kernel's, is the CPU's.
TYPED_TEST(CudaVsCpu, InversePerMatrixRoute) {
  using T = TypeParam;
  BackendOptions bad;
  bad.cuda_inverse_per_matrix_from = -1;
  EXPECT_THROW(make_backend(Device::cuda, bad), InvalidInput);
  BackendOptions bo;
  bo.cuda_inverse_per_matrix_from = 33;
  const auto per = make_backend(Device::cuda, bo);
  Primitives<T>& q = per->template primitives<T>();
  const index_t c = 4;
  for (const index_t n : {index_t{33}, index_t{160}}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const double kappa = 100;
    auto X = conditioned_stack<T>(c, n, kappa, 300 + n);
    std::fill(X.begin() + 2 * n * n + 3 * n, X.begin() + 2 * n * n + 4 * n, T(0));
    const Buffer<T> dX = this->up(X);
    Buffer<T> y1 = this->gpu().allocate(c * n * n), y2 = this->gpu().allocate(c * n * n);
    Buffer<T> s1 = this->gpu().allocate(c * polar::kStateSize),
              s2 = this->gpu().allocate(c * polar::kStateSize);
    this->gpu().fill(s1.data(), c * polar::kStateSize, T(0));
    this->gpu().fill(s2.data(), c * polar::kStateSize, T(0));
    q.inverse_batched(StackView<const T>(dX.data(), c, n, n), StackView<T>(y1.data(), c, n, n),
                      s1.data());
    this->gpu().inverse_batched(StackView<const T>(dX.data(), c, n, n),
                                StackView<T>(y2.data(), c, n, n), s2.data());
    const auto a = this->down(y1), b = this->down(y2);
    const auto st1 = this->down(s1), st2 = this->down(s2);
    for (index_t k = 0; k < c; ++k) {
      const bool singular = k == 2;
      EXPECT_EQ((polar::flags(st1.data() + k * polar::kStateSize) & polar::kSingular) != 0,
                singular)
          << "k = " << k;
      EXPECT_EQ((polar::flags(st2.data() + k * polar::kStateSize) & polar::kSingular) != 0,
                singular)
          << "k = " << k;
      if (!singular) {
        EXPECT_LE(rel_diff(a.data() + k * n * n, b.data() + k * n * n, n * n),
                  20 * kappa * n * eps<T>())
            << "k = " << k;
      }
    }
  }
  const index_t l = 160, count = 3;
  const double kappa = 1e3;
  const auto M = conditioned_stack<T>(count, l, kappa, 310);
  const Buffer<T> dM = this->up(M);
  std::vector<T> G(count * l * l);
  Buffer<T> dG = q.allocate(count * l * l);
  PolarOptions opts;
  opts.method = PolarMethod::iterative;
  const auto ic = polar_factor(this->cpu(), StackView<const T>(M.data(), count, l, l), false,
                               StackView<T>(G.data(), count, l, l), opts);
  const auto ig = polar_factor(q, StackView<const T>(dM.data(), count, l, l), false,
                               StackView<T>(dG.data(), count, l, l), opts);
  EXPECT_LE(rel_diff(this->down(dG), G), 40 * kappa * eps<T>() * std::sqrt(double(l)));
  EXPECT_LE(std::abs(ig.max_iterations - ic.max_iterations), 1);
}

TYPED_TEST(CudaVsCpu, PolarFactorEndToEnd) {
  using T = TypeParam;
  for (index_t l : kOrders)
    for (index_t c : kCounts) {
      SCOPED_TRACE("l = " + std::to_string(l) + ", c = " + std::to_string(c));
      const double kappa = 1e3;
      const auto M = conditioned_stack<T>(c, l, kappa, 190 + l + c);
      Buffer<T> dM = this->up(M);
      for (PolarMethod method : {PolarMethod::iterative, PolarMethod::svd})
        for (bool transposed : {false, true}) {
          SCOPED_TRACE(to_string(method) + (transposed ? ", transposed" : ""));
          PolarOptions opts;
          opts.method = method;
          std::vector<T> G(c * l * l);
          Buffer<T> dG = this->gpu().allocate(c * l * l);
          const auto ic = polar_factor(this->cpu(), StackView<const T>(M.data(), c, l, l),
                                       transposed, StackView<T>(G.data(), c, l, l), opts);
          const auto ig = polar_factor(this->gpu(), StackView<const T>(dM.data(), c, l, l),
                                       transposed, StackView<T>(dG.data(), c, l, l), opts);
          // Each is within 20 kappa u sqrt(l) of the exact factor (the bound of
          // tests/core/test_polar.cpp), so within twice that of each other.
          EXPECT_LE(rel_diff(this->down(dG), G), 40 * kappa * eps<T>() * std::sqrt(double(l)));
          EXPECT_EQ(ig.used_svd, ic.used_svd);
          EXPECT_EQ(ig.estimated, ic.estimated);
          // Same decisions on rounding-level different data: the step count may differ by one.
          EXPECT_LE(std::abs(ig.max_iterations - ic.max_iterations), 1);
          EXPECT_LE(std::abs(ig.schulz_steps - ic.schulz_steps), 1);
          // test_polar.cpp's orthogonality bounds (1e-12 / 1e-5, measured in double) plus the
          // rounding of measuring in T: l^2 entries of l-term products, l^1.5 eps.
          EXPECT_LE(ig.orthogonality_error, (std::is_same_v<T, double> ? 1e-12 : 1e-5) +
                                                std::pow(double(l), 1.5) * eps<T>());
          // sigma_max: ||M||_F or the largest singular value, to a few eps; sigma_min: 1/||M^-1||_F
          // from the first inverse or the smallest singular value, to ~ kappa l u relative.
          for (index_t k = 0; k < c; ++k) {
            EXPECT_NEAR(ig.sigma_max[k], ic.sigma_max[k], 10 * l * eps<T>() * ic.sigma_max[k]);
            EXPECT_NEAR(ig.sigma_min[k], ic.sigma_min[k],
                        10 * kappa * l * eps<T>() * ic.sigma_min[k]);
          }
        }
    }
  // A rank-deficient matrix sends the batch to the SVD path on both backends.
  const index_t l = 33, c = 5;
  auto M = conditioned_stack<T>(c, l, 10.0, 199);
  std::fill(M.begin() + 2 * l * l + 4 * l, M.begin() + 2 * l * l + 5 * l, T(0));
  Buffer<T> dM = this->up(M);
  std::vector<T> G(c * l * l);
  Buffer<T> dG = this->gpu().allocate(c * l * l);
  PolarOptions opts;
  opts.method = PolarMethod::iterative;
  const auto ic = polar_factor(this->cpu(), StackView<const T>(M.data(), c, l, l), false,
                               StackView<T>(G.data(), c, l, l), opts);
  const auto ig = polar_factor(this->gpu(), StackView<const T>(dM.data(), c, l, l), false,
                               StackView<T>(dG.data(), c, l, l), opts);
  EXPECT_TRUE(ic.used_svd);
  EXPECT_TRUE(ig.used_svd);
  EXPECT_LE(ig.sigma_min[2], 10 * l * eps<T>() * ig.sigma_max[2]);
  // NaN input is an error on both.
  M[7] = std::numeric_limits<T>::quiet_NaN();
  Buffer<T> dN = this->up(M);
  EXPECT_THROW(polar_factor(this->gpu(), StackView<const T>(dN.data(), c, l, l), false,
                            StackView<T>(dG.data(), c, l, l), opts),
               NumericalError);
}

// ------------------------------------------------------------------ alignment end to end

// max over columns j of ||G_gpu(:, j) s_j - G_cpu(:, j)|| / ||G_cpu(:, j)|| over all users,
// with the sign s_j common to all users (singular and eigenvectors are defined up to sign).
template <typename T>
double column_sign_diff(const Stack<T>& a, const Stack<T>& b) {
  double worst = 0;
  for (index_t j = 0; j < b.cols(); ++j) {
    double dot = 0, nb = 0;
    for (index_t k = 0; k < b.count(); ++k)
      for (index_t i = 0; i < b.rows(); ++i) {
        dot += double(a(k, i, j)) * b(k, i, j);
        nb += double(b(k, i, j)) * b(k, i, j);
      }
    const double s = dot < 0 ? -1.0 : 1.0;
    double d = 0;
    for (index_t k = 0; k < b.count(); ++k)
      for (index_t i = 0; i < b.rows(); ++i) {
        const double e = s * a(k, i, j) - b(k, i, j);
        d += e * e;
      }
    worst = std::max(worst, std::sqrt(d / nb));
  }
  return worst;
}

TYPED_TEST(CudaVsCpu, AlignEveryMethod) {
  using T = TypeParam;
  const bool dbl = std::is_same_v<T, double>;
  struct Case {
    index_t a, m, l, c;
  };
  for (const Case cs : {Case{50, 12, 5, 1}, Case{80, 20, 8, 5}, Case{200, 60, 40, 6}}) {
    SCOPED_TRACE("(a, m, l, c) = (" + std::to_string(cs.a) + ", " + std::to_string(cs.m) + ", " +
                 std::to_string(cs.l) + ", " + std::to_string(cs.c) + ")");
    // DiffSpan-Orth: well-conditioned A_i (orthonormal mixing) and distinct singular values of
    // [A_1 ... A_c], so singular vectors are determined up to sign.
    const auto syn =
        testing::make_synthetic(cs.a, cs.m, cs.l, cs.c, SpanCondition::diff_span_orth, 7);
    const auto anchors = testing::released_anchors<T>(syn);
    struct Run {
      const char* name;
      AlignOptions opts;
      bool signs;  // compare up to common column signs
    };
    std::vector<Run> runs;
    AlignOptions o;
    o.seed = 5;
    // The polar path is named: the automatic choice differs between CPU and GPU, and the
    // reported rank ratio is an estimate on one path and exact on the other.
    o.polar = PolarMethod::iterative;
    runs.push_back({"odc", o, false});
    o.polar = PolarMethod::svd;
    o.evaluate_consensus = true;  // also the second product over the anchors
    runs.push_back({"odc (svd polar)", o, false});
    o = AlignOptions{};
    o.method = Method::gopp;
    o.polar = PolarMethod::iterative;
    // A fixed number of steps: the stopping test on a flattening objective could otherwise stop
    // the two backends one step apart.
    o.gopp.tolerance = 0;
    o.gopp.max_iterations = 10;
    o.gopp.init = GoppInit::odc;
    o.seed = 5;
    runs.push_back({"gopp (odc start)", o, false});
    o.gopp.init = GoppInit::spectral;
    runs.push_back({"gopp (spectral start)", o, true});
    o = AlignOptions{};
    o.method = Method::imakura;
    runs.push_back({"imakura", o, true});
    o.svd.algorithm = SvdAlgorithm::exact;
    runs.push_back({"imakura (exact svd)", o, true});
    o.svd.algorithm = SvdAlgorithm::randomized;
    o.seed = 9;
    runs.push_back({"imakura (randomized svd)", o, true});
    // Kawakami with one user is degenerate (all singular values of Q_1 are 1).
    if (cs.c > 1) {
      o = AlignOptions{};
      o.method = Method::kawakami;
      runs.push_back({"kawakami (qr-svd)", o, true});
      o.kawakami_form = KawakamiForm::eigen;
      runs.push_back({"kawakami (eigen)", o, true});
    }
    // The float64 reference from the same (float-representable) anchors: where the backends
    // disagree, it says which one is off (on an H200 float32 Imakura-DC and GOPP's
    // spectral start differed by 0.05 here; the CPU's float32 run is 4e-5 from float64).
    Stack<double> wide(anchors.count(), anchors.rows(), anchors.cols());
    for (index_t i = 0; i < anchors.size(); ++i) wide.data()[i] = anchors.data()[i];
    for (const Run& run : runs) {
      SCOPED_TRACE(run.name);
      const auto rc = align(anchors, run.opts, cpu_backend());
      const auto rg = align(anchors, run.opts, gpu_backend());
      if (!dbl) {
        const auto rd = align(wide, run.opts, cpu_backend());
        Stack<T> ref(rd.G.count(), rd.G.rows(), rd.G.cols());
        for (index_t i = 0; i < ref.size(); ++i) ref.data()[i] = static_cast<T>(rd.G.data()[i]);
        // Each backend within half the cross-backend tolerance below of float64's answer.
        const double half = run.signs ? 2.5e-3 : 5e-4;
        auto off = [&](const Stack<T>& G) {
          return run.signs ? column_sign_diff(G, ref) : rel_diff(G.data(), ref.data(), ref.size());
        };
        EXPECT_LE(off(rc.G), half) << "the CPU's float32 answer is off float64's";
        EXPECT_LE(off(rg.G), half) << "the GPU's float32 answer is off float64's";
      }
      EXPECT_EQ(rg.report.device, "cuda");
      // Newton steps (ODC) or GOPP steps: the same decisions up to a threshold met by rounding.
      EXPECT_LE(std::abs(rg.report.iterations - rc.report.iterations), 1);
      // ODC/GOPP: 1e-9 (double) / 1e-3 (float) relative; float and double CPU runs of these
      // cases differ by <= 1e-5, so rounding-level differences sit far below. Methods through
      // singular or eigenvectors, up to column signs: 1e-8 / 5e-3, where float and double CPU
      // runs differ by <= 2.5e-4 (vectors move by eps ||W|| / gap).
      const double tol = run.signs ? (dbl ? 1e-8 : 5e-3) : (dbl ? 1e-9 : 1e-3);
      const double diff = run.signs ? column_sign_diff(rg.G, rc.G)
                                    : rel_diff(rg.G.data(), rc.G.data(), rc.G.size());
      EXPECT_LE(diff, tol);
      // Sign-invariant quantities of the report, to the same relative tolerance (the
      // consensus objective is NaN on both where not evaluated).
      EXPECT_NEAR(rg.report.objective, rc.report.objective,
                  tol * std::max(1.0, rc.report.objective));
      EXPECT_EQ(std::isnan(rg.report.consensus_objective),
                std::isnan(rc.report.consensus_objective));
      if (!std::isnan(rc.report.consensus_objective)) {
        EXPECT_NEAR(rg.report.consensus_objective, rc.report.consensus_objective,
                    tol * std::max(1.0, rc.report.consensus_objective));
      }
      if (run.opts.method == Method::imakura) {
        // The GPU's QR route reports the polar iteration's bound on the ratio of each R_k (an H200:
        // 0.125 against the exact 0.276 at l = 5), between exact / l and exact.
        EXPECT_LE(rg.report.min_rank_ratio, rc.report.min_rank_ratio * (1 + tol));
        EXPECT_GE(rg.report.min_rank_ratio, rc.report.min_rank_ratio / double(cs.l) * (1 - tol));
      } else {
        EXPECT_NEAR(rg.report.min_rank_ratio, rc.report.min_rank_ratio,
                    tol * rc.report.min_rank_ratio);
      }
      EXPECT_LE(rg.report.orthogonality_error,
                run.opts.method == Method::odc || run.opts.method == Method::gopp
                    ? (dbl ? 1e-12 : 1e-5) * std::sqrt(double(cs.l)) + 10 * cs.l * eps<T>()
                    : std::numeric_limits<double>::infinity());
    }
  }
}

// ------------------------------------------------------------------ errors and the backend

TEST(CudaBackend, ImpossibleAllocationIsABackendError) {
  DCALIGN_REQUIRE_GPU();
  auto& p = gpu_backend().f64();
  try {
    Buffer<double> b = p.allocate(index_t(1000000000000000));  // 8 PB
    ADD_FAILURE() << "allocation of 8 PB succeeded";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMallocAsync"), std::string::npos) << e.what();
  }
  // The backend stays usable (no pending error leaks into later launches).
  std::vector<double> v = {1, 2, 3};
  Buffer<double> b = p.allocate(3);
  p.to_device(v.data(), b.data(), 3);
  const MatrixView<double> m(b.data(), 1, 3);
  p.geam(2.0, MatrixView<const double>(m), 0.0, MatrixView<const double>(m), m);
  p.to_host(b.data(), v.data(), 3);
  EXPECT_EQ(v, (std::vector<double>{2, 4, 6}));
}

// Uploads from pageable memory, staged (the default) and through the driver: every value
// arrives, including a last partial staging chunk, and the host buffer may be overwritten as
// soon as to_device returns (the staged path returns before its last transfers complete).
TEST(CudaBackend, StagedUploadFromPageableMemory) {
  DCALIGN_REQUIRE_GPU();
  for (bool staged : {true, false}) {
    SCOPED_TRACE(staged ? "staged" : "driver");
    BackendOptions o;
    o.staged_upload = staged;
    auto backend = make_backend(Device::cuda, o);
    auto& p = backend->f32();
    // 40 MiB + 3 values: two full 16 MiB chunks, a partial one.
    const index_t n = (index_t(10) << 20) + 3;
    std::vector<float> host(static_cast<size_t>(n)), back(static_cast<size_t>(n));
    for (index_t i = 0; i < n; ++i) host[static_cast<size_t>(i)] = static_cast<float>(i % 100003);
    const std::vector<float> expected = host;
    Buffer<float> d = p.allocate(n);
    p.to_device(host.data(), d.data(), n);
    std::fill(host.begin(), host.end(), -1.0f);
    p.to_host(d.data(), back.data(), n);
    EXPECT_TRUE(back == expected);
    // Twice in a row: the second upload waits for the first one's use of each buffer.
    p.to_device(expected.data(), d.data(), n);
    p.to_device(host.data(), d.data(), n);
    p.to_host(d.data(), back.data(), n);
    EXPECT_TRUE(back == host);
  }
}

TEST(CudaBackend, DescriptionStreamAndDeviceRange) {
  DCALIGN_REQUIRE_GPU();
  const std::string d = gpu_backend().description();
  EXPECT_NE(d.find("compute capability"), std::string::npos) << d;
  EXPECT_NE(d.find("cuBLAS"), std::string::npos) << d;
  EXPECT_EQ(gpu_backend().device(), Device::cuda);
  EXPECT_NE(cuda::stream_of(gpu_backend()), nullptr);  // a created (non-default) stream
  EXPECT_THROW(cuda::stream_of(cpu_backend()), BackendError);
  BackendOptions far;
  far.device_id = 4096;
  try {
    make_backend(Device::cuda, far);
    ADD_FAILURE() << "device 4096 accepted";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("4096"), std::string::npos) << e.what();
  }
  // A second backend on the same device shares the stream; buffers outlive their backend.
  Buffer<float> keep;
  {
    auto other = make_backend(Device::cuda);
    EXPECT_EQ(cuda::stream_of(*other), cuda::stream_of(gpu_backend()));
    keep = other->f32().allocate(1000);
    other->f32().fill(keep.data(), 1000, 1.5f);
  }
  std::vector<float> h(1000);
  gpu_backend().f32().to_host(keep.data(), h.data(), 1000);
  EXPECT_EQ(h, std::vector<float>(1000, 1.5f));
}

TEST(CudaBackend, Tf32OptionStillComputes) {
  DCALIGN_REQUIRE_GPU();
  BackendOptions opts;
  opts.allow_tf32 = true;
  auto b = make_backend(Device::cuda, opts);
  EXPECT_NE(b->description().find("TF32 GEMM allowed"), std::string::npos);
  const index_t n = 64;
  const auto A = normal_values<float>(n * n, 200);
  std::vector<float> C(n * n), Cc(n * n);
  Buffer<float> dA = b->f32().allocate(n * n), dC = b->f32().allocate(n * n);
  b->f32().to_device(A.data(), dA.data(), n * n);
  b->f32().gemm(Op::none, Op::none, 1.f, MatrixView<const float>(dA.data(), n, n),
                MatrixView<const float>(dA.data(), n, n), 0.f, MatrixView<float>(dC.data(), n, n));
  b->f32().to_host(dC.data(), C.data(), n * n);
  cpu_backend().f32().gemm(Op::none, Op::none, 1.f, MatrixView<const float>(A.data(), n, n),
                           MatrixView<const float>(A.data(), n, n), 0.f,
                           MatrixView<float>(Cc.data(), n, n));
  // TF32 keeps 10 mantissa bits of the inputs: relative error ~ 2^-11 sqrt(n) at most.
  EXPECT_LE(rel_diff(C, Cc), 1e-2);
}

// BackendOptions::cuda_stream (the stream-aware tensor API): the backend queues its
// work on the caller's stream. The caller's work queued before the call (the anchors' upload,
// behind a delay and a NaN fill) is seen by it, whatever the host did meanwhile; and a third
// stream kept busy far longer than the call is still busy when the call returns, so nothing
// synchronised the device (a cudaDeviceSynchronize, or a wait on the legacy default stream,
// would have drained it).
TEST(CudaBackend, AdoptedStreamIsOrderedAndSynchronisesNothingElse) {
  DCALIGN_REQUIRE_GPU();
  cudaStream_t mine = nullptr, busy = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking), cudaSuccess);
  const std::size_t busy_bytes = std::size_t(1) << 30, delay_bytes = std::size_t(1) << 28;
  void *busy_area = nullptr, *delay_area = nullptr;
  ASSERT_EQ(cudaMalloc(&busy_area, busy_bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&delay_area, delay_bytes), cudaSuccess);
  const auto syn = testing::make_synthetic(300, 40, 12, 6, SpanCondition::diff_span_orth, 21);
  const auto anchors = testing::released_anchors<double>(syn);
  const index_t n = anchors.size(), c = anchors.count(), l = anchors.cols();
  void* pinned_area = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned_area, static_cast<size_t>(n) * sizeof(double)), cudaSuccess);
  double* pinned = static_cast<double*>(pinned_area);
  std::copy(anchors.data(), anchors.data() + n, pinned);
  AlignOptions o;
  o.polar = PolarMethod::iterative;
  const auto reference = align(anchors, o, cpu_backend());
  {
    BackendOptions bo;
    bo.cuda_stream = mine;
    auto backend = make_backend(Device::cuda, bo);
    EXPECT_EQ(cuda::stream_of(*backend), mine);
    auto& p = backend->f64();
    Buffer<double> dA = p.allocate(n), dG = p.allocate(c * l * l);
    // About 1000 x 1 GiB of memsets (a third of a second or more at 3-5 TB/s) on `busy`.
    for (int k = 0; k < 1000; ++k)
      ASSERT_EQ(cudaMemsetAsync(busy_area, k & 0xff, busy_bytes, busy), cudaSuccess);
    // On `mine`: a delay, the anchors filled with NaN (0xff bytes), then the real anchors.
    for (int k = 0; k < 20; ++k)
      ASSERT_EQ(cudaMemsetAsync(delay_area, k, delay_bytes, mine), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dA.data(), 0xff, static_cast<size_t>(n) * sizeof(double), mine),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(dA.data(), pinned, static_cast<size_t>(n) * sizeof(double),
                              cudaMemcpyHostToDevice, mine),
              cudaSuccess);
    const AlignReport r =
        align_resident(p, StackView<const double>(dA.data(), c, anchors.rows(), l),
                       StackView<double>(dG.data(), c, l, l), MatrixView<double>(), o);
    EXPECT_EQ(cudaStreamQuery(busy), cudaErrorNotReady)
        << "the busy stream drained while the backend ran: something synchronised the device";
    std::vector<double> G(static_cast<size_t>(c * l * l));
    ASSERT_EQ(cudaMemcpyAsync(G.data(), dG.data(), G.size() * sizeof(double),
                              cudaMemcpyDeviceToHost, mine),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(mine), cudaSuccess);
    // The same method, polar path and data as the CPU run: rounding-level agreement (the
    // float64 cross-backend tolerance of CudaVsCpu.AlignEveryMethod).
    EXPECT_LE(rel_diff(G.data(), reference.G.data(), c * l * l), 1e-10);
    EXPECT_TRUE(std::isfinite(r.objective));
    // A buffer freed with the backend gone is freed on `mine`, ordered after its use.
  }
  EXPECT_EQ(cudaStreamSynchronize(mine), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(busy), cudaSuccess);
  cudaFreeHost(pinned);
  cudaFree(busy_area);
  cudaFree(delay_area);
  cudaStreamDestroy(busy);
  cudaStreamDestroy(mine);
}

// A stream of another device is refused before anything is queued on it (where the runtime can
// tell, CUDA >= 12.8); the legacy default stream is adopted as cudaStreamLegacy.
TEST(CudaBackend, AdoptedStreamOfTheLegacyDefaultStream) {
  DCALIGN_REQUIRE_GPU();
  BackendOptions bo;
  bo.cuda_stream = cuda_legacy_default_stream();  // the public spelling of cudaStreamLegacy
  auto backend = make_backend(Device::cuda, bo);
  EXPECT_EQ(cuda::stream_of(*backend), cudaStreamLegacy);
  std::vector<double> v = {1, 2, 3};
  Buffer<double> b = backend->f64().allocate(3);
  backend->f64().to_device(v.data(), b.data(), 3);
  backend->f64().fill(b.data(), 2, 7.0);
  backend->f64().to_host(b.data(), v.data(), 3);
  EXPECT_EQ(v, (std::vector<double>{7, 7, 3}));
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2) return;
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&other), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  bo.cuda_stream = other;
#if CUDART_VERSION >= 12080
  EXPECT_THROW(make_backend(Device::cuda, bo), InvalidInput);
#endif
  cudaStreamDestroy(other);
}

// Runs only where no GPU is usable: --device cuda must fail with the reason, not crash.
TEST(CudaBackend, WithoutGpuMakeBackendFailsWithTheReason) {
  std::string why;
  if (have_gpu(&why)) GTEST_SKIP() << "a GPU is present; this checks the failure without one";
  EXPECT_FALSE(why.empty());
  try {
    make_backend(Device::cuda);
    ADD_FAILURE() << "make_backend(Device::cuda) succeeded without a usable GPU";
  } catch (const BackendError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unavailable"), std::string::npos) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg << " does not contain " << why;
  }
}

}  // namespace
}  // namespace dcalign
