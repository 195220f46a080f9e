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

}  // namespace
}  // namespace dcalign
