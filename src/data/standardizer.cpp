// Standardisation of feature columns (Standardizer), exact for values near the largest double.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "datasets_internal.hpp"
#include "dcalign/data.hpp"

namespace dcalign::data {

namespace {

// The statistics below are computed on the values divided by a power of two near the largest
// magnitude: scaling by a power of two is exact, so the results are the same bits as the plain
// formulas, but sums of values near the largest double (which the readers accept as finite)
// cannot overflow to inf and turn a column into NaN.
double power_of_two_scale(const double* x, index_t n, index_t stride) {
  double top = 0.0;
  for (index_t i = 0; i < n; ++i) top = std::max(top, std::fabs(x[i * stride]));
  if (!(top > 0.0) || !std::isfinite(top)) return 1.0;
  int e = 0;
  std::frexp(top, &e);  // top = f * 2^e with f in [0.5, 1); 2^(e-1) is always a finite double
  return std::ldexp(1.0, e - 1);
}

}  // namespace

namespace detail {

double scaled_mean(const double* x, index_t n, index_t stride) {
  const double s = power_of_two_scale(x, n, stride);
  double sum = 0.0;
  for (index_t i = 0; i < n; ++i) sum += x[i * stride] / s;
  return sum / static_cast<double>(n) * s;
}

}  // namespace detail

Standardizer Standardizer::fit(const Matrix<double>& X, const std::vector<index_t>& columns) {
  if (X.rows() == 0) throw InvalidInput("Standardizer::fit: no rows to fit on");
  Standardizer s;
  s.columns = columns;
  const index_t n = X.rows();
  for (index_t c : columns) {
    if (c < 0 || c >= X.cols())
      throw InvalidInput("Standardizer::fit: column " + std::to_string(c) + " out of range for " +
                         std::to_string(X.cols()) + " columns");
    // Two passes: the one-pass formula loses digits on columns such as fnlwgt (~1e5 +- 1e5).
    // Both on values scaled by a power of two (exact; see power_of_two_scale), so that values
    // near the largest double give their true mean and deviation instead of inf and NaN.
    const double* x = X.data() + c * n;
    const double scale = power_of_two_scale(x, n, 1);
    const double mean = detail::scaled_mean(x, n, 1);
    double ss = 0.0;
    for (index_t i = 0; i < n; ++i) {
      const double d = x[i] / scale - mean / scale;
      ss += d * d;
    }
    const double sd = std::sqrt(ss / static_cast<double>(n)) * scale;
    // The population deviation of values in [-M, M] is at most M, so only a non-finite value
    // (which the readers never produce) makes these non-finite.
    if (!std::isfinite(mean) || !std::isfinite(sd))
      throw InvalidInput("Standardizer::fit: column " + std::to_string(c) +
                         " holds non-finite values");
    s.mean.push_back(mean);
    s.sd.push_back(sd > 0.0 ? sd : 1.0);
  }
  return s;
}

void Standardizer::apply(Matrix<double>& X) const {
  for (size_t k = 0; k < columns.size(); ++k) {
    const index_t c = columns[k];
    if (c < 0 || c >= X.cols())
      throw InvalidInput("Standardizer::apply: column " + std::to_string(c) + " out of range for " +
                         std::to_string(X.cols()) + " columns");
    for (index_t i = 0; i < X.rows(); ++i) {
      const double x = X(i, c);
      double z = (x - mean[k]) / sd[k];
      if (!std::isfinite(z)) {
        // x - mean overflowed (values near the largest double on both sides): the same
        // quotient on operands halved (exact), and an error only if the result itself is out of
        // range (a value far outside what the statistics were fitted on).
        z = (0.5 * x - 0.5 * mean[k]) / (0.5 * sd[k]);
        if (!std::isfinite(z))
          throw InvalidInput("Standardizer::apply: row " + std::to_string(i) + ", column " +
                             std::to_string(c) + ": (x - mean) / sd is out of the double range");
      }
      X(i, c) = z;
    }
  }
}

}  // namespace dcalign::data
