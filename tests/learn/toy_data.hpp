#pragma once
// Toy classification data shared by the learning-layer tests.
#include <cmath>
#include <cstdint>
#include <vector>

#include "dcalign/matrix.hpp"
#include "dcalign/random.hpp"

namespace dcalign::learn::testing {

struct Data {
  Matrix<double> X;
  std::vector<double> y;
};

// `classes` Gaussian blobs (unit variance) with centres on a circle of the given radius in the
// first two coordinates; sample i belongs to class i % classes.
inline Data blobs(index_t n, int classes, double radius, std::uint64_t seed, index_t d = 2) {
  Rng rng(seed);
  Data data{Matrix<double>(n, d), std::vector<double>(static_cast<size_t>(n))};
  for (index_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % classes);
    const double angle = 6.283185307179586 * c / classes;
    for (index_t j = 0; j < d; ++j) data.X(i, j) = rng.normal();
    data.X(i, 0) += radius * std::cos(angle);
    data.X(i, 1) += radius * std::sin(angle);
    data.y[static_cast<size_t>(i)] = c;
  }
  return data;
}

}  // namespace dcalign::learn::testing
