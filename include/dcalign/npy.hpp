#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0), 2-D and 3-D, float32 or float64,
// C or Fortran order. Little-endian data is expected; big-endian data ('>f4', '>f8') is
// byte-swapped on read. Files are always written little-endian.
//
// Index convention: a 2-D array of shape (r, k) is the r x k matrix M with M(i, j) = arr[i, j].
// A 3-D array of shape (c, r, k) is the stack whose matrix s has element (i, j) = arr[s, i, j];
// so `A[s] @ G[s]` in NumPy is the product of matrices s of the two stacks.
// Files are read in full and validated strictly: magic, version, header length and syntax,
// dtype, byte order, shape (dimension count, no negative or absurd extents, element count
// consistent with the file size). Any violation throws IoError naming the file and the problem.
#include <string>
#include <type_traits>
#include <vector>

#include "dcalign/matrix.hpp"

namespace dcalign {

enum class DType { float32, float64 };

/// What the header of an .npy file declares.
struct NpyHeader {
  DType dtype = DType::float64;
  bool fortran_order = false;
  std::vector<index_t> shape;
};

/// Parses and validates the header only (does not read the data).
NpyHeader read_npy_header(const std::string& path);

/// Reads a 2-D array. The file's dtype is converted to T (float64 -> float rounds).
template <typename T>
Matrix<T> read_npy_matrix(const std::string& path);

/// Reads a 1-D array of shape (n,) (labels, targets).
template <typename T>
std::vector<T> read_npy_vector(const std::string& path);
/// Reads a 3-D array of shape (count, rows, cols).
template <typename T>
Stack<T> read_npy_stack(const std::string& path);

/// Reads matrices [first, first + count) of a 3-D array of shape (c, rows, cols) without
/// reading the others (one rank's users of a stack shared by several processes). Needs a C-order
/// file (Fortran order interleaves the users); throws IoError naming the file otherwise, or when
/// the range is outside [0, c).
template <typename T>
Stack<T> read_npy_stack_slice(const std::string& path, index_t first, index_t count);

/// Creates (or truncates) `path` as a C-order 3-D array of shape (count, rows, cols) with the
/// dtype of T and its full size, with unspecified data, for writers of slices
/// (write_npy_stack_slice). Writes `path` itself, not a temporary: callers that need an atomic
/// replacement pass a temporary name and rename it.
template <typename T>
void create_npy_stack(const std::string& path, index_t count, index_t rows, index_t cols);

/// Writes `s` as matrices [first, first + s.count()) into an existing C-order 3-D file of the
/// dtype of T and matching (rows, cols), such as create_npy_stack makes. Writers of disjoint
/// ranges may run at the same time (pwrite at fixed offsets).
template <typename T>
void write_npy_stack_slice(const std::string& path, index_t first, StackView<const T> s);

/// Writes a 2-D array in C order with the dtype of T (format version 1.0).
template <typename T>
void write_npy(const std::string& path, MatrixView<const T> m);

/// Writes a 3-D array (count, rows, cols) in C order with the dtype of T.
template <typename T>
void write_npy(const std::string& path, StackView<const T> s);

// A view of non-const elements would not deduce T for the overloads above (the conversion to a
// const view is not considered during deduction), so `write_npy(path, m.view())` on a non-const
// matrix needs these.
template <typename T, typename = std::enable_if_t<!std::is_const_v<T>>>
void write_npy(const std::string& path, MatrixView<T> m) {
  write_npy<T>(path, MatrixView<const T>(m));
}
template <typename T, typename = std::enable_if_t<!std::is_const_v<T>>>
void write_npy(const std::string& path, StackView<T> s) {
  write_npy<T>(path, StackView<const T>(s));
}

}  // namespace dcalign
