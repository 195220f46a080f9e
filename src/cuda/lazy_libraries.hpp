#pragma once
// cuBLAS and cuSOLVER are loaded when the CUDA backend first calls them, not when a program
// that links dcalign starts (lazy_libraries.cpp).
#include <string>

namespace dcalign::cuda {

/// Loads cuBLAS and cuSOLVER, looks up every function the backend calls through them and makes
/// two calls that need no GPU through the forwarding definitions (cuSOLVER's version must be
/// the headers', cuBLAS must name a status). Returns one line per problem, or an empty string.
/// For tests and diagnostics; the backend itself loads a library on its first call into it.
std::string check_lazy_libraries();

}  // namespace dcalign::cuda
