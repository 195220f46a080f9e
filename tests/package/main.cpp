// Consumer of the installed dcalign package: three users release their anchor representations
// under SameSpan-Orth (F_i = V E_i with one orthonormal V and Haar E_i), the analyst aligns
// them with ODC on the CPU backend, and the result must satisfy paper 001 Theorem 5.3: every
// G_i is orthogonal and F_i G_i is the same for all users. Prints "consumer: ok" and returns 0,
// or names the failed check and returns 1.
#include <dcalign/align.hpp>
#include <dcalign/npy.hpp>
#include <dcalign/random.hpp>
#include <dcalign/user.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

using dcalign::index_t;
using dcalign::Matrix;

Matrix<double> multiply(const Matrix<double>& A, const Matrix<double>& B) {
  Matrix<double> C(A.rows(), B.cols());
  for (index_t j = 0; j < B.cols(); ++j)
    for (index_t k = 0; k < A.cols(); ++k)
      for (index_t i = 0; i < A.rows(); ++i) C(i, j) += A(i, k) * B(k, j);
  return C;
}

double frobenius(const Matrix<double>& A) {
  double s = 0;
  for (index_t j = 0; j < A.cols(); ++j)
    for (index_t i = 0; i < A.rows(); ++i) s += A(i, j) * A(i, j);
  return std::sqrt(s);
}

int failures = 0;
void check(bool ok, const std::string& what, double value, double bound) {
  std::printf("consumer: %-44s %.3e (bound %.0e) %s\n", what.c_str(), value, bound,
              ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const index_t users = 3, samples = 60, features = 12, l = 4, anchor_rows = 40;
    dcalign::Rng rng(2024);
    std::vector<dcalign::User<double>> people;
    for (index_t i = 0; i < users; ++i)
      people.emplace_back(dcalign::random_normal<double>(samples, features, rng),
                          "user " + std::to_string(i + 1));
    // SameSpan-Orth: every user mixes user 1's top-l subspace with its own Haar rotation.
    const auto V = dcalign::top_right_singular_vectors(
        dcalign::random_normal<double>(samples, features, rng), l, false);
    for (index_t i = 0; i < users; ++i)
      people[static_cast<size_t>(i)].choose_secret_basis_in(V, dcalign::Mixing::haar,
                                                            100 + static_cast<std::uint64_t>(i));
    const auto anchor =
        dcalign::make_anchor<double>(anchor_rows, features, dcalign::AnchorKind::uniform, 7);
    std::vector<Matrix<double>> released;
    for (const auto& u : people) released.push_back(u.release_anchor(anchor));
    const auto anchors = dcalign::Stack<double>::from_matrices(released);

    // Through an NPY file, as the command line would hand it over.
    const std::string file = (argc > 1 ? std::string(argv[1]) : std::string(".")) + "/A.npy";
    dcalign::write_npy<double>(file, anchors.view());
    const auto loaded = dcalign::read_npy_stack<double>(file);

    dcalign::AlignOptions opts;  // ODC, Haar O from seed 0
    auto backend = dcalign::make_backend(dcalign::Device::cpu);
    const auto result = dcalign::align(loaded, opts, *backend);
    std::printf("consumer: dcalign %s on %s, %lld users, l = %lld\n", result.report.method.c_str(),
                result.report.device.c_str(), static_cast<long long>(result.report.users),
                static_cast<long long>(result.report.dim));

    if (loaded.count() != users || result.G.count() != users || result.G.rows() != l) {
      std::printf("consumer: FAILED: G has shape %lld x %lld x %lld\n",
                  static_cast<long long>(result.G.count()), static_cast<long long>(result.G.rows()),
                  static_cast<long long>(result.G.cols()));
      return 1;
    }
    check(result.report.orthogonality_error <= 1e-10, "report: max_i ||G_i^T G_i - I||_F",
          result.report.orthogonality_error, 1e-10);
    double orth = 0, concord = 0;
    const auto ref = multiply(people[0].reveal_secret_basis(), result.G.matrix(0));  // F_1 G_1
    for (index_t i = 0; i < users; ++i) {
      const auto G = result.G.matrix(i);
      Matrix<double> GtG(l, l);
      for (index_t a = 0; a < l; ++a)
        for (index_t b = 0; b < l; ++b) {
          double s = 0;
          for (index_t k = 0; k < l; ++k) s += G(k, a) * G(k, b);
          GtG(a, b) = s - (a == b ? 1.0 : 0.0);
        }
      orth = std::max(orth, frobenius(GtG));
      auto diff = multiply(people[static_cast<size_t>(i)].reveal_secret_basis(), G);
      for (index_t j = 0; j < l; ++j)
        for (index_t r = 0; r < features; ++r) diff(r, j) -= ref(r, j);
      concord = std::max(concord, frobenius(diff) / frobenius(ref));
    }
    // Bounds: a few orders above eps * cond of these well-conditioned 40 x 4 anchors.
    check(orth <= 1e-10, "recomputed max_i ||G_i^T G_i - I||_F", orth, 1e-10);
    check(concord <= 1e-8, "max_i ||F_i G_i - F_1 G_1||_F / ||F_1 G_1||_F", concord, 1e-8);
    // The ODC objective is sum_i ||A_i G_i - A_1 O||_F^2, zero under SameSpan-Orth.
    const double scale = frobenius(released[0]) * frobenius(released[0]);
    check(result.report.objective <= 1e-12 * scale, "report: objective / ||A_1||_F^2",
          result.report.objective / scale, 1e-12);
  } catch (const std::exception& e) {
    std::printf("consumer: error: %s\n", e.what());
    return 1;
  }
  if (failures > 0) return 1;
  std::printf("consumer: ok\n");
  return 0;
}
