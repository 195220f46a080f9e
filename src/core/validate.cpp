// Input checks shared by all methods: the anchors' shape and values, the options (the schema),
// supplied matrices, overflow and rank. The steps several methods share are in shared_steps.cpp
// and procrustes.cpp.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/common.hpp"
#include "dcalign/options.hpp"

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

void require_finite(const Matrix<double>& m, const std::string& what) {
  for (index_t j = 0; j < m.cols(); ++j)
    for (index_t i = 0; i < m.rows(); ++i)
      if (!std::isfinite(m(i, j)))
        throw InvalidInput(what + " has a non-finite entry (NaN or Inf) at row " +
                           std::to_string(i) + ", column " + std::to_string(j) +
                           "; every entry must be finite");
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

#define DCALIGN_INSTANTIATE_COMMON(T)                                        \
  template index_t first_overflowing<T>(Primitives<T>&, StackView<const T>); \
  template void check_rank<T>(const std::vector<T>&, double, const std::string&);
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
