#pragma once
// The backend conformance suite: every primitive of include/dcalign/backend.hpp, float and
// double, against an independent reference written here (naive loops in long double, or
// properties where the answer is not unique), with shapes that include 1, odd sizes, strided
// views and empty batches. A backend is done when this suite passes on it.
//
// Each backend's test file instantiates the suite:
//   Backend* dcalign::conformance::backend_under_test(std::string* why_not) { ... }
//   INSTANTIATE_TYPED_TEST_SUITE_P(Name, BackendConformance, dcalign::conformance::Precisions);
// backend_under_test returns the backend (alive for the whole process) or nullptr with the
// reason, in which case every test skips with that reason. All data travel through
// allocate / to_device / to_host, so a device backend runs the same tests.
//
// Tolerances are stated next to each check with a one-line reason; eps = eps(T), u = eps / 2.
// Inputs come from fixed seeds; matrices with known singular values (kappa = sigma_max /
// sigma_min chosen) give exact references for the factorisations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "base/polar_scalar.hpp"
#include "core/common.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/random.hpp"

namespace dcalign::conformance {

/// Provided by the file that instantiates the suite.
Backend* backend_under_test(std::string* why_not);

using Real = long double;

// ------------------------------------------------------------------ host reference helpers

/// A column-major long double matrix: the reference side of every comparison.
struct Ref {
  index_t rows = 0, cols = 0;
  std::vector<Real> v;
  Ref() = default;
  Ref(index_t r, index_t c) : rows(r), cols(c), v(static_cast<size_t>(r * c), Real(0)) {}
  Real& operator()(index_t i, index_t j) { return v[static_cast<size_t>(i + j * rows)]; }
  Real operator()(index_t i, index_t j) const { return v[static_cast<size_t>(i + j * rows)]; }
  static Ref identity(index_t n) {
    Ref r(n, n);
    for (index_t i = 0; i < n; ++i) r(i, i) = 1;
    return r;
  }
};

inline Ref mul(const Ref& A, const Ref& B, bool ta = false, bool tb = false) {
  const index_t m = ta ? A.cols : A.rows, k = ta ? A.rows : A.cols, n = tb ? B.rows : B.cols;
  Ref C(m, n);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < m; ++i) {
      Real s = 0;
      for (index_t p = 0; p < k; ++p) s += (ta ? A(p, i) : A(i, p)) * (tb ? B(j, p) : B(p, j));
      C(i, j) = s;
    }
  return C;
}

inline Ref transpose(const Ref& A) {
  Ref t(A.cols, A.rows);
  for (index_t j = 0; j < A.cols; ++j)
    for (index_t i = 0; i < A.rows; ++i) t(j, i) = A(i, j);
  return t;
}

inline Real frob(const Ref& A) {
  Real s = 0;
  for (Real x : A.v) s += x * x;
  return std::sqrt(s);
}

inline Real frob_diff(const Ref& A, const Ref& B) {
  Real s = 0;
  for (size_t i = 0; i < A.v.size(); ++i) s += (A.v[i] - B.v[i]) * (A.v[i] - B.v[i]);
  return std::sqrt(s);
}

inline Ref gaussian(index_t r, index_t c, Rng& rng) {
  Ref m(r, c);
  for (auto& x : m.v) x = static_cast<Real>(rng.normal());
  return m;
}

/// Orthonormal columns (m x n, n <= m): Gram-Schmidt, twice, on a Gaussian matrix.
inline Ref orthonormal(index_t m, index_t n, Rng& rng) {
  Ref q = gaussian(m, n, rng);
  for (int pass = 0; pass < 2; ++pass)
    for (index_t j = 0; j < n; ++j) {
      for (index_t p = 0; p < j; ++p) {
        Real d = 0;
        for (index_t i = 0; i < m; ++i) d += q(i, p) * q(i, j);
        for (index_t i = 0; i < m; ++i) q(i, j) -= d * q(i, p);
      }
      Real s = 0;
      for (index_t i = 0; i < m; ++i) s += q(i, j) * q(i, j);
      s = std::sqrt(s);
      for (index_t i = 0; i < m; ++i) q(i, j) /= s;
    }
  return q;
}

/// M = U diag(s) V^T (m x n, p = min(m, n)) with s_j = kappa^(-j / (p - 1)) * top: decreasing
/// singular values from `top` down to top / kappa, and the factors kept for the references.
struct Known {
  Ref M, U, V;
  std::vector<Real> s;
};
inline Known known_svd(index_t m, index_t n, Real kappa, Rng& rng, Real top = 1,
                       index_t rank = -1) {
  const index_t p = rank >= 0 ? rank : std::min(m, n);
  Known k;
  k.U = orthonormal(m, p, rng);
  k.V = orthonormal(n, p, rng);
  k.s.resize(static_cast<size_t>(p));
  for (index_t j = 0; j < p; ++j)
    k.s[j] = p == 1 ? top : top * std::pow(kappa, -static_cast<Real>(j) / (p - 1));
  Ref us = k.U;
  for (index_t j = 0; j < p; ++j)
    for (index_t i = 0; i < m; ++i) us(i, j) *= k.s[j];
  k.M = mul(us, k.V, false, true);
  return k;
}

/// Lower Cholesky factor of a symmetric matrix; false when it is not positive definite.
inline bool cholesky(const Ref& A, Ref* L) {
  const index_t n = A.rows;
  *L = Ref(n, n);
  for (index_t j = 0; j < n; ++j) {
    Real d = A(j, j);
    for (index_t p = 0; p < j; ++p) d -= (*L)(j, p) * (*L)(j, p);
    if (!(d > 0)) return false;
    (*L)(j, j) = std::sqrt(d);
    for (index_t i = j + 1; i < n; ++i) {
      Real s = A(i, j);
      for (index_t p = 0; p < j; ++p) s -= (*L)(i, p) * (*L)(j, p);
      (*L)(i, j) = s / (*L)(j, j);
    }
  }
  return true;
}

/// Eigenvalues (ascending) of a symmetric matrix by cyclic Jacobi rotations in long double.
inline std::vector<Real> symmetric_eigenvalues(Ref A) {
  const index_t n = A.rows;
  for (int sweep = 0; sweep < 100; ++sweep) {
    Real off = 0;
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < n; ++i)
        if (i != j) off += A(i, j) * A(i, j);
    if (off <= Real(1e-36) * (frob(A) * frob(A))) break;
    for (index_t p = 0; p < n; ++p)
      for (index_t q = p + 1; q < n; ++q) {
        if (A(p, q) == 0) continue;
        const Real theta = (A(q, q) - A(p, p)) / (2 * A(p, q));
        const Real t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const Real c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (index_t k = 0; k < n; ++k) {  // A <- A J
          const Real akp = A(k, p), akq = A(k, q);
          A(k, p) = c * akp - s * akq;
          A(k, q) = s * akp + c * akq;
        }
        for (index_t k = 0; k < n; ++k) {  // A <- J^T A
          const Real apk = A(p, k), aqk = A(q, k);
          A(p, k) = c * apk - s * aqk;
          A(q, k) = s * apk + c * aqk;
        }
      }
  }
  std::vector<Real> w(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) w[i] = A(i, i);
  std::sort(w.begin(), w.end());
  return w;
}

/// Inverse of a square matrix by Gauss-Jordan with partial pivoting in long double.
inline Ref inverse(Ref A) {
  const index_t n = A.rows;
  Ref X = Ref::identity(n);
  for (index_t k = 0; k < n; ++k) {
    index_t r = k;
    for (index_t i = k + 1; i < n; ++i)
      if (std::abs(A(i, k)) > std::abs(A(r, k))) r = i;
    for (index_t j = 0; j < n; ++j) {
      std::swap(A(k, j), A(r, j));
      std::swap(X(k, j), X(r, j));
    }
    const Real d = A(k, k);
    for (index_t j = 0; j < n; ++j) {
      A(k, j) /= d;
      X(k, j) /= d;
    }
    for (index_t i = 0; i < n; ++i) {
      if (i == k) continue;
      const Real f = A(i, k);
      for (index_t j = 0; j < n; ++j) {
        A(i, j) -= f * A(k, j);
        X(i, j) -= f * X(k, j);
      }
    }
  }
  return X;
}

// ------------------------------------------------------------------ host images of views

/// The host image of a (possibly strided) stack: matrix k's (i, j) at k*stride + i + j*ld.
/// Positions outside the matrices hold a sentinel, so a test can check that a primitive wrote
/// nothing there.
template <typename T>
struct HostStack {
  index_t count = 0, rows = 0, cols = 0, ld = 0, stride = 0;
  std::vector<T> v;
  std::vector<char> used;
  static constexpr T kSentinel = T(-7777.25);
  HostStack(index_t c, index_t r, index_t cl, index_t ld_ = -1, index_t stride_ = -1)
      : count(c), rows(r), cols(cl), ld(ld_ >= 0 ? ld_ : r), stride(stride_ >= 0 ? stride_ : 0) {
    if (stride_ < 0) stride = ld * cols;
    index_t n = 0;
    for (index_t k = 0; k < count; ++k)
      if (rows > 0 && cols > 0) n = std::max(n, k * stride + (rows - 1) + (cols - 1) * ld + 1);
    n += 3;  // a tail of sentinels after the last matrix
    v.assign(static_cast<size_t>(n), kSentinel);
    used.assign(v.size(), 0);
    for (index_t k = 0; k < count; ++k)
      for (index_t j = 0; j < cols; ++j)
        for (index_t i = 0; i < rows; ++i) used[static_cast<size_t>(pos(k, i, j))] = 1;
  }
  index_t pos(index_t k, index_t i, index_t j) const { return k * stride + i + j * ld; }
  T& at(index_t k, index_t i, index_t j) { return v[static_cast<size_t>(pos(k, i, j))]; }
  T at(index_t k, index_t i, index_t j) const { return v[static_cast<size_t>(pos(k, i, j))]; }
  index_t size() const { return static_cast<index_t>(v.size()); }
  template <typename U>
  StackView<U> view(U* base) const {
    return StackView<U>(base, count, rows, cols, ld, stride);
  }
  template <typename U>
  MatrixView<U> matrix(U* base) const {  // matrix 0 as a MatrixView
    return MatrixView<U>(base, rows, cols, ld);
  }
  Ref ref(index_t k) const {
    Ref r(rows, cols);
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) r(i, j) = at(k, i, j);
    return r;
  }
  void set(index_t k, const Ref& r) {
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) at(k, i, j) = static_cast<T>(r(i, j));
  }
  void fill_normal(Rng& rng) {
    for (index_t k = 0; k < count; ++k)
      for (index_t j = 0; j < cols; ++j)
        for (index_t i = 0; i < rows; ++i) at(k, i, j) = static_cast<T>(rng.normal());
  }
  /// Number of positions outside the matrices whose value differs from the sentinel.
  index_t padding_changed(const std::vector<T>& out) const {
    index_t bad = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if (!used[i] && !(out[i] == kSentinel)) ++bad;
    return bad;
  }
};

template <typename T>
constexpr Real eps() {
  return std::numeric_limits<T>::epsilon();
}

template <typename T>
std::string shape(index_t count, index_t rows, index_t cols, index_t ld = -1) {
  return std::string(std::is_same_v<T, float> ? "float" : "double") + " count " +
         std::to_string(count) + ", " + std::to_string(rows) + " x " + std::to_string(cols) +
         (ld >= 0 ? ", ld " + std::to_string(ld) : "");
}

// ------------------------------------------------------------------ the fixture

template <typename T>
class BackendConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = backend_under_test(&why);
    if (!backend_) GTEST_SKIP() << why;
  }
  Primitives<T>& p() { return backend_->primitives<T>(); }
  Backend& backend() { return *backend_; }

  Buffer<T> up(const std::vector<T>& v) {
    Buffer<T> b = p().allocate(static_cast<index_t>(v.size()));
    p().to_device(v.data(), b.data(), static_cast<index_t>(v.size()));
    return b;
  }
  std::vector<T> down(const Buffer<T>& b) { return down(b.data(), b.size()); }
  std::vector<T> down(const T* ptr, index_t n) {
    std::vector<T> v(static_cast<size_t>(n));
    p().to_host(ptr, v.data(), n);
    return v;
  }
  /// A host stack after a primitive wrote its device image.
  HostStack<T> fetch(const HostStack<T>& layout, const Buffer<T>& b) {
    HostStack<T> h = layout;
    h.v = down(b);
    return h;
  }

 private:
  Backend* backend_ = nullptr;
};
TYPED_TEST_SUITE_P(BackendConformance);

using Precisions = ::testing::Types<float, double>;

// ------------------------------------------------------------------ memory

// to_float64 widens exactly and from_float64 rounds to nearest (the host's static_cast, IEEE
// round to nearest even), between matrices of any leading dimensions in the memory of this
// backend and its float64 primitives; the entries outside the destination's rows stay as they
// were, and an empty shape touches nothing.
TYPED_TEST_P(BackendConformance, Float64ConversionsWidenExactlyAndRoundToNearest) {
  using T = TypeParam;
  Primitives<double>* q = this->p().float64();
  ASSERT_NE(q, nullptr);
  for (index_t rows : {index_t(0), index_t(1), index_t(5), index_t(33)})
    for (index_t cols : {index_t(1), index_t(4)}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
      const index_t lds = rows + 2, ldd = rows + 3;
      Rng rng(7000 + static_cast<std::uint64_t>(rows * 10 + cols));
      // Doubles with bits below float's precision (and a tie 1 + 2^-24 for float, which rounds
      // to even, i.e. to 1), T values as sources.
      std::vector<double> wide(static_cast<size_t>(ldd * cols), -7.0);
      std::vector<T> narrow_src(static_cast<size_t>(lds * cols), T(-5));
      for (index_t j = 0; j < cols; ++j)
        for (index_t i = 0; i < rows; ++i) {
          wide[i + j * ldd] = rng.normal() * std::pow(2.0, double(i % 7) - 3.0);
          narrow_src[i + j * lds] = static_cast<T>(rng.normal());
        }
      if (rows > 0) wide[0] = 1.0 + std::ldexp(1.0, -24);
      // to_float64: T -> double, exact.
      Buffer<T> s = this->up(narrow_src);
      Buffer<double> d = q->allocate(ldd * cols);
      q->to_device(wide.data(), d.data(), ldd * cols);
      this->p().to_float64(MatrixView<const T>(s.data(), rows, cols, lds),
                           MatrixView<double>(d.data(), rows, cols, ldd));
      std::vector<double> got(static_cast<size_t>(ldd * cols));
      q->to_host(d.data(), got.data(), ldd * cols);
      for (index_t j = 0; j < cols; ++j)
        for (index_t i = 0; i < ldd; ++i) {
          const double want =
              i < rows ? static_cast<double>(narrow_src[i + j * lds]) : wide[i + j * ldd];
          EXPECT_EQ(got[i + j * ldd], want) << i << ", " << j;
        }
      // from_float64: double -> T, to nearest.
      q->to_device(wide.data(), d.data(), ldd * cols);
      this->p().from_float64(MatrixView<const double>(d.data(), rows, cols, ldd),
                             MatrixView<T>(s.data(), rows, cols, lds));
      const std::vector<T> back = this->down(s);
      for (index_t j = 0; j < cols; ++j)
        for (index_t i = 0; i < lds; ++i) {
          const T want = i < rows ? static_cast<T>(wide[i + j * ldd]) : narrow_src[i + j * lds];
          EXPECT_EQ(back[i + j * lds], want) << i << ", " << j;
        }
      if (rows > 0 && std::is_same_v<T, float>) {
        EXPECT_EQ(back[0], T(1));  // the tie, to even
      }
    }
}

TYPED_TEST_P(BackendConformance, MemoryRoundTripCopyFillSynchronize) {
  using T = TypeParam;
  EXPECT_EQ(this->p().device(), this->backend().device());
  for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(1003)}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Rng rng(100 + static_cast<std::uint64_t>(n));
    std::vector<T> v(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<T>(rng.normal());
    Buffer<T> b = this->p().allocate(n);
    EXPECT_EQ(b.size(), n);
    this->p().to_device(v.data(), b.data(), n);
    EXPECT_EQ(this->down(b), v);  // exact: plain copies
    // copy to a second buffer, then overlapping ranges in both directions (memmove).
    Buffer<T> c = this->p().allocate(n);
    this->p().copy(b.data(), c.data(), n);
    EXPECT_EQ(this->down(c), v);
    if (n > 3) {
      std::vector<T> h = v;
      std::copy(v.begin(), v.end() - 3, h.begin() + 3);  // forward overlap
      this->p().copy(c.data(), c.data() + 3, n - 3);
      EXPECT_EQ(this->down(c), h);
      std::vector<T> g = h;
      std::copy(h.begin() + 2, h.end(), g.begin());  // backward overlap
      this->p().copy(c.data() + 2, c.data(), n - 2);
      EXPECT_EQ(this->down(c), g);
    }
    // fill: the whole buffer, then a sub-range; the neighbours keep their values.
    this->p().fill(b.data(), n, T(0.5));
    EXPECT_EQ(this->down(b), std::vector<T>(static_cast<size_t>(n), T(0.5)));
    if (n >= 3) {
      this->p().fill(b.data() + 1, n - 2, T(-3));
      std::vector<T> h(static_cast<size_t>(n), T(-3));
      h.front() = h.back() = T(0.5);
      EXPECT_EQ(this->down(b), h);
    }
    // Zero-length operations touch nothing.
    this->p().fill(b.data(), 0, T(9));
    this->p().copy(c.data(), b.data(), 0);
    this->p().to_device(v.data(), b.data(), 0);
    if (n >= 1) {
      EXPECT_EQ(this->down(b.data(), 1)[0], T(0.5));
    }
    this->p().synchronize();
  }
}

// ------------------------------------------------------------------ BLAS level

TYPED_TEST_P(BackendConformance, GemmAllTransposesShapesAndStrides) {
  using T = TypeParam;
  struct Case {
    index_t m, n, k, pad;  // pad: ld = rows + pad for every operand
  };
  // 1 x 1, odd sizes, an empty inner dimension, and one product large enough for the CPU's
  // split over threads (2 m n k >= 4e6).
  const Case cases[] = {{1, 1, 1, 0}, {7, 33, 5, 3}, {33, 7, 1, 0},
                        {5, 3, 0, 2}, {1, 9, 4, 1},  {130, 129, 131, 5}};
  std::uint64_t seed = 200;
  for (const Case& cs : cases)
    for (Op ta : {Op::none, Op::trans})
      for (Op tb : {Op::none, Op::trans}) {
        const bool at = ta == Op::trans, bt = tb == Op::trans;
        SCOPED_TRACE(std::to_string(cs.m) + " x " + std::to_string(cs.n) + " x " +
                     std::to_string(cs.k) + (at ? " A^T" : " A") + (bt ? " B^T" : " B") + " pad " +
                     std::to_string(cs.pad));
        Rng rng(seed++);
        const index_t ar = at ? cs.k : cs.m, ac = at ? cs.m : cs.k;
        const index_t br = bt ? cs.n : cs.k, bc = bt ? cs.k : cs.n;
        HostStack<T> A(1, ar, ac, ar + cs.pad), B(1, br, bc, br + cs.pad),
            C(1, cs.m, cs.n, cs.m + cs.pad);
        A.fill_normal(rng);
        B.fill_normal(rng);
        C.fill_normal(rng);
        const T alpha = T(0.75), beta = T(-1.25);
        Buffer<T> dA = this->up(A.v), dB = this->up(B.v), dC = this->up(C.v);
        this->p().gemm(ta, tb, alpha, A.matrix(static_cast<const T*>(dA.data())),
                       B.matrix(static_cast<const T*>(dB.data())), beta, C.matrix(dC.data()));
        const HostStack<T> out = this->fetch(C, dC);
        EXPECT_EQ(C.padding_changed(out.v), 0);
        const Ref a = A.ref(0), b = B.ref(0), c = C.ref(0), got = out.ref(0);
        Real worst = 0;
        for (index_t j = 0; j < cs.n; ++j)
          for (index_t i = 0; i < cs.m; ++i) {
            Real exact = 0, magnitude = 0;
            for (index_t p = 0; p < cs.k; ++p) {
              const Real x = (at ? a(p, i) : a(i, p)) * (bt ? b(j, p) : b(p, j));
              exact += x;
              magnitude += std::abs(x);
            }
            exact = alpha * exact + beta * c(i, j);
            magnitude = std::abs(alpha) * magnitude + std::abs(beta) * std::abs(c(i, j));
            // Componentwise GEMM bound: |error| <= gamma_{k+2} (|alpha| |A||B| + |beta| |C|),
            // gamma_n ~ n u; (k + 2) eps is twice that, for any summation order or FMA use.
            worst = std::max(worst, std::abs(got(i, j) - exact) /
                                        ((cs.k + 2) * eps<T>() * (magnitude + Real(1e-300))));
          }
        EXPECT_LE(worst, 1.0);
      }
}

TYPED_TEST_P(BackendConformance, GemmBatchedBroadcastStridedAndEmpty) {
  using T = TypeParam;
  std::uint64_t seed = 300;
  for (index_t c : {index_t(0), index_t(1), index_t(7)})
    for (index_t l : {index_t(1), index_t(5)})
      for (int variant = 0; variant < 4; ++variant) {
        // variant 0: contiguous A_k^T B_k; 1: A broadcast (count 1), C the row blocks of a
        // (c*a) x l matrix; 2: B broadcast and transposed, B strided; 3: both broadcast.
        const index_t a = l + 4;
        const Op ta = variant == 0 ? Op::trans : Op::none;
        const Op tb = variant == 2 ? Op::trans : Op::none;
        const index_t m = variant == 0 ? l : a;
        SCOPED_TRACE(shape<T>(c, m, l) + ", variant " + std::to_string(variant));
        Rng rng(seed++);
        const index_t ca = variant == 1 || variant == 3 ? 1 : c;
        const index_t cb = variant == 2 || variant == 3 ? 1 : c;
        HostStack<T> A(ca, a, l);
        const index_t brows = ta == Op::trans ? a : l;  // op(A) op(B) is m x l
        HostStack<T> B = variant == 2 ? HostStack<T>(cb, brows, l, brows + 2, (brows + 2) * l + 1)
                                      : HostStack<T>(cb, brows, l);
        HostStack<T> C = variant == 1 ? HostStack<T>(c, m, l, std::max<index_t>(c * m, 1), m)
                                      : HostStack<T>(c, m, l);
        A.fill_normal(rng);
        B.fill_normal(rng);
        C.fill_normal(rng);
        Buffer<T> dA = this->up(A.v), dB = this->up(B.v), dC = this->up(C.v);
        const T alpha = T(1.5), beta = T(0.5);
        this->p().gemm_batched(ta, tb, alpha, A.view(static_cast<const T*>(dA.data())),
                               B.view(static_cast<const T*>(dB.data())), beta, C.view(dC.data()));
        const HostStack<T> out = this->fetch(C, dC);
        EXPECT_EQ(C.padding_changed(out.v), 0);
        for (index_t k = 0; k < c; ++k) {
          const Ref ak = A.ref(ca == 1 ? 0 : k), bk = B.ref(cb == 1 ? 0 : k);
          Ref exact = mul(ak, bk, ta == Op::trans, tb == Op::trans);
          const index_t inner = ta == Op::trans ? a : l;
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < m; ++i) {
              Real magnitude = 0;
              for (index_t p = 0; p < inner; ++p)
                magnitude += std::abs((ta == Op::trans ? ak(p, i) : ak(i, p)) *
                                      (tb == Op::trans ? bk(j, p) : bk(p, j)));
              const Real want = alpha * exact(i, j) + beta * C.at(k, i, j);
              const Real bound = (inner + 2) * eps<T>() *
                                 (std::abs(alpha) * magnitude + std::abs(beta * C.at(k, i, j)));
              // Componentwise GEMM bound, as for gemm.
              EXPECT_LE(std::abs(out.at(k, i, j) - want), bound)
                  << "k " << k << " (" << i << ", " << j << ")";
            }
        }
      }
}

TYPED_TEST_P(BackendConformance, TrsmUpperBatchedReadsOnlyTheUpperTriangle) {
  using T = TypeParam;
  std::uint64_t seed = 400;
  for (index_t c : {index_t(0), index_t(1), index_t(7)})
    for (index_t l : {index_t(1), index_t(7), index_t(33)})
      for (index_t nb : {index_t(1), index_t(5)}) {
        SCOPED_TRACE(shape<T>(c, l, nb));
        Rng rng(seed++);
        // Upper triangle: N(0,1) off the diagonal, l + |N(0,1)| on it (cond(R) < 10); the
        // strictly lower triangle holds junk that the solve must not read.
        HostStack<T> R(c, l, l), B(c, l, nb);
        R.fill_normal(rng);
        B.fill_normal(rng);
        for (index_t k = 0; k < c; ++k)
          for (index_t i = 0; i < l; ++i) {
            R.at(k, i, i) = static_cast<T>(l + std::abs(rng.normal()));
            for (index_t j = 0; j < i; ++j) R.at(k, i, j) = T(1e3);
          }
        Buffer<T> dR = this->up(R.v), dB = this->up(B.v);
        this->p().trsm_upper_batched(R.view(static_cast<const T*>(dR.data())), B.view(dB.data()));
        const HostStack<T> X = this->fetch(B, dB);
        EXPECT_EQ(B.padding_changed(X.v), 0);
        for (index_t k = 0; k < c; ++k) {
          Ref r = R.ref(k);
          for (index_t i = 0; i < l; ++i)
            for (index_t j = 0; j < i; ++j) r(i, j) = 0;
          const Ref x = X.ref(k), b = B.ref(k);
          const Ref rx = mul(r, x);
          for (index_t j = 0; j < nb; ++j)
            for (index_t i = 0; i < l; ++i) {
              Real mag = 0;
              for (index_t p = i; p < l; ++p) mag += std::abs(r(i, p) * x(p, j));
              // Backward stable solve: (R + dR) x = b with |dR| <= gamma_l |R|, so the residual
              // is at most gamma_l (|R||x|)_ij; 2 l eps leaves a factor 4 over gamma_l.
              EXPECT_LE(std::abs(rx(i, j) - b(i, j)), 2 * (l + 1) * eps<T>() * mag)
                  << "k " << k << " (" << i << ", " << j << ")";
            }
        }
      }
}

// gather: C order (the default of NumPy and PyTorch), a permuted layout, a broadcast (stride 0)
// and dcalign's own, into a strided destination; exact copies, nothing outside written.
TYPED_TEST_P(BackendConformance, GatherFromAnyStridesIsAnExactCopy) {
  using T = TypeParam;
  std::uint64_t seed = 520;
  for (index_t c : {index_t(0), index_t(1), index_t(4)})
    for (index_t r : {index_t(1), index_t(6)})
      for (index_t cl : {index_t(1), index_t(3)}) {
        SCOPED_TRACE(shape<T>(c, r, cl));
        Rng rng(seed++);
        const index_t n = std::max<index_t>(c * r * cl, 1);
        HostStack<T> flat(1, n, 1);
        flat.fill_normal(rng);
        Buffer<T> dsrc = this->up(flat.v);
        struct Layout {
          const char* name;
          index_t sc, si, sj;
        };
        for (const Layout& lay :
             {Layout{"C order", r * cl, cl, 1}, Layout{"dcalign", r * cl, 1, r},
              Layout{"users last", 1, c * cl, c}, Layout{"broadcast", 0, 1, r}}) {
          SCOPED_TRACE(lay.name);
          HostStack<T> out(c, r, cl, r + 1, (r + 1) * cl + 2);
          Buffer<T> dout = this->up(out.v);
          this->p().gather(static_cast<const T*>(dsrc.data()), lay.sc, lay.si, lay.sj,
                           out.view(dout.data()));
          const HostStack<T> got = this->fetch(out, dout);
          EXPECT_EQ(out.padding_changed(got.v), 0);
          for (index_t k = 0; k < c; ++k)
            for (index_t j = 0; j < cl; ++j)
              for (index_t i = 0; i < r; ++i)
                ASSERT_EQ(got.at(k, i, j),
                          flat.v[static_cast<size_t>(k * lay.sc + i * lay.si + j * lay.sj)]);
        }
      }
}

TYPED_TEST_P(BackendConformance, VstackAndUnvstackAreExactCopies) {
  using T = TypeParam;
  std::uint64_t seed = 500;
  for (index_t c : {index_t(0), index_t(1), index_t(7)})
    for (index_t r : {index_t(1), index_t(5)})
      for (index_t cl : {index_t(1), index_t(3)}) {
        SCOPED_TRACE(shape<T>(c, r, cl));
        Rng rng(seed++);
        // A strided input stack (ld > rows, gaps between matrices) into a matrix with
        // ld > rows; then back into another strided stack. Copies: exact.
        HostStack<T> in(c, r, cl, r + 1, (r + 1) * cl + 2);
        in.fill_normal(rng);
        HostStack<T> out(1, c * r, cl, c * r + 3);
        Buffer<T> din = this->up(in.v), dout = this->up(out.v);
        this->p().vstack(in.view(static_cast<const T*>(din.data())), out.matrix(dout.data()));
        const HostStack<T> got = this->fetch(out, dout);
        EXPECT_EQ(out.padding_changed(got.v), 0);
        for (index_t k = 0; k < c; ++k)
          for (index_t j = 0; j < cl; ++j)
            for (index_t i = 0; i < r; ++i) ASSERT_EQ(got.at(0, k * r + i, j), in.at(k, i, j));
        HostStack<T> back(c, r, cl, r + 2, (r + 2) * cl + 1);
        Buffer<T> dback = this->up(back.v);
        this->p().unvstack(out.matrix(static_cast<const T*>(dout.data())), back.view(dback.data()));
        const HostStack<T> b = this->fetch(back, dback);
        EXPECT_EQ(back.padding_changed(b.v), 0);
        for (index_t k = 0; k < c; ++k)
          for (index_t j = 0; j < cl; ++j)
            for (index_t i = 0; i < r; ++i) ASSERT_EQ(b.at(k, i, j), in.at(k, i, j));
      }
}

TYPED_TEST_P(BackendConformance, GeamOnStridedBlocksAndInPlace) {
  using T = TypeParam;
  std::uint64_t seed = 600;
  for (index_t r : {index_t(1), index_t(7), index_t(33)})
    for (index_t cl : {index_t(1), index_t(9)})
      for (int alias = 0; alias < 3; ++alias) {  // C separate, C = A, C = B
        SCOPED_TRACE(shape<T>(1, r, cl, r + 2) + ", alias " + std::to_string(alias));
        Rng rng(seed++);
        HostStack<T> A(1, r, cl, r + 2), B(1, r, cl, r + 2), C(1, r, cl, r + 2);
        A.fill_normal(rng);
        B.fill_normal(rng);
        Buffer<T> dA = this->up(A.v), dB = this->up(B.v), dC = this->up(C.v);
        T* out = alias == 1 ? dA.data() : alias == 2 ? dB.data() : dC.data();
        const T alpha = T(-0.5), beta = T(3);
        this->p().geam(alpha, A.matrix(static_cast<const T*>(dA.data())), beta,
                       B.matrix(static_cast<const T*>(dB.data())), C.matrix(out));
        const HostStack<T>& layout = alias == 1 ? A : alias == 2 ? B : C;
        const HostStack<T> got = this->fetch(layout, alias == 1 ? dA : alias == 2 ? dB : dC);
        EXPECT_EQ(layout.padding_changed(got.v), 0);
        for (index_t j = 0; j < cl; ++j)
          for (index_t i = 0; i < r; ++i) {
            const Real a = A.at(0, i, j), b = B.at(0, i, j);
            // alpha a + beta b: two products and a sum, each rounded once (or fused): 3 u
            // relative to |alpha a| + |beta b| at most; 2 eps = 4 u.
            EXPECT_LE(std::abs(got.at(0, i, j) - (alpha * a + beta * b)),
                      2 * eps<T>() * (std::abs(alpha * a) + std::abs(beta * b)));
          }
      }
}

// ------------------------------------------------------------------ factorisations

TYPED_TEST_P(BackendConformance, PolarBatchedMatchesTheKnownPolarFactor) {
  using T = TypeParam;
  const Real kappa = 10;
  std::uint64_t seed = 700;
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (index_t l : {index_t(1), index_t(7), index_t(33)})
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(shape<T>(c, l, l) + (transposed ? ", transposed" : ""));
        Rng rng(seed++);
        // M strided: the row blocks of a (c*l) x l matrix, as ODC hands in W^T Z.
        HostStack<T> M(c, l, l, std::max<index_t>(c * l, 1), l), G(c, l, l);
        std::vector<Known> known;
        for (index_t k = 0; k < c; ++k) {
          known.push_back(known_svd(l, l, kappa, rng, Real(2)));
          M.set(k, known.back().M);
        }
        Buffer<T> dM = this->up(M.v), dG = this->up(G.v);
        const PolarInfo<T> info = this->p().polar_batched(M.view(static_cast<const T*>(dM.data())),
                                                          transposed, G.view(dG.data()));
        ASSERT_EQ(static_cast<index_t>(info.sigma_min.size()), c);
        ASSERT_EQ(static_cast<index_t>(info.sigma_max.size()), c);
        const HostStack<T> out = this->fetch(G, dG);
        EXPECT_EQ(G.padding_changed(out.v), 0);
        for (index_t k = 0; k < c; ++k) {
          const Known& kn = known[k];
          // polar(M) = U V^T for M = U S V^T; polar(M^T) = V U^T.
          const Ref want = transposed ? mul(kn.V, kn.U, false, true) : mul(kn.U, kn.V, false, true);
          const Ref g = out.ref(k);
          // Rounding M to T and a backward stable SVD perturb M by O(l eps ||M||_2); the polar
          // factor moves by at most 2 / (sigma_min + sigma_min') times that, i.e. O(l eps
          // kappa). 20 l eps kappa leaves a margin of about 10.
          const Real tol = 20 * l * eps<T>() * kappa;
          EXPECT_LE(frob_diff(g, want), tol) << "matrix " << k;
          EXPECT_LE(frob_diff(mul(g, g, true, false), Ref::identity(l)), tol) << "matrix " << k;
          // Singular values of a backward stable SVD are within l eps ||M||_2 of the exact
          // ones (Weyl); 4 l eps sigma_max is a margin of 4.
          const Real smax = kn.s.front(), smin = kn.s.back();
          EXPECT_NEAR(info.sigma_max[k], smax, 4 * l * eps<T>() * smax);
          EXPECT_NEAR(info.sigma_min[k], smin, 4 * l * eps<T>() * smax);
          // G^T M' (M' = M or M^T) is the symmetric positive definite factor H.
          const Ref m = transposed ? transpose(M.ref(k)) : M.ref(k);
          const Ref h = mul(g, m, true, false);
          EXPECT_LE(frob_diff(h, transpose(h)), tol * frob(m)) << "matrix " << k;
          Ref hs = h, L;
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < l; ++i) hs(i, j) = (h(i, j) + h(j, i)) / 2;
          EXPECT_TRUE(cholesky(hs, &L)) << "G^T M is not positive definite, matrix " << k;
        }
      }
}

TYPED_TEST_P(BackendConformance, QrBatchedOrthogonalTriangularAndRatio) {
  using T = TypeParam;
  std::uint64_t seed = 800;
  struct Case {
    index_t a, l;
  };
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (Case cs : {Case{1, 1}, Case{7, 7}, Case{33, 7}, Case{9, 1}}) {
      SCOPED_TRACE(shape<T>(c, cs.a, cs.l));
      Rng rng(seed++);
      HostStack<T> A(c, cs.a, cs.l), R(c, cs.l, cs.l);
      A.fill_normal(rng);
      // The last matrix (when l > 1) has an exactly zero column: R is exactly singular there.
      const bool zero_column = c > 1 && cs.l > 1;  // then R_jj, j > 1, is not unique
      if (zero_column)
        for (index_t i = 0; i < cs.a; ++i) A.at(c - 1, i, 1) = T(0);
      Buffer<T> dA = this->up(A.v), dR = this->up(R.v);
      const std::vector<T> ratio = this->p().qr_batched(A.view(dA.data()), R.view(dR.data()));
      ASSERT_EQ(static_cast<index_t>(ratio.size()), c);
      const HostStack<T> Q = this->fetch(A, dA), Rout = this->fetch(R, dR);
      EXPECT_EQ(R.padding_changed(Rout.v), 0);
      for (index_t k = 0; k < c; ++k) {
        const Ref a = A.ref(k), q = Q.ref(k), r = Rout.ref(k);
        // Householder QR: ||Q^T Q - I|| and ||QR - A|| / ||A|| are O(a l u) (Higham Thm 19.4,
        // a worst case; 10 a l eps = 20 a l u).
        const Real tol = 10 * cs.a * cs.l * eps<T>();
        EXPECT_LE(frob_diff(mul(q, q, true, false), Ref::identity(cs.l)), tol) << "matrix " << k;
        EXPECT_LE(frob_diff(mul(q, r), a), tol * frob(a)) << "matrix " << k;
        for (index_t j = 0; j < cs.l; ++j)
          for (index_t i = j + 1; i < cs.l; ++i) EXPECT_EQ(r(i, j), Real(0)) << "R below diagonal";
        // For a full-rank A, |R_jj| is unique: the distance of column j from the span of the
        // columns before it (Gram-Schmidt in long double).
        std::vector<Real> d(static_cast<size_t>(cs.l));
        Ref w = a;
        for (index_t j = 0; j < cs.l; ++j) {
          for (index_t p = 0; p < j; ++p) {
            if (d[p] == 0) continue;
            Real dot = 0;
            for (index_t i = 0; i < cs.a; ++i) dot += w(i, p) * w(i, j);
            for (index_t i = 0; i < cs.a; ++i) w(i, j) -= dot * w(i, p);
          }
          Real s = 0;
          for (index_t i = 0; i < cs.a; ++i) s += w(i, j) * w(i, j);
          d[j] = std::sqrt(s);
          if (d[j] > 0)
            for (index_t i = 0; i < cs.a; ++i) w(i, j) /= d[j];
        }
        if (zero_column && k == c - 1) {
          EXPECT_EQ(ratio[k], T(0)) << "exactly singular R";  // contract: 0, exactly
          continue;
        }
        const Real dmax = *std::max_element(d.begin(), d.end());
        const Real dmin = *std::min_element(d.begin(), d.end());
        for (index_t j = 0; j < cs.l; ++j)
          EXPECT_NEAR(std::abs(r(j, j)), d[j], tol * frob(a)) << "R_jj, j = " << j;
        // Each |R_jj| within tol ||A||_F (above), so the ratio within 2 tol ||A||_F / dmax.
        EXPECT_NEAR(ratio[k], dmin / dmax, 2 * tol * frob(a) / dmax);
      }
    }
}

TYPED_TEST_P(BackendConformance, SvdTopkExactAndRandomizedOnKnownSpectra) {
  using T = TypeParam;
  struct Case {
    index_t m, n, k, rank;
    SvdAlgorithm algorithm;
  };
  // Tall, wide, 1 x 1, k = min(m, n), and a randomized case whose sketch (k + 10 columns) is
  // narrower than min(m, n) on a matrix of rank 5: the range finder captures it exactly.
  const Case cases[] = {
      {1, 1, 1, 1, SvdAlgorithm::exact},        {33, 7, 3, 7, SvdAlgorithm::exact},
      {7, 33, 7, 7, SvdAlgorithm::exact},       {1, 9, 1, 1, SvdAlgorithm::exact},
      {60, 40, 3, 5, SvdAlgorithm::randomized}, {40, 60, 2, 5, SvdAlgorithm::randomized},
      {9, 8, 2, 8, SvdAlgorithm::randomized}};
  std::uint64_t seed = 900;
  for (const Case& cs : cases)
    for (int want = 0; want < 3; ++want) {  // U and V; neither; U only
      SCOPED_TRACE(std::to_string(cs.m) + " x " + std::to_string(cs.n) + ", k " +
                   std::to_string(cs.k) +
                   (cs.algorithm == SvdAlgorithm::exact ? " exact" : " randomized") + ", want " +
                   std::to_string(want));
      Rng rng(seed++);
      const Real kappa = 8;
      const Known kn = known_svd(cs.m, cs.n, kappa, rng, Real(3), cs.rank);
      HostStack<T> W(1, cs.m, cs.n, cs.m + 2), U(1, cs.m, cs.k, cs.m + 1),
          V(1, cs.n, cs.k, cs.n + 3);
      W.set(0, kn.M);
      Buffer<T> dW = this->up(W.v), dU = this->up(U.v), dV = this->up(V.v);
      SvdOptions opts;
      opts.algorithm = cs.algorithm;
      opts.seed = 77;
      std::vector<T> s(static_cast<size_t>(cs.k));
      // Through core::topk_svd: the exact route is the primitive svd_topk, the randomized one
      // the core's range finder on this backend's gemm, qr_batched and svd_topk.
      core::topk_svd(this->p(), W.matrix(static_cast<const T*>(dW.data())), cs.k, opts, s.data(),
                     want != 1 ? U.matrix(dU.data()) : MatrixView<T>(),
                     want == 0 ? V.matrix(dV.data()) : MatrixView<T>());
      const Real smax = kn.s.front();
      const Real size = static_cast<Real>(std::max(cs.m, cs.n));
      // Singular values: backward stable SVD (and, for the randomized path, an exact range
      // capture) keeps them within O(max(m, n) eps sigma_max) (Weyl); 4 max(m,n) eps margin.
      for (index_t j = 0; j < cs.k; ++j) EXPECT_NEAR(s[j], kn.s[j], 4 * size * eps<T>() * smax);
      const HostStack<T> Uo = this->fetch(U, dU), Vo = this->fetch(V, dV);
      EXPECT_EQ(U.padding_changed(Uo.v), 0);
      EXPECT_EQ(V.padding_changed(Vo.v), 0);
      const Real tol = 10 * size * eps<T>();  // orthogonality of computed singular vectors
      if (want != 1) {
        const Ref u = Uo.ref(0);
        EXPECT_LE(frob_diff(mul(u, u, true, false), Ref::identity(cs.k)), tol);
        // W^T u_j = s_j v_j determines u's accuracy through the residual ||W^T u_j|| = s_j;
        // with the gap s_j / s_{j+1} = kappa^(1/(p-1)) the vectors are well determined: U^T
        // W W^T U = S^2 to tol s_max^2.
        const Ref wtu = mul(kn.M, u, true, false);
        const Ref g = mul(wtu, wtu, true, false);
        Ref s2(cs.k, cs.k);
        for (index_t j = 0; j < cs.k; ++j) s2(j, j) = kn.s[j] * kn.s[j];
        EXPECT_LE(frob_diff(g, s2), 4 * tol * smax * smax);
      } else {
        EXPECT_EQ(Uo.v, U.v) << "U written though empty";
      }
      if (want == 0) {
        const Ref u = Uo.ref(0), v = Vo.ref(0);
        EXPECT_LE(frob_diff(mul(v, v, true, false), Ref::identity(cs.k)), tol);
        // U^T W V = diag(s): pins the pairing and the signs of u_j, v_j together.
        const Ref d = mul(mul(u, kn.M, true, false), v);
        Ref want_d(cs.k, cs.k);
        for (index_t j = 0; j < cs.k; ++j) want_d(j, j) = s[j];
        EXPECT_LE(frob_diff(d, want_d), 4 * tol * smax);
      } else {
        EXPECT_EQ(Vo.v, V.v) << "V written though empty";
      }
    }
}

TYPED_TEST_P(BackendConformance, LstsqBatchedMatchesTheKnownSolution) {
  using T = TypeParam;
  const Real kappa = 4;
  struct Case {
    index_t a, l;
  };
  std::uint64_t seed = 1000;
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (Case cs : {Case{1, 1}, Case{7, 7}, Case{33, 5}}) {
      SCOPED_TRACE(shape<T>(c, cs.a, cs.l));
      Rng rng(seed++);
      HostStack<T> A(c, cs.a, cs.l), G(c, cs.l, cs.l);
      HostStack<T> Z(1, cs.a, cs.l, cs.a + 3);  // Z strided (ld > a)
      Z.fill_normal(rng);
      std::vector<Known> known;
      for (index_t k = 0; k < c; ++k) {
        known.push_back(known_svd(cs.a, cs.l, kappa, rng, Real(2)));
        A.set(k, known.back().M);
      }
      Buffer<T> dA = this->up(A.v), dZ = this->up(Z.v), dG = this->up(G.v);
      const std::vector<T> ratio =
          this->p().lstsq_batched(A.view(static_cast<const T*>(dA.data())),
                                  Z.matrix(static_cast<const T*>(dZ.data())), G.view(dG.data()));
      ASSERT_EQ(static_cast<index_t>(ratio.size()), c);
      const HostStack<T> out = this->fetch(G, dG);
      EXPECT_EQ(G.padding_changed(out.v), 0);
      const Ref z = Z.ref(0);
      for (index_t k = 0; k < c; ++k) {
        const Known& kn = known[k];
        // A^+ Z = V S^{-1} U^T Z from the construction.
        Ref utz = mul(kn.U, z, true, false);
        for (index_t j = 0; j < cs.l; ++j)
          for (index_t i = 0; i < cs.l; ++i) utz(i, j) /= kn.s[i];
        const Ref want = mul(kn.V, utz);
        const Ref g = out.ref(k);
        // Least squares forward error (Higham Thm 20.1): O(a l u) (kappa ||G|| + kappa^2 ||r||
        // / ||A||); with ||A||_2 = 2, kappa = 4 and ||r|| <= ||Z||: 10 a eps times that.
        const Real tol = 10 * cs.a * eps<T>() * (kappa * frob(want) + kappa * kappa * frob(z) / 2);
        EXPECT_LE(frob_diff(g, want), tol) << "matrix " << k;
        // Normal equations A^T (A G - Z) = 0, relative to ||A|| (||A|| ||G|| + ||Z||).
        const Ref a = A.ref(k);
        Ref r = mul(a, g);
        for (index_t j = 0; j < cs.l; ++j)
          for (index_t i = 0; i < cs.a; ++i) r(i, j) -= z(i, j);
        EXPECT_LE(frob(mul(a, r, true, false)), tol * frob(a) * (frob(a) + 1));
        // The ratio sigma_min / sigma_max (1 / kappa; 1 for l = 1): each singular value is
        // within 4 a eps sigma_max, so the ratio within 8 a eps.
        EXPECT_NEAR(ratio[k], kn.s.back() / kn.s.front(), 8 * cs.a * eps<T>());
      }
    }
}

TYPED_TEST_P(BackendConformance, SygvSmallestEigenpairsOfTheKnownPencil) {
  using T = TypeParam;
  std::uint64_t seed = 1100;
  for (bool blocked : {false, true})
    for (index_t n : {index_t(1), index_t(7), index_t(20)})
      for (index_t k : {index_t(1), n}) {
        SCOPED_TRACE(shape<T>(1, n, n) + ", k " + std::to_string(k) +
                     (blocked ? ", block-diagonal B" : ""));
        Rng rng(seed++);
        // S symmetric indefinite, B = Y^T Y + n I (lambda_min(B) >= n, cond(B) < 10). Only the
        // lower triangles are read: the strictly upper ones hold junk. ld > n everywhere.
        // `blocked` keeps only B's diagonal blocks of sizes 3, 1, 4, 2, 3, 1, ... (Kawakami-DC's
        // B = blkdiag(A_i^T A_i) has this form; the CPU backend reduces it block by block). The
        // blocks are principal submatrices of a matrix with lambda_min >= n, so the bound holds.
        const Ref X = gaussian(n, n, rng), Y = gaussian(n + 2, n, rng);
        Ref S(n, n), B = mul(Y, Y, true, false);
        const index_t sizes[] = {3, 1, 4, 2};
        std::vector<index_t> block(static_cast<size_t>(n));
        for (index_t i = 0, b = 0, left = sizes[0]; i < n; ++i) {
          if (left == 0) left = sizes[++b % 4];
          block[static_cast<size_t>(i)] = b;
          --left;
        }
        for (index_t j = 0; j < n; ++j) {
          B(j, j) += n;
          for (index_t i = 0; i < n; ++i) {
            S(i, j) = X(i, j) + X(j, i);
            if (blocked && block[static_cast<size_t>(i)] != block[static_cast<size_t>(j)])
              B(i, j) = 0;
          }
        }
        HostStack<T> Sh(1, n, n, n + 1), Bh(1, n, n, n + 2), Vh(1, n, k, n + 3);
        Sh.set(0, S);
        Bh.set(0, B);
        // The backend works with the T-rounded pencil: use it for the reference.
        S = Sh.ref(0);
        B = Bh.ref(0);
        for (index_t j = 0; j < n; ++j)
          for (index_t i = 0; i < j; ++i) Sh.at(0, i, j) = Bh.at(0, i, j) = T(1e4);
        Buffer<T> dS = this->up(Sh.v), dB = this->up(Bh.v), dV = this->up(Vh.v);
        std::vector<T> w(static_cast<size_t>(k));
        this->p().sygv_smallest(Sh.matrix(dS.data()), Bh.matrix(dB.data()), k, w.data(),
                                Vh.matrix(dV.data()));
        const HostStack<T> Vo = this->fetch(Vh, dV);
        EXPECT_EQ(Vh.padding_changed(Vo.v), 0);
        // Reference eigenvalues: those of L^{-1} S L^{-T} with B = L L^T (Jacobi, long double).
        Ref L;
        ASSERT_TRUE(cholesky(B, &L));
        const Ref Li = inverse(L);
        const std::vector<Real> ref = symmetric_eigenvalues(mul(mul(Li, S), Li, false, true));
        const Real snorm = frob(S), bnorm = frob(B), bmin = symmetric_eigenvalues(B).front();
        const Ref v = Vo.ref(0);
        const Ref sv = mul(S, v), bv = mul(B, v);
        for (index_t j = 0; j < k; ++j) {
          if (j > 0) {
            EXPECT_LE(w[j - 1], w[j]) << "ascending";
          }
          // A backward stable solver perturbs S and B by O(n eps) relative; the eigenvalue
          // moves by at most (||dS|| + |lambda| ||dB||) / lambda_min(B); 20 n eps margin.
          const Real tol = 20 * n * eps<T>() * (snorm + std::abs(ref[j]) * bnorm) / bmin;
          EXPECT_NEAR(w[j], ref[j], tol) << "eigenvalue " << j;
          // S v = lambda B v, residual relative to the same scale times ||v||.
          Real res = 0, vn = 0;
          for (index_t i = 0; i < n; ++i) {
            res += (sv(i, j) - w[j] * bv(i, j)) * (sv(i, j) - w[j] * bv(i, j));
            vn += v(i, j) * v(i, j);
          }
          EXPECT_LE(std::sqrt(res), tol * bmin * std::sqrt(vn)) << "residual " << j;
        }
        // V^T B V = I, to O(n eps cond(B)); cond(B) <= (n + (sqrt(n + 2) + sqrt(n))^2) / n < 10.
        EXPECT_LE(frob_diff(mul(v, bv, true, false), Ref::identity(k)), 20 * n * eps<T>() * 10);
      }
}

TYPED_TEST_P(BackendConformance, SygvSmallestRejectsAnIndefiniteB) {
  using T = TypeParam;
  const index_t n = 4;
  std::vector<T> S(n * n, T(0)), B(n * n, T(0)), V(n * 2, T(0));
  for (index_t i = 0; i < n; ++i) {
    S[i + i * n] = T(1);
    B[i + i * n] = i == 2 ? T(-1) : T(1);  // leading minor 3 is negative
  }
  Buffer<T> dS = this->up(S), dB = this->up(B), dV = this->up(V);
  std::vector<T> w(2);
  try {
    this->p().sygv_smallest(MatrixView<T>(dS.data(), n, n), MatrixView<T>(dB.data(), n, n), 2,
                            w.data(), MatrixView<T>(dV.data(), n, 2));
    ADD_FAILURE() << "no exception for an indefinite B";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("not positive definite (leading minor 3)"),
              std::string::npos)
        << e.what();
  }
}

// ------------------------------------------------------------------ the polar iteration

namespace detail {
// The state polar::start gives a matrix with ||M||_F^2 = fro2.
template <typename T>
std::vector<T> started(Real fro2) {
  std::vector<T> st(polar::kStateSize);
  polar::start(st.data(), static_cast<double>(fro2));
  return st;
}
}  // namespace detail

TYPED_TEST_P(BackendConformance, PolarStartScalesAndFlags) {
  using T = TypeParam;
  std::uint64_t seed = 1200;
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (index_t l : {index_t(1), index_t(7), index_t(33)})
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(shape<T>(c, l, l) + (transposed ? ", transposed" : ""));
        Rng rng(seed++);
        HostStack<T> M(c, l, l, std::max<index_t>(c * l, 1), l), X(c, l, l);
        M.fill_normal(rng);
        // Matrix 1 is zero, matrix 2 holds a NaN, matrix 3 an Inf (when present).
        if (c > 1)
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < l; ++i) M.at(1, i, j) = T(0);
        if (c > 2) M.at(2, l - 1, 0) = std::numeric_limits<T>::quiet_NaN();
        if (c > 3) M.at(3, 0, l - 1) = -std::numeric_limits<T>::infinity();
        std::vector<T> state(static_cast<size_t>(std::max<index_t>(c, 1) * polar::kStateSize),
                             T(42));
        Buffer<T> dM = this->up(M.v), dX = this->up(X.v), dS = this->up(state);
        this->p().polar_start(M.view(static_cast<const T*>(dM.data())), transposed,
                              X.view(dX.data()), dS.data(), 0.0);
        const HostStack<T> out = this->fetch(X, dX);
        const std::vector<T> st = this->down(dS);
        for (index_t k = 0; k < c; ++k) {
          Real fro2 = 0;
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < l; ++i) fro2 += Real(M.at(k, i, j)) * M.at(k, i, j);
          const std::vector<T> want = detail::started<T>(fro2);
          const T* got = st.data() + k * polar::kStateSize;
          EXPECT_EQ(polar::flags(got), polar::flags(want.data())) << "matrix " << k;
          for (int f = 0; f < polar::kStateSize; ++f) {
            if (f == polar::kAlpha) continue;
            EXPECT_EQ(got[f], want[f]) << "matrix " << k << ", field " << f;
          }
          if (!std::isfinite(fro2)) {
            EXPECT_FALSE(std::isfinite(got[polar::kAlpha])) << "matrix " << k;
            continue;
          }
          // ||M||_F: a sum of l^2 positive squares in double (relative error (l^2 - 1) u_double,
          // halved by the square root), then rounded to T (u): within eps + l^2 eps_double.
          const Real rel = eps<T>() + l * l * eps<double>();
          EXPECT_NEAR(got[polar::kAlpha], std::sqrt(fro2), rel * std::sqrt(fro2) + 1e-300);
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < l; ++i) {
              const Real m = transposed ? M.at(k, j, i) : M.at(k, i, j);
              const Real want_x = fro2 > 0 ? m / std::sqrt(fro2) : 0;
              // m times the factor 1/||M||_F (error as alpha's, plus its own rounding) and the
              // product's rounding: 2 eps + l^2 eps_double.
              EXPECT_NEAR(out.at(k, i, j), want_x, (rel + eps<T>()) * std::abs(want_x))
                  << "matrix " << k << " (" << i << ", " << j << ")";
            }
        }
        // The states of absent matrices (beyond c) are not written.
        if (c == 0) {
          EXPECT_EQ(st[0], T(42));
        }
      }
}

TYPED_TEST_P(BackendConformance, InverseBatchedInvertsActiveAndFlagsSingular) {
  using T = TypeParam;
  const Real kappa = 10;
  std::uint64_t seed = 1300;
  // 100 > 96 and > 32: the CPU's LAPACK path and the GPU's getrf path besides the small ones;
  // 16, 31, 33, 50 and 96: the CPU's Gauss-Jordan with pivots in blocks of 4 (tails of 3, 1,
  // 2 and none; the other columns updated four at a time with tails of 0-3); 7 pivot by pivot.
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (index_t l : {index_t(1), index_t(7), index_t(16), index_t(31), index_t(33), index_t(50),
                      index_t(96), index_t(100)}) {
      SCOPED_TRACE(shape<T>(c, l, l));
      Rng rng(seed++);
      HostStack<T> X(c, l, l), Y(c, l, l);
      std::vector<T> state(static_cast<size_t>(std::max<index_t>(c, 1) * polar::kStateSize));
      for (index_t k = 0; k < c; ++k) {
        X.set(k, known_svd(l, l, kappa, rng).M);
        polar::start(state.data() + k * polar::kStateSize, 1.0);
      }
      // Matrix 1: a zero column (exactly zero pivot; the last one, reached after every block
      // of pivots before it) -> singular; matrix 2: converged (inactive) and also singular ->
      // left alone; matrix 3: converged, regular.
      if (c > 1)
        for (index_t i = 0; i < l; ++i) X.at(1, i, l - 1) = T(0);
      if (c > 2) {
        for (index_t i = 0; i < l; ++i) X.at(2, i, 0) = T(0);
        polar::set_flag(state.data() + 2 * polar::kStateSize, polar::kConverged);
      }
      if (c > 3) polar::set_flag(state.data() + 3 * polar::kStateSize, polar::kConverged);
      Buffer<T> dX = this->up(X.v), dY = this->up(Y.v), dS = this->up(state);
      this->p().inverse_batched(X.view(static_cast<const T*>(dX.data())), Y.view(dY.data()),
                                dS.data());
      const HostStack<T> Yo = this->fetch(Y, dY);
      const std::vector<T> st = this->down(dS);
      EXPECT_EQ(this->down(dX), X.v) << "X is input only";
      for (index_t k = 0; k < c; ++k) {
        const T* s = st.data() + k * polar::kStateSize;
        std::vector<T> want(state.begin() + k * polar::kStateSize,
                            state.begin() + (k + 1) * polar::kStateSize);
        if (k == 1) polar::mark_singular(want.data());
        for (int f = 0; f < polar::kStateSize; ++f)
          EXPECT_EQ(s[f], want[f]) << "matrix " << k << ", field " << f;
        if (k == 1 || k == 2 || k == 3) continue;  // Y_k unspecified
        // LU with partial pivoting: ||X Y - I||_F = O(l u kappa(X)) (Higham 14.3); 20 l eps
        // kappa is a margin of about 40 over l u kappa.
        EXPECT_LE(frob_diff(mul(X.ref(k), Yo.ref(k)), Ref::identity(l)), 20 * l * eps<T>() * kappa)
            << "matrix " << k;
      }
    }
}

TYPED_TEST_P(BackendConformance, PolarNewtonStepFollowsTheScalarContract) {
  using T = TypeParam;
  const Real kappa = 10;
  std::uint64_t seed = 1400;
  for (index_t c : {index_t(0), index_t(1), index_t(6)})
    for (index_t l : {index_t(1), index_t(7), index_t(33)}) {
      SCOPED_TRACE(shape<T>(c, l, l));
      Rng rng(seed++);
      // X_k = M_k / ||M_k||_F with Y_k its inverse computed here (independent of
      // inverse_batched). Matrix 1: converged (must be left alone); matrix 2: Y holds an Inf
      // (newton_zeta stops it); matrix 3: already orthogonal with scaling off (converges);
      // matrix 4: a second step (iteration 1) state. Every matrix but 5 carries its condition
      // estimate ||X||_F ||Y||_F, which iteration 0 records and iteration 1's zeta reads; matrix
      // 5 carries none, so its zeta_1 is 0 and newton_zeta stops it (kNonFinite): the step must
      // count it inactive, as every matrix polar::active calls inactive afterwards.
      HostStack<T> X(c, l, l), Y(c, l, l);
      std::vector<T> state(static_cast<size_t>(std::max<index_t>(c, 1) * polar::kStateSize));
      for (index_t k = 0; k < c; ++k) {
        Ref m = k == 3 ? orthonormal(l, l, rng) : known_svd(l, l, kappa, rng).M;
        const Real f = k == 3 ? 1 : 1 / frob(m);
        for (auto& x : m.v) x *= f;
        X.set(k, m);
        Y.set(k, inverse(X.ref(k)));
        T* st = state.data() + k * polar::kStateSize;
        polar::start(st, 1.0 / static_cast<double>(f * f));
        if (k == 1) polar::set_flag(st, polar::kConverged);
        if (k == 3) polar::set_flag(st, polar::kNoScaling);
        if (k == 4) st[polar::kIterations] = T(1);
        if (k != 5) st[polar::kKappa] = static_cast<T>(frob(X.ref(k)) * frob(Y.ref(k)));
      }
      if (c > 2) Y.at(2, 0, 0) = std::numeric_limits<T>::infinity();
      const double tolerance = 1e-3;
      for (int iteration : {0, 1}) {
        SCOPED_TRACE("iteration " + std::to_string(iteration));
        Buffer<T> dX = this->up(X.v), dY = this->up(Y.v), dS = this->up(state);
        const index_t active =
            this->p().polar_newton_step(X.view(dX.data()), Y.view(static_cast<const T*>(dY.data())),
                                        dS.data(), iteration, tolerance);
        const HostStack<T> Xo = this->fetch(X, dX);
        const std::vector<T> st = this->down(dS);
        index_t want_active = 0;
        for (index_t k = 0; k < c; ++k) {
          std::vector<T> want(state.begin() + k * polar::kStateSize,
                              state.begin() + (k + 1) * polar::kStateSize);
          const Ref x = X.ref(k), y = Y.ref(k);
          Ref xn = x;
          if (polar::active(want.data())) {
            const T zeta = polar::newton_zeta(want.data(), static_cast<double>(frob(x) * frob(x)),
                                              static_cast<double>(frob(y) * frob(y)), iteration);
            if (zeta > T(0)) {
              for (index_t j = 0; j < l; ++j)
                for (index_t i = 0; i < l; ++i)
                  xn(i, j) = (Real(zeta) * x(i, j) + y(j, i) / Real(zeta)) / 2;
              const Real dx = frob_diff(xn, x), nx = frob(xn);
              polar::newton_after(want.data(), static_cast<double>(dx * dx),
                                  static_cast<double>(nx * nx), tolerance, static_cast<int>(l));
            }
            if (polar::active(want.data())) ++want_active;
          }
          const T* s = st.data() + k * polar::kStateSize;
          // Magnitudes of the two terms of each new entry, for the rounding bounds below.
          const Real z = want[polar::kZeta] > 0 ? Real(want[polar::kZeta]) : 1;
          Ref mag(l, l);
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < l; ++i)
              mag(i, j) = (z * std::abs(x(i, j)) + std::abs(y(j, i)) / z) / 2;
          EXPECT_EQ(polar::flags(s), polar::flags(want.data())) << "matrix " << k;
          EXPECT_EQ(s[polar::kIterations], want[polar::kIterations]) << "matrix " << k;
          // Norms: sums of l^2 positive squares in double ((l^2 - 1) u_double relative), square
          // roots, a product or quotient of two, a rounding to T: 2 eps + l^2 eps_double.
          const Real rel = 2 * eps<T>() + l * l * eps<double>();
          for (int f :
               {int(polar::kAlpha), int(polar::kInvNorm), int(polar::kKappa), int(polar::kZeta)})
            EXPECT_NEAR(s[f], want[f], rel * std::abs(want[f]))
                << "matrix " << k << ", field " << f;
          // delta = ||X_new - X|| / ||X_new|| from the rounded X_new: the entries' errors (4 eps
          // |mag|, below) move it by 4 eps ||mag|| / ||X_new|| absolutely, plus 4 eps delta.
          EXPECT_NEAR(
              s[polar::kDelta], want[polar::kDelta],
              4 * eps<T>() *
                  (frob(mag) / std::max(frob(xn), Real(1e-300)) + std::abs(want[polar::kDelta])));
          // X_new = (zeta X + Y^T / zeta) / 2 per entry: a few roundings each (zeta carries 2
          // eps): 4 eps relative to the magnitudes of the two terms.
          const bool untouched = !polar::active(state.data() + k * polar::kStateSize) ||
                                 (polar::flags(want.data()) & polar::kNonFinite);
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < l; ++i) {
              if (untouched) {
                EXPECT_EQ(Xo.at(k, i, j), X.at(k, i, j)) << "untouched matrix " << k;
              } else {
                EXPECT_NEAR(Xo.at(k, i, j), xn(i, j), 4 * eps<T>() * mag(i, j)) << "matrix " << k;
              }
            }
        }
        EXPECT_EQ(active, want_active);
      }
    }
}

TYPED_TEST_P(BackendConformance, PolarNewtonStepsConvergeToThePolarFactor) {
  using T = TypeParam;
  const Real kappa = 10;
  std::uint64_t seed = 1500;
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (index_t l : {index_t(1), index_t(7), index_t(33)}) {
      SCOPED_TRACE(shape<T>(c, l, l));
      Rng rng(seed++);
      HostStack<T> M(c, l, l), X(c, l, l), Y(c, l, l);
      std::vector<Known> known;
      for (index_t k = 0; k < c; ++k) {
        known.push_back(known_svd(l, l, kappa, rng));
        M.set(k, known.back().M);
      }
      // The stopping tolerance polar_factor uses (src/core/polar.cpp).
      const double u = std::numeric_limits<T>::epsilon() / 2;
      const double tolerance = std::sqrt(2.0 * std::sqrt(u / 1.5)) / std::sqrt(double(l));
      const index_t ns = std::max<index_t>(c, 1) * polar::kStateSize;
      Buffer<T> dM = this->up(M.v);
      // (1) The whole iteration: converges, leaving X near U V^T.
      Buffer<T> dX = this->up(X.v), dY = this->up(Y.v), dS = this->p().allocate(ns);
      this->p().polar_start(M.view(static_cast<const T*>(dM.data())), false, X.view(dX.data()),
                            dS.data(), 0.0);
      const index_t active = this->p().polar_newton_steps(X.view(dX.data()), Y.view(dY.data()),
                                                          dS.data(), 30, tolerance);
      EXPECT_EQ(active, 0);
      const HostStack<T> Xo = this->fetch(X, dX);
      const std::vector<T> st = this->down(dS);
      // (2) The contract's composition, one step (max_steps = 1) at a time, on the same
      // backend: inverse_batched then polar_newton_step with iterations 0, 1, ...
      Buffer<T> dX2 = this->up(X.v), dY2 = this->up(Y.v), dS2 = this->p().allocate(ns);
      this->p().polar_start(M.view(static_cast<const T*>(dM.data())), false, X.view(dX2.data()),
                            dS2.data(), 0.0);
      index_t still = c;
      for (int it = 0; it < 30 && still > 0; ++it) {
        this->p().inverse_batched(X.view(static_cast<const T*>(dX2.data())), Y.view(dY2.data()),
                                  dS2.data());
        still = this->p().polar_newton_step(X.view(dX2.data()),
                                            Y.view(static_cast<const T*>(dY2.data())), dS2.data(),
                                            it, tolerance);
      }
      const HostStack<T> X2 = this->fetch(X, dX2);
      const std::vector<T> st2 = this->down(dS2);
      for (index_t k = 0; k < c; ++k) {
        const T* s = st.data() + k * polar::kStateSize;
        EXPECT_TRUE(polar::flags(s) & polar::kConverged) << "matrix " << k;
        EXPECT_FALSE(polar::failed(s)) << "matrix " << k;
        // Same decisions as the composition (the decisions are far from their thresholds for
        // kappa = 10, so rounding differences between a fused and a composed path cannot
        // flip them).
        EXPECT_EQ(s[polar::kIterations], st2[k * polar::kStateSize + polar::kIterations]);
        EXPECT_EQ(polar::flags(s), polar::flags(st2.data() + k * polar::kStateSize));
        // The Newton phase stops with every singular value in [1, 1 + b], b = sqrt(1 +
        // ||X||_F^2 - l) - 1 <= kSchulzFrom (for kappa = 10 the step test never comes first), so
        // ||X - U V^T||_F <= sqrt(||X||_F^2 - l) (e_j^2 <= s_j^2 - 1 for s_j >= 1), plus the
        // rounding of the steps, O(l eps kappa). The kSchulz Newton-Schulz steps the state asks
        // for, applied here in Real, then reach U V^T to that rounding.
        const Ref want = mul(known[k].U, known[k].V, false, true);
        const Real rounding = 20 * l * eps<T>() * kappa;
        Ref x = Xo.ref(k);
        const Real over = std::max<Real>(frob(x) * frob(x) - Real(l), 0);
        EXPECT_LE(std::sqrt(1 + over) - 1, polar::kSchulzFrom + rounding) << "matrix " << k;
        EXPECT_LE(frob_diff(x, want), std::sqrt(over) + rounding) << "matrix " << k;
        EXPECT_GE(s[polar::kSchulz], T(1)) << "matrix " << k;
        for (int step = 0; step < static_cast<int>(s[polar::kSchulz]); ++step) {
          Ref d = mul(x, x, true, false);  // D = (I - X^T X) / 2, X <- X + X D
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < l; ++i) d(i, j) = ((i == j ? 1 : 0) - d(i, j)) / 2;
          const Ref xd = mul(x, d);
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < l; ++i) x(i, j) += xd(i, j);
        }
        EXPECT_LE(frob_diff(x, want), rounding)
            << "matrix " << k << " after " << s[polar::kSchulz] << " Newton-Schulz steps";
        // The fused and the composed iterations agree to the rounding of the last steps.
        EXPECT_LE(frob_diff(Xo.ref(k), X2.ref(k)), 20 * l * eps<T>() * kappa) << "matrix " << k;
      }
      // (3) max_steps = 1 is exactly one step: every matrix has taken one iteration and is
      // still active (a kappa = 10 start is far from orthogonal).
      if (c > 0 && l > 1) {
        Buffer<T> dS3 = this->p().allocate(ns), dX3 = this->up(X.v);
        this->p().polar_start(M.view(static_cast<const T*>(dM.data())), false, X.view(dX3.data()),
                              dS3.data(), 0.0);
        EXPECT_EQ(this->p().polar_newton_steps(X.view(dX3.data()), Y.view(dY.data()), dS3.data(), 1,
                                               tolerance),
                  c);
        const std::vector<T> st3 = this->down(dS3);
        for (index_t k = 0; k < c; ++k)
          EXPECT_EQ(st3[k * polar::kStateSize + polar::kIterations], T(1)) << "matrix " << k;
      }
    }
}

// polar_start's stop_below: a matrix whose first condition estimate gives 1 / kappa <= stop_below
// stops at that estimate (kDoubtful, no step counted, X as it started, inactive but not failed),
// the others run to convergence as without it; stop_below = 0 stops none.
TYPED_TEST_P(BackendConformance, PolarNewtonStepsStopDoubtfulMatricesAtTheFirstEstimate) {
  using T = TypeParam;
  const index_t c = 4, l = 9;
  // kappa 10 and 1e3 alternately; the estimate lies in [kappa, l kappa], so 1e-3 separates
  // them: 1 / 90 > 1e-3 >= 1 / 1000.
  const Real kappas[] = {10, 1e3, 10, 1e3};
  const double stop = 1e-3;
  Rng rng(1550);
  HostStack<T> M(c, l, l), X(c, l, l), Y(c, l, l);
  for (index_t k = 0; k < c; ++k) M.set(k, known_svd(l, l, kappas[k], rng).M);
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double tolerance = std::sqrt(2.0 * std::sqrt(u / 1.5)) / std::sqrt(double(l));
  Buffer<T> dM = this->up(M.v);
  for (double below : {stop, 0.0}) {
    SCOPED_TRACE("stop_below " + std::to_string(below));
    Buffer<T> dX = this->up(X.v), dY = this->up(Y.v),
              dS = this->p().allocate(c * polar::kStateSize);
    this->p().polar_start(M.view(static_cast<const T*>(dM.data())), false, X.view(dX.data()),
                          dS.data(), below);
    const HostStack<T> X0 = this->fetch(X, dX);
    EXPECT_EQ(this->p().polar_newton_steps(X.view(dX.data()), Y.view(dY.data()), dS.data(), 30,
                                           tolerance),
              0);
    const std::vector<T> st = this->down(dS);
    const HostStack<T> Xn = this->fetch(X, dX);
    for (index_t k = 0; k < c; ++k) {
      const T* s = st.data() + k * polar::kStateSize;
      const bool doubtful = below > 0 && kappas[k] > 100;
      EXPECT_EQ(bool(polar::flags(s) & polar::kDoubtful), doubtful) << "matrix " << k;
      EXPECT_EQ(bool(polar::flags(s) & polar::kConverged), !doubtful) << "matrix " << k;
      EXPECT_FALSE(polar::failed(s)) << "matrix " << k;
      EXPECT_GE(s[polar::kKappa], T(kappas[k] * (1 - 1e-3))) << "matrix " << k;
      if (doubtful) {
        EXPECT_EQ(s[polar::kIterations], T(0)) << "matrix " << k;
        EXPECT_EQ(frob_diff(Xn.ref(k), X0.ref(k)), Real(0)) << "matrix " << k;
      } else {
        EXPECT_GE(s[polar::kIterations], T(1)) << "matrix " << k;
      }
    }
  }
}

TYPED_TEST_P(BackendConformance, AddIdentityBatchedTouchesOnlyTheDiagonal) {
  using T = TypeParam;
  std::uint64_t seed = 1600;
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (index_t l : {index_t(1), index_t(7)})
      for (bool strided : {false, true}) {
        SCOPED_TRACE(shape<T>(c, l, l) + (strided ? ", strided" : ""));
        Rng rng(seed++);
        HostStack<T> C =
            strided ? HostStack<T>(c, l, l, l + 2, (l + 2) * l + 3) : HostStack<T>(c, l, l);
        C.fill_normal(rng);
        Buffer<T> dC = this->up(C.v);
        const T alpha = T(0.375);
        this->p().add_identity_batched(alpha, C.view(dC.data()));
        const HostStack<T> out = this->fetch(C, dC);
        EXPECT_EQ(C.padding_changed(out.v), 0);
        for (index_t k = 0; k < c; ++k)
          for (index_t j = 0; j < l; ++j)
            for (index_t i = 0; i < l; ++i)  // one rounded addition: exact equality in T
              EXPECT_EQ(out.at(k, i, j), i == j ? T(C.at(k, i, j) + alpha) : C.at(k, i, j));
      }
}

// ------------------------------------------------------------------ reductions

TYPED_TEST_P(BackendConformance, AllFiniteFindsNanAndInfAnywhere) {
  using T = TypeParam;
  for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(100003)}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<T> v(static_cast<size_t>(n));
    Rng rng(1700);
    for (auto& x : v) x = static_cast<T>(rng.normal());
    if (n > 2) v[1] = std::numeric_limits<T>::max();  // large but finite
    Buffer<T> d = this->up(v);
    EXPECT_TRUE(this->p().all_finite(d.data(), n));
    for (index_t at : {index_t(0), n / 2, n - 1}) {
      if (n == 0) break;
      for (T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                    -std::numeric_limits<T>::infinity()}) {
        std::vector<T> w = v;
        w[at] = bad;
        Buffer<T> e = this->up(w);
        EXPECT_FALSE(this->p().all_finite(e.data(), n)) << "at " << at << ": " << bad;
        // A prefix that stops before the bad value is finite.
        EXPECT_TRUE(this->p().all_finite(e.data(), at));
      }
    }
  }
}

TYPED_TEST_P(BackendConformance, FirstNonfiniteBatchedReportsTheFirstIndex) {
  using T = TypeParam;
  for (index_t c : {index_t(0), index_t(1), index_t(6)})
    for (index_t r : {index_t(1), index_t(7)})
      for (index_t cl : {index_t(1), index_t(3)}) {
        SCOPED_TRACE(shape<T>(c, r, cl));
        Rng rng(1800);
        HostStack<T> X(c, r, cl);
        X.fill_normal(rng);
        const index_t n = r * cl;
        std::vector<index_t> want(static_cast<size_t>(c), -1);
        // Matrix k (k odd) gets a non-finite value at (k * 5) % n and a later one at n - 1.
        for (index_t k = 1; k < c; k += 2) {
          const index_t first = (k * 5) % n;
          X.v[k * n + first] = k % 4 == 1 ? std::numeric_limits<T>::quiet_NaN()
                                          : -std::numeric_limits<T>::infinity();
          X.v[k * n + n - 1] = std::numeric_limits<T>::infinity();
          want[k] = first;
        }
        Buffer<T> d = this->up(X.v);
        EXPECT_EQ(this->p().first_nonfinite_batched(X.view(static_cast<const T*>(d.data()))), want);
      }
}

TYPED_TEST_P(BackendConformance, OrthogonalityErrorsAgainstLongDouble) {
  using T = TypeParam;
  struct Case {
    index_t r, l;
  };
  std::uint64_t seed = 1900;
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (Case cs : {Case{1, 1}, Case{7, 7}, Case{33, 33}, Case{7, 3}}) {
      SCOPED_TRACE(shape<T>(c, cs.r, cs.l));
      Rng rng(seed++);
      HostStack<T> G(c, cs.r, cs.l);
      for (index_t k = 0; k < c; ++k) {
        // Orthonormal columns plus a perturbation of size 10^-k: errors from O(1) down to
        // O(1e-4).
        Ref q = orthonormal(cs.r, cs.l, rng);
        const Real size = std::pow(Real(10), -static_cast<Real>(k));
        for (auto& x : q.v) x += size * static_cast<Real>(rng.normal());
        G.set(k, q);
      }
      Buffer<T> d = this->up(G.v);
      const std::vector<T> err =
          this->p().orthogonality_errors(G.view(static_cast<const T*>(d.data())));
      ASSERT_EQ(static_cast<index_t>(err.size()), c);
      for (index_t k = 0; k < c; ++k) {
        const Ref g = G.ref(k);
        const Ref gtg = mul(g, g, true, false);
        Ref abs_g = g;
        for (auto& x : abs_g.v) x = std::abs(x);
        // G^T G in T has entrywise error gamma_r (|G|^T |G|); the norm of the error matrix
        // bounds the change of ||G^T G - I||_F. (r + 2) eps is twice gamma_{r+2}.
        const Real tol = (cs.r + 2) * eps<T>() * (frob(mul(abs_g, abs_g, true, false)) + 1) + 1e-30;
        EXPECT_NEAR(err[k], frob_diff(gtg, Ref::identity(cs.l)), tol) << "matrix " << k;
      }
    }
}

TYPED_TEST_P(BackendConformance, ResidualsAndProductColumnNormsAgainstLongDouble) {
  using T = TypeParam;
  struct Case {
    index_t a, l, nz;
  };
  std::uint64_t seed = 2000;
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (Case cs : {Case{1, 1, 1}, Case{7, 5, 5}, Case{33, 7, 7}, Case{9, 4, 2}}) {
      SCOPED_TRACE(shape<T>(c, cs.a, cs.l) + ", nz " + std::to_string(cs.nz));
      Rng rng(seed++);
      HostStack<T> A(c, cs.a, cs.l), G(c, cs.l, cs.nz), Z(1, cs.a, cs.nz, cs.a + 2);
      A.fill_normal(rng);
      G.fill_normal(rng);
      Z.fill_normal(rng);
      Buffer<T> dA = this->up(A.v), dG = this->up(G.v), dZ = this->up(Z.v);
      const auto cA = A.view(static_cast<const T*>(dA.data()));
      const auto cG = G.view(static_cast<const T*>(dG.data()));
      const std::vector<T> res =
          this->p().residuals(cA, cG, Z.matrix(static_cast<const T*>(dZ.data())));
      const std::vector<T> norms = this->p().product_column_norms(cA, cG);
      ASSERT_EQ(static_cast<index_t>(res.size()), c);
      ASSERT_EQ(static_cast<index_t>(norms.size()), c * cs.nz);
      const Ref z = Z.ref(0);
      for (index_t k = 0; k < c; ++k) {
        const Ref a = A.ref(k), g = G.ref(k), y = mul(a, g);
        Ref abs_a = a, abs_g = g;
        for (auto& x : abs_a.v) x = std::abs(x);
        for (auto& x : abs_g.v) x = std::abs(x);
        const Ref mag = mul(abs_a, abs_g);
        // Each entry of A G carries at most gamma_l (|A||G|)_ij; a sum of squares of values
        // with errors e_ij changes by about 2 sum |v_ij| e_ij, and its own accumulation by
        // (entries) eps relative. (l + 2) eps is twice gamma_{l+2}.
        Real r = 0, r_tol = 0;
        for (index_t j = 0; j < cs.nz; ++j) {
          Real col = 0, col_tol = 0;
          for (index_t i = 0; i < cs.a; ++i) {
            const Real dv = y(i, j) - z(i, j);
            r += dv * dv;
            r_tol += 2 * std::abs(dv) * (cs.l + 2) * eps<T>() * (mag(i, j) + std::abs(z(i, j)));
            col += y(i, j) * y(i, j);
            col_tol += 2 * std::abs(y(i, j)) * (cs.l + 2) * eps<T>() * mag(i, j);
          }
          col_tol += (cs.a + 2) * eps<T>() * col;
          EXPECT_NEAR(norms[k + j * c], col, col_tol) << "user " << k << ", column " << j;
        }
        r_tol += (cs.a * cs.nz + 2) * eps<T>() * r;
        EXPECT_NEAR(res[k], r, r_tol) << "user " << k;
      }
    }
}

TYPED_TEST_P(BackendConformance, SumSquaresAccumulatesInDouble) {
  using T = TypeParam;
  for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(100003)}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Rng rng(2100);
    std::vector<T> v(static_cast<size_t>(n));
    // 1 + small: a float accumulator would lose the small parts (n eps_float ~ 1e-2).
    for (auto& x : v) x = static_cast<T>(1 + 1e-3 * rng.normal());
    Real want = 0;
    for (T x : v) want += Real(x) * x;
    Buffer<T> d = this->up(v);
    // Accumulated in double in any order: n eps(double) relative (the squares of float
    // values are exact in double; of doubles, one more rounding each).
    EXPECT_NEAR(this->p().sum_squares(d.data(), n), want, (n + 2) * eps<double>() * want + 1e-300);
  }
}

TYPED_TEST_P(BackendConformance, InnerProductsOfStridedStacksInDouble) {
  using T = TypeParam;
  std::uint64_t seed = 2200;
  for (index_t c : {index_t(0), index_t(1), index_t(5)})
    for (index_t r : {index_t(1), index_t(7), index_t(33), index_t(100)})
      for (index_t cl : {index_t(1), index_t(4)}) {
        SCOPED_TRACE(shape<T>(c, r, cl));
        Rng rng(seed++);
        // X: the row blocks of a (c*r) x cl matrix; Y: padded columns and gaps.
        HostStack<T> X(c, r, cl, std::max<index_t>(c * r, 1), r),
            Y(c, r, cl, r + 3, (r + 3) * cl + 1);
        X.fill_normal(rng);
        Y.fill_normal(rng);
        Buffer<T> dX = this->up(X.v), dY = this->up(Y.v);
        const auto cX = X.view(static_cast<const T*>(dX.data()));
        const std::vector<double> xy =
            this->p().inner_products(cX, Y.view(static_cast<const T*>(dY.data())));
        const std::vector<double> xx = this->p().inner_products(cX, cX);
        ASSERT_EQ(static_cast<index_t>(xy.size()), c);
        ASSERT_EQ(static_cast<index_t>(xx.size()), c);
        for (index_t k = 0; k < c; ++k) {
          Real s = 0, mag = 0, q = 0;
          for (index_t j = 0; j < cl; ++j)
            for (index_t i = 0; i < r; ++i) {
              s += Real(X.at(k, i, j)) * Y.at(k, i, j);
              mag += std::abs(Real(X.at(k, i, j)) * Y.at(k, i, j));
              q += Real(X.at(k, i, j)) * X.at(k, i, j);
            }
          // Accumulated in double: (entries + 2) eps(double) sum |x y|; a float accumulator
          // would miss this by far.
          const Real tol = (r * cl + 2) * eps<double>() * mag;
          EXPECT_NEAR(xy[k], s, tol) << "matrix " << k;
          EXPECT_NEAR(xx[k], q, (r * cl + 2) * eps<double>() * q) << "matrix " << k;
        }
      }
}

TYPED_TEST_P(BackendConformance, SyrkBothOrientationsAreFullAndSymmetric) {
  using T = TypeParam;
  std::uint64_t seed = 1000;
  for (const bool trans : {true, false})
    for (index_t rows : {index_t(1), index_t(9), index_t(40)})
      for (index_t cols : {index_t(1), index_t(6)}) {
        SCOPED_TRACE(shape<T>(1, rows, cols) + (trans ? " A^T A" : " A A^T"));
        Rng rng(seed++);
        const index_t n = trans ? cols : rows;
        const Ref A = gaussian(rows, cols, rng), X = gaussian(n, n, rng);
        Ref C0(n, n);  // beta != 0 needs a symmetric C (the primitive's contract)
        for (index_t j = 0; j < n; ++j)
          for (index_t i = 0; i < n; ++i) C0(i, j) = X(i, j) + X(j, i);
        HostStack<T> Ah(1, rows, cols, rows + 2), Ch(1, n, n, n + 1);
        Ah.set(0, A);
        Ch.set(0, C0);
        Buffer<T> dA = this->up(Ah.v), dC = this->up(Ch.v);
        const T alpha = T(0.75), beta = T(-0.5);
        this->p().syrk(trans ? Op::trans : Op::none, alpha,
                       Ah.matrix(static_cast<const T*>(dA.data())), beta, Ch.matrix(dC.data()));
        const HostStack<T> Co = this->fetch(Ch, dC);
        EXPECT_EQ(Ch.padding_changed(Co.v), 0);
        const Ref a = Ah.ref(0), c0 = Ch.ref(0), c = Co.ref(0);
        const Ref prod = trans ? mul(a, a, true, false) : mul(a, a, false, true);
        const index_t k = trans ? rows : cols;
        for (index_t j = 0; j < n; ++j)
          for (index_t i = 0; i < n; ++i) {
            // Each entry is a k-term dot product: |error| <= k u sum |a||a| + the beta term.
            Real mag = std::abs(beta * c0(i, j));
            for (index_t t = 0; t < k; ++t)
              mag += std::abs(alpha) *
                     (trans ? std::abs(a(t, i) * a(t, j)) : std::abs(a(i, t) * a(j, t)));
            EXPECT_NEAR(c(i, j), alpha * prod(i, j) + beta * c0(i, j), (k + 2) * eps<T>() * mag)
                << i << ", " << j;
            // Both triangles written; symmetric to rounding.
            EXPECT_NEAR(c(i, j), c(j, i), 2 * (k + 2) * eps<T>() * mag);
          }
      }
}

TYPED_TEST_P(BackendConformance, SyevLargestOfTheKnownSpectrum) {
  using T = TypeParam;
  std::uint64_t seed = 1050;
  for (index_t n : {index_t(1), index_t(8), index_t(30)})
    for (index_t k : {index_t(1), index_t(3), n}) {
      if (k > n) continue;
      SCOPED_TRACE(shape<T>(1, n, n) + ", k " + std::to_string(k));
      Rng rng(seed++);
      // S = Q diag(d) Q^T with distinct eigenvalues d_j = 2 - 3 j / n (some negative), so that
      // every eigenvector is determined; the strictly upper triangle holds junk (not read).
      const Ref Q = orthonormal(n, n, rng);
      std::vector<Real> d(static_cast<size_t>(n));
      for (index_t j = 0; j < n; ++j) d[j] = Real(2) - Real(3) * j / n;
      Ref S(n, n);
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < n; ++i) {
          Real s = 0;
          for (index_t t = 0; t < n; ++t) s += Q(i, t) * d[t] * Q(j, t);
          S(i, j) = s;
        }
      HostStack<T> Sh(1, n, n, n + 2), Vh(1, n, k, n + 1);
      Sh.set(0, S);
      const Ref St = Sh.ref(0);  // the T-rounded matrix the backend sees (lower triangle)
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < j; ++i) Sh.at(0, i, j) = T(1e4);
      Buffer<T> dS = this->up(Sh.v), dV = this->up(Vh.v);
      std::vector<T> w(static_cast<size_t>(k));
      this->p().syev_largest(Sh.matrix(dS.data()), k, w.data(), Vh.matrix(dV.data()));
      const HostStack<T> Vo = this->fetch(Vh, dV);
      EXPECT_EQ(Vh.padding_changed(Vo.v), 0);
      const Ref v = Vo.ref(0);
      Ref Ssym = St;
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < j; ++i) Ssym(i, j) = St(j, i);
      const Real snorm = frob(Ssym);
      // Backward stable: eigenvalues within O(n eps ||S||) (Weyl); 10 n eps margin. Gaps are
      // 3 / n, so the eigenvectors are within O(n eps ||S|| n / 3): checked by the residual.
      const Real tol = 10 * n * eps<T>() * snorm;
      const Ref sv = mul(Ssym, v);
      for (index_t j = 0; j < k; ++j) {
        EXPECT_NEAR(w[j], d[j], tol) << "eigenvalue " << j << " (largest first)";
        Real res = 0;
        for (index_t i = 0; i < n; ++i)
          res += (sv(i, j) - w[j] * v(i, j)) * (sv(i, j) - w[j] * v(i, j));
        EXPECT_LE(std::sqrt(res), tol) << "residual " << j;
      }
      EXPECT_LE(frob_diff(mul(v, v, true, false), Ref::identity(k)), 10 * n * eps<T>());
    }
}

REGISTER_TYPED_TEST_SUITE_P(
    BackendConformance, MemoryRoundTripCopyFillSynchronize,
    Float64ConversionsWidenExactlyAndRoundToNearest, GemmAllTransposesShapesAndStrides,
    GemmBatchedBroadcastStridedAndEmpty, TrsmUpperBatchedReadsOnlyTheUpperTriangle,
    VstackAndUnvstackAreExactCopies, GatherFromAnyStridesIsAnExactCopy,
    GeamOnStridedBlocksAndInPlace, PolarBatchedMatchesTheKnownPolarFactor,
    QrBatchedOrthogonalTriangularAndRatio, SvdTopkExactAndRandomizedOnKnownSpectra,
    LstsqBatchedMatchesTheKnownSolution, SygvSmallestEigenpairsOfTheKnownPencil,
    SygvSmallestRejectsAnIndefiniteB, PolarStartScalesAndFlags,
    InverseBatchedInvertsActiveAndFlagsSingular, PolarNewtonStepFollowsTheScalarContract,
    PolarNewtonStepsConvergeToThePolarFactor,
    PolarNewtonStepsStopDoubtfulMatricesAtTheFirstEstimate,
    AddIdentityBatchedTouchesOnlyTheDiagonal, AllFiniteFindsNanAndInfAnywhere,
    FirstNonfiniteBatchedReportsTheFirstIndex, OrthogonalityErrorsAgainstLongDouble,
    ResidualsAndProductColumnNormsAgainstLongDouble, SumSquaresAccumulatesInDouble,
    InnerProductsOfStridedStacksInDouble, SyrkBothOrientationsAreFullAndSymmetric,
    SyevLargestOfTheKnownSpectrum);

}  // namespace dcalign::conformance
