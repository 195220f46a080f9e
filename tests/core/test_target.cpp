// ODC's Haar O drawn on a backend (haar_rotation_on_backend, src/core/odc.cpp), which the CUDA
// backend takes from l = haar_on_backend_from on: run here on the CPU backend, whose
// qr_batched is LAPACK's Householder QR and so makes about half of R's diagonal negative. The
// result must be target_rotation's O for the same seed (the host route, random_orthogonal),
// orthogonal, and carry Mezzadri's convention, a positive diagonal in R = O^T G.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/common.hpp"
#include "dcalign/align.hpp"
#include "dcalign/random.hpp"
#include "test_util.hpp"

namespace dcalign {
namespace {

template <typename T>
class HaarOnBackend : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(HaarOnBackend, Precisions);

TYPED_TEST(HaarOnBackend, IsTheHostsHaarMatrixUpToRounding) {
  using T = TypeParam;
  auto backend = make_backend(Device::cpu);
  Primitives<T>& p = backend->template primitives<T>();
  for (const index_t l : {1, 7, 64, 200}) {
    const std::uint64_t seed = 40 + static_cast<std::uint64_t>(l);
    AlignOptions opts;
    opts.seed = seed;
    opts.rotation = TargetRotation::haar;
    const Matrix<double> host = core::target_rotation(opts, l);
    Buffer<T> o = core::haar_rotation_on_backend(p, seed, l);
    Matrix<T> got(l, l);
    p.to_host(o.data(), got.data(), l * l);

    // The same factorisation in float64 of the same Gaussian: equal up to the rounding of the
    // two QRs (a few l u in float64) and then of the entries to T (half an ulp of |O_ij| <= 1).
    const double tol = std::is_same<T, float>::value ? 1e-7 : 1e-12;
    double worst = 0;
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < l; ++i)
        worst = std::max(worst, std::abs(double(got(i, j)) - host(i, j)));
    EXPECT_LE(worst, tol) << "l = " << l;

    // Orthogonal to T's precision: ||O^T O - I||_F <= l u_T (the rounding of l^2 entries).
    const Matrix<double> od = testing::to_double(got);
    EXPECT_LE(testing::orthogonality_error(od), double(l) * testing::eps<T>()) << "l = " << l;

    // Mezzadri's convention, independently of the host route: R = O^T G has a positive
    // diagonal, G the seed's Gaussian. A dropped sign flip makes about half of it negative.
    Rng rng = Rng::stream(seed, core::kHaarStream);
    const Matrix<double> gaussian = random_normal<double>(l, l, rng);
    const Matrix<double> r = testing::mul(od, gaussian, true, false);
    for (index_t j = 0; j < l; ++j) EXPECT_GT(r(j, j), 0.0) << "l = " << l << ", j = " << j;
  }
}

// The order of ODC's products that hides the host's draw of O behind the device's product
// (products_rotation_last, taken by backends other than the CPU for l < haar_on_backend_from):
// Z must be A_r O and the products W^T Z with target_rotation's O, to the rounding of the two
// orders of multiplication, entry by entry (the bounds are derived below).
TYPED_TEST(HaarOnBackend, RotationLastGivesTheProductsOfTheTarget) {
  using T = TypeParam;
  auto backend = make_backend(Device::cpu);
  Primitives<T>& p = backend->template primitives<T>();
  const index_t c = 4, a = 30, l = 6, reference = 2;
  Rng rng = Rng::stream(91, 1);
  const Matrix<double> W = random_normal<double>(a, c * l, rng);
  AlignOptions opts;
  opts.seed = 12;
  opts.rotation = TargetRotation::haar;
  Buffer<T> w = p.allocate(a * c * l), scratch = p.allocate(c * l * l), z = p.allocate(a * l),
            products = p.allocate(c * l * l);
  const Matrix<T> wt = testing::convert<T>(W);
  p.to_device(wt.data(), w.data(), a * c * l);
  core::products_rotation_last(p, StackView<const T>(w.data(), c, a, l), reference, opts,
                               scratch.data(), MatrixView<T>(z.data(), a, l), products.data());
  Matrix<T> zh(a, l), mh(c * l, l);
  p.to_host(z.data(), zh.data(), a * l);
  p.to_host(products.data(), mh.data(), c * l * l);

  const Matrix<double> O = core::target_rotation(opts, l);
  const Matrix<double> Ar =
      testing::to_double(MatrixView<const T>(wt.data() + reference * a * l, a, l));
  const Matrix<double> Zref = testing::mul(Ar, O);
  const Matrix<double> Mref = testing::mul(testing::to_double(wt), Zref, true, false);
  // Entrywise bounds of the two orders' rounding against the exact products: Z's entries are
  // sums of l terms, the products' of a terms and then l, with O rounded to T (one u each);
  // so (l + 2) u (|A_r| |O|) for Z and (a + l + 3) u (|W|^T |A_r| |O|) for the products, twice
  // that for the two sides' errors.
  auto absolute = [](Matrix<double> m) {
    for (index_t e = 0; e < m.size(); ++e) m.data()[e] = std::abs(m.data()[e]);
    return m;
  };
  const Matrix<double> zscale = testing::mul(absolute(Ar), absolute(O));
  const Matrix<double> mscale = testing::mul(
      testing::mul(absolute(testing::to_double(wt)), absolute(Ar), true, false), absolute(O));
  const double u = testing::eps<T>() / 2;
  for (index_t j = 0; j < l; ++j) {
    for (index_t i = 0; i < a; ++i)
      EXPECT_LE(std::abs(double(zh(i, j)) - Zref(i, j)), 2 * double(l + 2) * u * zscale(i, j))
          << i << " " << j;
    for (index_t i = 0; i < c * l; ++i)
      EXPECT_LE(std::abs(double(mh(i, j)) - Mref(i, j)), 2 * double(a + l + 3) * u * mscale(i, j))
          << i << " " << j;
  }
}

}  // namespace
}  // namespace dcalign
