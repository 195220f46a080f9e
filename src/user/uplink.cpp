// The user's uplink in a reduced number format (include/dcalign/user.hpp, Uplink): float32,
// float16 and per-column int8, each as the analyst dequantises it. float16 rounding is done
// here on doubles: C++17 has no half type, and rounding through float first would round twice
// (a double just above a float16 tie can round to the tie in float and then to even).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "dcalign/error.hpp"
#include "dcalign/user.hpp"

namespace dcalign {
namespace {

// float16: 10 fraction bits, exponents -14 .. 15; the grid spacing of the binade of x, or of the
// subnormals below 2^-14.
double round_to_half(double x) {
  if (x == 0) return x;
  int e = 0;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int exponent = std::max(e - 1, -14);
  const double quantum = std::ldexp(1.0, exponent - 10);
  return std::nearbyint(x / quantum) * quantum;  // ties to even in the default rounding mode
}

[[noreturn]] void bad_entry(const std::string& what, index_t i, index_t j, double v,
                            const std::string& why) {
  throw InvalidInput(what + ": entry (" + std::to_string(i) + ", " + std::to_string(j) +
                     ") = " + std::to_string(v) + " " + why);
}

}  // namespace

Uplink parse_uplink(const std::string& name) {
  if (name == "fp64") return Uplink::fp64;
  if (name == "fp32") return Uplink::fp32;
  if (name == "fp16") return Uplink::fp16;
  if (name == "int8") return Uplink::int8;
  throw InvalidInput("unknown uplink format '" + name + "'; expected fp64, fp32, fp16 or int8");
}

std::string to_string(Uplink u) {
  switch (u) {
    case Uplink::fp64:
      return "fp64";
    case Uplink::fp32:
      return "fp32";
    case Uplink::fp16:
      return "fp16";
    case Uplink::int8:
      return "int8";
  }
  return "fp64";
}

int uplink_bits(Uplink u) {
  switch (u) {
    case Uplink::fp64:
      return 64;
    case Uplink::fp32:
      return 32;
    case Uplink::fp16:
      return 16;
    case Uplink::int8:
      return 8;
  }
  return 64;
}

double uplink_bytes(index_t rows, index_t cols, Uplink format) {
  const double values = static_cast<double>(rows) * static_cast<double>(cols);
  const double scales = format == Uplink::int8 ? 4.0 * static_cast<double>(cols) : 0.0;
  return values * uplink_bits(format) / 8.0 + scales;
}

Matrix<double> through_uplink(const Matrix<double>& M, Uplink format, const std::string& what) {
  Matrix<double> out(M.rows(), M.cols());
  for (index_t j = 0; j < M.cols(); ++j)
    for (index_t i = 0; i < M.rows(); ++i)
      if (!std::isfinite(M(i, j))) bad_entry(what, i, j, M(i, j), "is not finite");
  switch (format) {
    case Uplink::fp64:
      return M;
    case Uplink::fp32:
      for (index_t j = 0; j < M.cols(); ++j)
        for (index_t i = 0; i < M.rows(); ++i) {
          const float f = static_cast<float>(M(i, j));
          if (std::isinf(f))
            bad_entry(what, i, j, M(i, j), "is beyond float32's range (an fp32 uplink)");
          out(i, j) = f;
        }
      return out;
    case Uplink::fp16:
      for (index_t j = 0; j < M.cols(); ++j)
        for (index_t i = 0; i < M.rows(); ++i) {
          const double v = M(i, j);
          if (!(std::abs(v) < 65520.0))
            bad_entry(what, i, j, v,
                      "is beyond float16's range (|m| < 65520 for an fp16 uplink); rescale the "
                      "data or use fp32");
          out(i, j) = round_to_half(v);
        }
      return out;
    case Uplink::int8:
      for (index_t j = 0; j < M.cols(); ++j) {
        double largest = 0;
        for (index_t i = 0; i < M.rows(); ++i) largest = std::max(largest, std::abs(M(i, j)));
        // The scale as sent (float32); an all-zero column has scale 0 and stays zero.
        const double s = static_cast<float>(largest / 127.0);
        for (index_t i = 0; i < M.rows(); ++i) {
          if (!(s > 0)) {
            out(i, j) = 0.0;
            continue;
          }
          const double q = std::nearbyint(M(i, j) / s);
          // |m / s| exceeds 127 only by the scale's float32 rounding (1e-7 relative): the
          // bound keeps such an entry on the grid, it clips nothing.
          out(i, j) = std::max(-127.0, std::min(127.0, q)) * s;
        }
      }
      return out;
  }
  return out;
}

}  // namespace dcalign
