#pragma once
// Column-major matrices and stacks of equally shaped matrices.
//
// A Matrix<T> owns rows*cols contiguous elements, element (i, j) at data[i + j*rows].
// A Stack<T> owns `count` matrices of one shape stored back to back: matrix k starts at
// data + k*rows*cols. The stack of anchor representations A_1..A_c (each a x l) is therefore
// also the concatenated matrix [A_1 ... A_c] (a x c*l) without any copy; the algorithms rely on it.
//
// Views (MatrixView, StackView) do not own memory. Their pointer may refer to host or device
// memory; which one is a property of the backend that produced it, not of the view.
#include <algorithm>
#include <cstdint>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dcalign/error.hpp"

namespace dcalign {

using index_t = std::int64_t;

template <typename T>
class MatrixView {
 public:
  MatrixView() = default;
  MatrixView(T* data, index_t rows, index_t cols, index_t ld)
      : data_(data), rows_(rows), cols_(cols), ld_(ld) {}
  MatrixView(T* data, index_t rows, index_t cols) : MatrixView(data, rows, cols, rows) {}
  // A view of non-const elements converts to a view of const elements.
  template <typename U, typename = std::enable_if_t<std::is_same_v<const U, T>>>
  MatrixView(const MatrixView<U>& other)  // NOLINT(google-explicit-constructor)
      : MatrixView(other.data(), other.rows(), other.cols(), other.ld()) {}

  T* data() const { return data_; }
  index_t rows() const { return rows_; }
  index_t cols() const { return cols_; }
  index_t ld() const { return ld_; }
  index_t size() const { return rows_ * cols_; }
  T& operator()(index_t i, index_t j) const { return data_[i + j * ld_]; }
  /// Columns [j0, j0 + n) as a view.
  MatrixView cols_range(index_t j0, index_t n) const {
    return MatrixView(data_ + j0 * ld_, rows_, n, ld_);
  }
  /// Rows [i0, i0 + n) as a view.
  MatrixView rows_range(index_t i0, index_t n) const {
    return MatrixView(data_ + i0, n, cols_, ld_);
  }

 private:
  T* data_ = nullptr;
  index_t rows_ = 0, cols_ = 0, ld_ = 0;
};

template <typename T>
class StackView {
 public:
  StackView() = default;
  /// Contiguous stack: matrix k at data + k*rows*cols, leading dimension rows.
  StackView(T* data, index_t count, index_t rows, index_t cols)
      : StackView(data, count, rows, cols, rows, rows * cols) {}
  /// Strided stack (as in cuBLAS strided-batched calls): matrix k at data + k*stride with
  /// leading dimension ld. E.g. the row blocks of a (count*rows) x cols matrix X are
  /// StackView(X, count, rows, cols, count*rows, rows).
  StackView(T* data, index_t count, index_t rows, index_t cols, index_t ld, index_t stride)
      : data_(data), count_(count), rows_(rows), cols_(cols), ld_(ld), stride_(stride) {}
  template <typename U, typename = std::enable_if_t<std::is_same_v<const U, T>>>
  StackView(const StackView<U>& other)  // NOLINT(google-explicit-constructor)
      : StackView(other.data(), other.count(), other.rows(), other.cols(), other.ld(),
                  other.stride()) {}

  T* data() const { return data_; }
  index_t count() const { return count_; }
  index_t rows() const { return rows_; }
  index_t cols() const { return cols_; }
  index_t ld() const { return ld_; }
  index_t stride() const { return stride_; }
  /// True for the plain back-to-back layout, which most primitives require.
  bool contiguous() const { return ld_ == rows_ && stride_ == rows_ * cols_; }
  index_t size() const { return count_ * rows_ * cols_; }
  MatrixView<T> operator[](index_t k) const {
    return MatrixView<T>(data_ + k * stride_, rows_, cols_, ld_);
  }
  /// A contiguous stack seen as the concatenation [M_1 ... M_count] (rows x count*cols).
  MatrixView<T> concatenated() const { return MatrixView<T>(data_, rows_, count_ * cols_, rows_); }

 private:
  T* data_ = nullptr;
  index_t count_ = 0, rows_ = 0, cols_ = 0, ld_ = 0, stride_ = 0;
};

namespace detail {
void check_shape(index_t count, index_t rows, index_t cols, const char* what);

/// std::allocator whose value-less construct() default-initialises: vector::resize(n) then leaves
/// float and double elements unwritten instead of zeroing them. Everything else is std::allocator.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}  // NOLINT
  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
}  // namespace detail

/// Tag for constructors that leave the elements uninitialised, for callers that then write every
/// element (e.g. a file reader): skipping the zero fill saves a pass over the memory, and lets the
/// writer be the first to touch (page in) it, possibly from several threads.
struct Uninitialized {
  explicit Uninitialized() = default;
};
inline constexpr Uninitialized uninitialized{};

template <typename T>
class Matrix {
 public:
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "dcalign matrices hold float or double");
  Matrix() = default;
  Matrix(index_t rows, index_t cols) : rows_(rows), cols_(cols) {
    detail::check_shape(1, rows, cols, "Matrix");
    data_.assign(static_cast<size_t>(rows * cols), T(0));
  }
  Matrix(index_t rows, index_t cols, std::vector<T> values) : rows_(rows), cols_(cols) {
    detail::check_shape(1, rows, cols, "Matrix");
    if (static_cast<index_t>(values.size()) != rows * cols)
      throw InvalidInput("Matrix: " + std::to_string(values.size()) + " values given for a " +
                         std::to_string(rows) + " x " + std::to_string(cols) + " matrix");
    data_ = std::move(values);
  }
  static Matrix identity(index_t n) {
    Matrix m(n, n);
    for (index_t i = 0; i < n; ++i) m(i, i) = T(1);
    return m;
  }

  index_t rows() const { return rows_; }
  index_t cols() const { return cols_; }
  index_t size() const { return rows_ * cols_; }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  T& operator()(index_t i, index_t j) { return data_[i + j * rows_]; }
  const T& operator()(index_t i, index_t j) const { return data_[i + j * rows_]; }
  MatrixView<T> view() { return MatrixView<T>(data(), rows_, cols_); }
  MatrixView<const T> view() const { return MatrixView<const T>(data(), rows_, cols_); }
  const std::vector<T>& values() const { return data_; }

 private:
  index_t rows_ = 0, cols_ = 0;
  std::vector<T> data_;
};

template <typename T>
class Stack {
 public:
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "dcalign stacks hold float or double");
  Stack() = default;
  Stack(index_t count, index_t rows, index_t cols) : count_(count), rows_(rows), cols_(cols) {
    detail::check_shape(count, rows, cols, "Stack");
    data_.assign(static_cast<size_t>(count * rows * cols), T(0));
  }
  /// A stack whose elements are indeterminate until written; the caller must write all of them.
  Stack(index_t count, index_t rows, index_t cols, Uninitialized)
      : count_(count), rows_(rows), cols_(cols) {
    detail::check_shape(count, rows, cols, "Stack");
    data_.resize(static_cast<size_t>(count * rows * cols));
  }
  /// Stack of copies of the given matrices, which must share one shape.
  static Stack from_matrices(const std::vector<Matrix<T>>& ms) {
    if (ms.empty()) return Stack();
    Stack s(static_cast<index_t>(ms.size()), ms[0].rows(), ms[0].cols());
    for (index_t k = 0; k < s.count(); ++k) {
      const auto& m = ms[static_cast<size_t>(k)];
      if (m.rows() != s.rows() || m.cols() != s.cols())
        throw InvalidInput("Stack: matrix " + std::to_string(k) + " is " +
                           std::to_string(m.rows()) + " x " + std::to_string(m.cols()) +
                           ", expected " + std::to_string(s.rows()) + " x " +
                           std::to_string(s.cols()) + " like matrix 0");
      std::copy(m.data(), m.data() + m.size(), s.data() + k * s.stride());
    }
    return s;
  }

  index_t count() const { return count_; }
  index_t rows() const { return rows_; }
  index_t cols() const { return cols_; }
  index_t stride() const { return rows_ * cols_; }
  index_t size() const { return count_ * rows_ * cols_; }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  T& operator()(index_t k, index_t i, index_t j) { return data_[k * stride() + i + j * rows_]; }
  const T& operator()(index_t k, index_t i, index_t j) const {
    return data_[k * stride() + i + j * rows_];
  }
  StackView<T> view() { return StackView<T>(data(), count_, rows_, cols_); }
  StackView<const T> view() const { return StackView<const T>(data(), count_, rows_, cols_); }
  MatrixView<T> operator[](index_t k) { return view()[k]; }
  MatrixView<const T> operator[](index_t k) const { return view()[k]; }
  /// Copy of matrix k.
  Matrix<T> matrix(index_t k) const {
    Matrix<T> m(rows_, cols_);
    std::copy(data() + k * stride(), data() + (k + 1) * stride(), m.data());
    return m;
  }

 private:
  index_t count_ = 0, rows_ = 0, cols_ = 0;
  std::vector<T, detail::DefaultInitAllocator<T>> data_;
};

}  // namespace dcalign
