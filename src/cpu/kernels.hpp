#pragma once
// The CPU backend's own loops: those that no BLAS or LAPACK call covers (a small-matrix inverse
// batched over users, sums of products accumulated in double). The library is compiled for the
// baseline x86-64 instruction set so that one binary runs on every machine; these loops are also
// compiled for AVX2 + FMA and for AVX-512 and the widest one the CPU supports is picked once, at
// run time (bench/results/issue9: the anchors' sum of squares 22 -> 13 ms at 400 MB, the 50 x 50
// inverse 20.6 -> 17.2 us).
#include <string>

#include "dcalign/matrix.hpp"

namespace dcalign::cpu {

enum class Isa { baseline, avx2, avx512 };

/// The instruction set the loops run with: the widest this CPU supports, or the one named by the
/// environment variable DCALIGN_CPU_ISA (baseline, avx2 or avx512), read once. Throws
/// BackendError for an unknown name or one the CPU does not support.
Isa kernel_isa();
std::string to_string(Isa isa);

/// sum_i x_i y_i over n contiguous values, accumulated in double in independent partial sums
/// (a single accumulator makes the loop wait on the adder instead of on memory).
template <typename T>
double dot(const T* x, const T* y, index_t n);

/// Orders up to which inverse() uses Gauss-Jordan elimination (above it, LAPACK's getrf + getri
/// are as fast).
constexpr index_t kSmallInverse = 96;
/// Scratch entries gauss_jordan_inverse needs for order n.
constexpr index_t gauss_jordan_workspace(index_t n) { return 12 * n; }

/// In-place inverse of the n x n column-major matrix `a` (n <= kSmallInverse) by Gauss-Jordan
/// elimination with partial pivoting; false on an exactly zero pivot. `perm` holds n entries,
/// `work` gauss_jordan_workspace(n).
template <typename T>
bool gauss_jordan_inverse(T* a, index_t n, index_t* perm, T* work);

}  // namespace dcalign::cpu
