// User side: anchors, secret bases and released representations (paper 001, Alg. 1, eq. 92).
#include "dcalign/user.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "base/host_blas.hpp"
#include "dcalign/random.hpp"

namespace dcalign {
namespace {

template <typename T>
Matrix<T> multiply(const Matrix<T>& A, const Matrix<T>& B, const char* what) {
  if (A.cols() != B.rows())
    throw InvalidInput(std::string(what) + ": inner dimensions differ (" +
                       std::to_string(A.rows()) + " x " + std::to_string(A.cols()) + " times " +
                       std::to_string(B.rows()) + " x " + std::to_string(B.cols()) + ")");
  Matrix<T> C(A.rows(), B.cols());
  if (C.size() == 0 || A.cols() == 0) return C;
  base::gemm(false, false, static_cast<lapack_int>(A.rows()), static_cast<lapack_int>(B.cols()),
             static_cast<lapack_int>(A.cols()), T(1), A.data(), static_cast<lapack_int>(A.rows()),
             B.data(), static_cast<lapack_int>(B.rows()), T(0), C.data(),
             static_cast<lapack_int>(C.rows()));
  return C;
}

template <typename T>
void require_finite(const Matrix<T>& m, const std::string& what) {
  for (index_t j = 0; j < m.cols(); ++j)
    for (index_t i = 0; i < m.rows(); ++i)
      if (!std::isfinite(m(i, j)))
        throw InvalidInput(what + ": non-finite value at row " + std::to_string(i) + ", column " +
                           std::to_string(j));
}

template <typename T>
Matrix<T> mixing_matrix(index_t l, Mixing mixing, std::uint64_t seed) {
  Rng rng(seed);
  return mixing == Mixing::haar ? random_orthogonal<T>(l, rng) : random_uniform<T>(l, l, rng);
}

}  // namespace

template <typename T>
Matrix<T> make_anchor(index_t rows, index_t features, AnchorKind kind, std::uint64_t seed) {
  if (rows < 1 || features < 1)
    throw InvalidInput("make_anchor: the anchor needs at least one row and one feature, got " +
                       std::to_string(rows) + " x " + std::to_string(features));
  Rng rng(seed);
  return kind == AnchorKind::uniform ? random_uniform<T>(rows, features, rng)
                                     : random_normal<T>(rows, features, rng);
}

template <typename T>
Matrix<T> top_right_singular_vectors(const Matrix<T>& X, index_t l, bool center) {
  const index_t n = X.rows(), m = X.cols();
  if (l < 1 || l > std::min(n, m))
    throw InvalidInput("secret basis: dimension l = " + std::to_string(l) +
                       " must be between 1 and min(samples, features) = min(" + std::to_string(n) +
                       ", " + std::to_string(m) + ")");
  require_finite(X, "secret basis: private data");
  Matrix<T> a = X;
  if (center)
    for (index_t j = 0; j < m; ++j) {
      double mean = 0;
      for (index_t i = 0; i < n; ++i) mean += a(i, j);
      mean /= static_cast<double>(n);
      for (index_t i = 0; i < n; ++i) a(i, j) -= static_cast<T>(mean);
    }
  const auto ln = static_cast<lapack_int>(n), lm = static_cast<lapack_int>(m);
  const lapack_int p = std::min(ln, lm);
  std::vector<T> s(p), vt(static_cast<size_t>(p) * m);
  // Only V^T is needed: jobu = 'N', jobvt = 'S'.
  base::check_info(base::gesvd_right(ln, lm, a.data(), ln, s.data(), vt.data(), p), "gesvd");
  Matrix<T> V(m, l);
  for (index_t j = 0; j < l; ++j) {
    index_t arg = 0;
    for (index_t i = 0; i < m; ++i)
      if (std::abs(vt[j + i * p]) > std::abs(vt[j + arg * p])) arg = i;
    const T sign = vt[j + arg * p] < 0 ? T(-1) : T(1);
    for (index_t i = 0; i < m; ++i) V(i, j) = sign * vt[j + i * p];
  }
  return V;
}

template <typename T>
User<T>::User(Matrix<T> data, std::string name) : data_(std::move(data)), name_(std::move(name)) {}

template <typename T>
void User<T>::choose_secret_basis(index_t l, Mixing mixing, std::uint64_t seed, bool center) {
  choose_secret_basis_in(top_right_singular_vectors(data_, l, center), mixing, seed);
}

template <typename T>
void User<T>::choose_secret_basis_in(const Matrix<T>& V, Mixing mixing, std::uint64_t seed) {
  if (V.rows() != features())
    throw InvalidInput(name_ + ": subspace basis has " + std::to_string(V.rows()) +
                       " rows, expected the feature count " + std::to_string(features()));
  if (V.cols() < 1 || V.cols() > V.rows())
    throw InvalidInput(name_ + ": subspace dimension " + std::to_string(V.cols()) +
                       " must be between 1 and the feature count " + std::to_string(V.rows()));
  basis_ = multiply(V, mixing_matrix<T>(V.cols(), mixing, seed), "secret basis");
}

template <typename T>
void User<T>::require_basis(const char* what) const {
  if (!has_secret_basis())
    throw InvalidInput(name_ + ": " + what + " before a secret basis was chosen");
}

template <typename T>
Matrix<T> User<T>::release_data() const {
  require_basis("release_data");
  return multiply(data_, basis_, (name_ + ": X F").c_str());
}

template <typename T>
Matrix<T> User<T>::release_anchor(const Matrix<T>& anchor) const {
  require_basis("release_anchor");
  if (anchor.cols() != features())
    throw InvalidInput(name_ + ": anchor has " + std::to_string(anchor.cols()) +
                       " features, expected " + std::to_string(features()));
  return multiply(anchor, basis_, (name_ + ": A F").c_str());
}

template <typename T>
Matrix<T> User<T>::project(const Matrix<T>& Y) const {
  require_basis("project");
  if (Y.cols() != features())
    throw InvalidInput(name_ + ": data has " + std::to_string(Y.cols()) + " features, expected " +
                       std::to_string(features()));
  return multiply(Y, basis_, (name_ + ": Y F").c_str());
}

template <typename T>
Matrix<T> User<T>::map(const Matrix<T>& Y, const Matrix<T>& G) const {
  return apply_change_of_basis(project(Y), G);
}

template <typename T>
const Matrix<T>& User<T>::reveal_secret_basis() const {
  require_basis("reveal_secret_basis");
  return basis_;
}

template <typename T>
Matrix<T> apply_change_of_basis(const Matrix<T>& released, const Matrix<T>& G) {
  // l x l from align(); l_i x dim from align_ragged (users of different l_i).
  if (G.rows() != released.cols() || G.cols() < 1)
    throw InvalidInput("apply_change_of_basis: G is " + std::to_string(G.rows()) + " x " +
                       std::to_string(G.cols()) + ", expected " + std::to_string(released.cols()) +
                       " x dim (dim >= 1): one row per column of the released data");
  return multiply(released, G, "apply_change_of_basis");
}

template <typename T>
Matrix<T> map_to_collaboration(const Matrix<T>& Y, const Matrix<T>& F, const Matrix<T>& G) {
  return apply_change_of_basis(multiply(Y, F, "map_to_collaboration: Y F"), G);
}

#define DCALIGN_INSTANTIATE_USER(T)                                                  \
  template Matrix<T> make_anchor<T>(index_t, index_t, AnchorKind, std::uint64_t);    \
  template Matrix<T> top_right_singular_vectors<T>(const Matrix<T>&, index_t, bool); \
  template class User<T>;                                                            \
  template Matrix<T> apply_change_of_basis<T>(const Matrix<T>&, const Matrix<T>&);   \
  template Matrix<T> map_to_collaboration<T>(const Matrix<T>&, const Matrix<T>&, const Matrix<T>&);
DCALIGN_INSTANTIATE_USER(float)
DCALIGN_INSTANTIATE_USER(double)

}  // namespace dcalign
