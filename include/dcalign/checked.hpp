#pragma once
// Checked size arithmetic. Every size that is computed from values a user supplies (a file's
// header, a config key, a CLI option) is formed with these functions, so that an absurd value is
// reported as what it is instead of wrapping around (signed overflow is undefined behaviour) and
// then allocating the wrong amount.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "dcalign/error.hpp"

namespace dcalign {

/// a * b for non-negative sizes; throws InvalidInput naming `what` when a factor is negative or
/// the product does not fit int64_t.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t p = 0;
  if (a < 0 || b < 0)
    throw InvalidInput(what + ": negative size (" + std::to_string(a) + " x " + std::to_string(b) +
                       ")");
  if (__builtin_mul_overflow(a, b, &p))
    throw InvalidInput(what + ": " + std::to_string(a) + " x " + std::to_string(b) +
                       " does not fit a 64-bit size");
  return p;
}

/// a * b * c, as checked_mul.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::int64_t c,
                                const std::string& what) {
  // Zero anywhere makes the product 0 whatever the other factors are; check the signs first.
  if (a < 0 || b < 0 || c < 0)
    throw InvalidInput(what + ": negative size (" + std::to_string(a) + " x " + std::to_string(b) +
                       " x " + std::to_string(c) + ")");
  std::int64_t ab = 0, p = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &p))
    throw InvalidInput(what + ": " + std::to_string(a) + " x " + std::to_string(b) + " x " +
                       std::to_string(c) + " does not fit a 64-bit size");
  return p;
}

/// a + b for non-negative sizes; throws InvalidInput naming `what` on overflow.
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t s = 0;
  if (a < 0 || b < 0)
    throw InvalidInput(what + ": negative size (" + std::to_string(a) + " + " + std::to_string(b) +
                       ")");
  if (__builtin_add_overflow(a, b, &s))
    throw InvalidInput(what + ": " + std::to_string(a) + " + " + std::to_string(b) +
                       " does not fit a 64-bit size");
  return s;
}

/// Bytes of n elements of `element_size` bytes, as size_t; throws InvalidInput naming `what`
/// when n is negative or the byte count does not fit (size_t and int64_t alike).
inline std::size_t checked_bytes(std::int64_t n, std::size_t element_size,
                                 const std::string& what) {
  const auto bytes = checked_mul(n, static_cast<std::int64_t>(element_size), what + " (bytes)");
  return static_cast<std::size_t>(bytes);
}

}  // namespace dcalign
