#pragma once
// Exception hierarchy. Every failure that a caller can provoke with bad input is reported by
// throwing one of these, with a message that says what was wrong, where, and what was expected.
#include <stdexcept>
#include <string>

namespace dcalign {

/// Base class of every error dcalign throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Arguments or data that violate a documented precondition (shapes, NaN, rank, options).
class InvalidInput : public Error {
 public:
  using Error::Error;
};

/// A file could not be read or written, or its contents are malformed.
class IoError : public Error {
 public:
  using Error::Error;
};

/// A numerical routine failed (no convergence, LAPACK error, non-finite result).
class NumericalError : public Error {
 public:
  using Error::Error;
};

/// A backend cannot be used here (no GPU, not compiled in, out of device memory).
class BackendError : public Error {
 public:
  using Error::Error;
};

}  // namespace dcalign
