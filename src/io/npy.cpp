// Reader and writer for NumPy .npy files (see dcalign/npy.hpp for the contract).
//
// Format, as specified by NumPy (numpy.lib.format):
//   magic "\x93NUMPY", major and minor version bytes,
//   header length: uint16 little-endian (version 1.0) or uint32 little-endian (2.0 and 3.0),
//   header: a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}, padded
//   with spaces and ended by '\n' (latin-1 in 1.0/2.0, UTF-8 in 3.0),
//   data: prod(shape) elements of the dtype, in C or Fortran order.
//
// Decisions beyond the NumPy specification:
// - The header parser accepts only the subset of Python literal syntax that the three keys need
//   (quoted strings without escapes, True/False, tuples of decimal integers) and rejects any
//   other key, so that a file this reader accepts is never misread.
// - Big-endian data ('>f4', '>f8', as NumPy writes for arrays of a big-endian dtype) is
//   byte-swapped on read rather than rejected: the conversion is cheap and unambiguous.
//   '=' means the byte order of the host. '|' ("not applicable") is rejected for these
//   multi-byte types because it does not say which byte order the data has.
// - The data must fill the file exactly: missing bytes and trailing bytes are both errors, since
//   either means that the header does not describe the file.
// - Every size is checked against the file size before anything of that size is allocated, so
//   a corrupt or hostile header cannot trigger a huge allocation.
// - An empty array (some extent 0) is accepted only while its other extents multiply to at most
//   2**24: the file holds no data that would justify more, and a shape such as (2**40, 0, 5)
//   would otherwise make its users loop over, or allocate for, 2**40 matrices.
#include "dcalign/npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "dcalign/checked.hpp"
#include "io/npy_internal.hpp"
#include "io/staged_outputs.hpp"

namespace dcalign {
namespace {

using namespace npy_detail;

// ---------------------------------------------------------------------------------------------
// Reading the data.
//
// Both storage orders are seen as `groups` row-major matrices of rows x cols elements, stored
// back to back, which must become the same matrices column-major:
//   file:        group g, element (i, j) at element offset g*rows*cols + i*cols + j,
//   destination: group g, element (i, j) at out[g*rows*cols + i + j*rows].
// A C-order (c, r, k) array is c groups of r x k (arr[s, i, j] at s*r*k + i*k + j). A Fortran-order
// one is one group of (r*k) x c: arr[s, i, j] is at s + p*c with p = i + j*r, and belongs at
// out[s*r*k + p], i.e. at (p, s) of a column-major (r*k) x c matrix.
// When rows or cols is 1 the two layouts coincide and the data is copied (and converted) in file
// order, straight into the destination when no conversion is needed.
//
// The data is read with pread in blocks of about kBlockBytes (so that a block and its
// destination lines stay in the per-core cache), converted (byte swap, float <-> double) and
// transposed block by block in cache-sized tiles. Blocks are independent, so they are shared out
// among OpenMP threads; pread has no shared file position. Memory beyond the destination is one
// block buffer per thread, not a copy of the file.

constexpr index_t kBlockBytes = index_t{1} << 20;
// Blocks of partial rows (for very long rows) keep at least this many rows, so that the writes
// into each destination column stay contiguous over a few cache lines.
constexpr index_t kMinBlockRows = 16;
// Below this many data bytes the threads would cost more than they save.
constexpr index_t kParallelBytes = index_t{4} << 20;
// Transpose tile: kTile x kTile source elements (2 KiB of doubles) are read with a stride; each
// destination column receives kTile consecutive elements (two cache lines of doubles).
constexpr index_t kTile = 16;

/// The element at `p` (file data in the buffer), byte-swapped if Swap, converted to T. The bytes
/// are swapped as an integer, so that a float register never holds a swapped bit pattern (which
/// could be a signalling NaN).
template <typename Src, typename T, bool Swap>
T convert_one(const Src* p) {
  if constexpr (Swap) {
    static_assert(sizeof(Src) == 4 || sizeof(Src) == 8);
    using Bits = std::conditional_t<sizeof(Src) == 4, std::uint32_t, std::uint64_t>;
    Bits b;
    std::memcpy(&b, p, sizeof b);
    if constexpr (sizeof(Src) == 4)
      b = __builtin_bswap32(b);
    else
      b = __builtin_bswap64(b);
    Src v;
    std::memcpy(&v, &b, sizeof v);
    return static_cast<T>(v);
  } else {
    return static_cast<T>(*p);
  }
}

/// dst[i] = src[i] converted, for n elements.
template <typename Src, typename T, bool Swap>
void convert_linear(const Src* src, index_t n, T* dst) {
  for (index_t i = 0; i < n; ++i) dst[i] = convert_one<Src, T, Swap>(src + i);
}

/// The row-major n x m block `src` (row stride m) into column-major `dst` with leading dimension
/// ld: dst[i + j*ld] = src[i*m + j] converted.
///
/// Tiles of kTile x kTile elements, a strip of kTile columns at a time: a tile is read from the
/// (cache-resident) block with a stride and written as kTile runs of kTile contiguous elements.
/// Going down a strip before moving right keeps the destination pages in use to about kTile
/// (one per column). Sweeping the whole width per tile row instead was measured 2-3 times slower
/// for 100 float32 columns read as double, presumably from first-level TLB misses.
template <typename Src, typename T, bool Swap>
void transpose_block(const Src* src, index_t n, index_t m, T* dst, index_t ld) {
  for (index_t j0 = 0; j0 < m; j0 += kTile) {
    const index_t j1 = std::min(m, j0 + kTile);
    for (index_t i0 = 0; i0 < n; i0 += kTile) {
      const index_t i1 = std::min(n, i0 + kTile);
      for (index_t j = j0; j < j1; ++j) {
        T* d = dst + j * ld;
        const Src* s = src + j;
        for (index_t i = i0; i < i1; ++i) d[i] = convert_one<Src, T, Swap>(s + i * m);
      }
    }
  }
}

/// Runs body(b, buffer) for every block b in [0, blocks), on several threads when the data is
/// large. body returns an empty string or what went wrong; the first failure is thrown as IoError
/// naming the file, after all threads have stopped (an exception must not leave a parallel
/// region).
template <typename Src, typename Body>
void for_each_block(const std::string& path, index_t blocks, index_t data_bytes, Body body) {
  std::string error;
  std::atomic<bool> failed{false};
  const bool parallel = data_bytes >= kParallelBytes && blocks > 1;
#pragma omp parallel if (parallel)
  {
    std::vector<Src> buffer;  // one per thread, sized by body
#pragma omp for schedule(dynamic, 1)
    for (index_t b = 0; b < blocks; ++b) {
      if (failed.load(std::memory_order_relaxed)) continue;
      std::string e;
      try {
        e = body(b, buffer);
      } catch (const std::exception& ex) {
        e = ex.what();
      }
      if (!e.empty()) {
#pragma omp critical(dcalign_npy_read_error)
        if (!failed.exchange(true)) error = std::move(e);
      }
    }
  }
  if (failed) fail(path, error);
}

template <typename Src, typename T, bool Swap>
void read_groups(const std::string& path, int fd, index_t data_offset, index_t groups, index_t rows,
                 index_t cols, T* out) {
  constexpr auto esize = static_cast<index_t>(sizeof(Src));
  const index_t total = groups * rows * cols;
  if (total == 0) return;
  const auto read_error = [](const std::string& why) {
    return "read error in the data (" + why + "; file changed while reading?)";
  };

  if (rows == 1 || cols == 1) {
    // Same order in the file and in memory.
    const index_t per_block = std::max<index_t>(1, kBlockBytes / esize);
    const index_t blocks = (total + per_block - 1) / per_block;
    for_each_block<Src>(path, blocks, total * esize, [&](index_t b, std::vector<Src>& buffer) {
      const index_t e0 = b * per_block, n = std::min(per_block, total - e0);
      std::string error;
      if constexpr (std::is_same_v<Src, T> && !Swap) {
        error = pread_exact(fd, out + e0, n * esize, data_offset + e0 * esize);
      } else {
        buffer.resize(static_cast<std::size_t>(n));
        error = pread_exact(fd, buffer.data(), n * esize, data_offset + e0 * esize);
        if (error.empty()) convert_linear<Src, T, Swap>(buffer.data(), n, out + e0);
      }
      return error.empty() ? error : read_error(error);
    });
    return;
  }

  const index_t group_size = rows * cols;
  if (group_size * esize <= kBlockBytes) {
    // Small matrices: blocks of whole groups, one contiguous read each.
    const index_t per_block = std::max<index_t>(1, kBlockBytes / (group_size * esize));
    const index_t blocks = (groups + per_block - 1) / per_block;
    for_each_block<Src>(path, blocks, total * esize, [&](index_t b, std::vector<Src>& buffer) {
      const index_t g0 = b * per_block, ng = std::min(per_block, groups - g0);
      buffer.resize(static_cast<std::size_t>(ng * group_size));
      const std::string error = pread_exact(fd, buffer.data(), ng * group_size * esize,
                                            data_offset + g0 * group_size * esize);
      if (!error.empty()) return read_error(error);
      for (index_t g = 0; g < ng; ++g)
        transpose_block<Src, T, Swap>(buffer.data() + g * group_size, rows, cols,
                                      out + (g0 + g) * group_size, rows);
      return error;
    });
    return;
  }

  // Large matrices: blocks of whole rows (one contiguous read each) or, for rows longer than a
  // block allows, of kMinBlockRows partial rows (one read per row).
  index_t m = cols;
  if (cols > kBlockBytes / (kMinBlockRows * esize))
    m = std::max<index_t>(1, kBlockBytes / (kMinBlockRows * esize));
  const index_t n = std::clamp<index_t>(kBlockBytes / (m * esize), 1, rows);
  const index_t row_blocks = (rows + n - 1) / n, col_blocks = (cols + m - 1) / m;
  const index_t per_group = row_blocks * col_blocks;
  for_each_block<Src>(
      path, groups * per_group, total * esize, [&](index_t b, std::vector<Src>& buffer) {
        const index_t g = b / per_group, rb = (b % per_group) / col_blocks, cb = b % col_blocks;
        const index_t i0 = rb * n, nn = std::min(n, rows - i0);
        const index_t j0 = cb * m, mm = std::min(m, cols - j0);
        buffer.resize(static_cast<std::size_t>(nn * mm));
        const index_t first = g * group_size + i0 * cols + j0;  // element offset in the file
        std::string error;
        if (mm == cols) {
          error = pread_exact(fd, buffer.data(), nn * mm * esize, data_offset + first * esize);
        } else {
          for (index_t i = 0; i < nn && error.empty(); ++i)
            error = pread_exact(fd, buffer.data() + i * mm, mm * esize,
                                data_offset + (first + i * cols) * esize);
        }
        if (!error.empty()) return read_error(error);
        transpose_block<Src, T, Swap>(buffer.data(), nn, mm, out + g * group_size + i0 + j0 * rows,
                                      rows);
        return error;
      });
}

/// Asks the kernel to back the 2 MiB-aligned interior of [p, p + bytes) with transparent huge
/// pages (only a hint). Useful only before the memory is first touched: each first touch then maps
/// 2 MiB instead of 4 KiB, and page faults are most of the cost of filling fresh memory. Without
/// effect where THP is "never"; what the kernel does anyway where it is "always".
void advise_huge_pages(void* p, std::size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

/// A file opened and validated by parse_file, whose array has the dimension count a reader
/// needs.
struct OpenedFile {
  Fd fd;
  ParsedFile file;
};

OpenedFile open_array(const std::string& path, std::size_t ndim, const char* caller,
                      const char* expected_shape) {
  OpenedFile out;
  out.file = parse_file(path, out.fd);
  const std::vector<index_t>& shape = out.file.header.shape;
  if (shape.size() != ndim)
    fail(path, std::string("wrong number of dimensions for ") + caller + ": expected a " +
                   std::to_string(ndim) + "-D array of shape " + expected_shape + ", found a " +
                   std::to_string(shape.size()) + "-D array of shape " + shape_string(shape));
  return out;
}

/// Reads the data of a (c, r, k) array (a 2-D file is passed as c = 1) into the column-major
/// stack layout out[s*r*k + i + j*r] = arr[s, i, j].
/// After float64 data was read as float32: an infinity that was a finite float64 value is one
/// out of float32's range, and is said so with the value (the later check would only call it
/// "non-finite"). A NaN or an infinity in the file itself is left to that check.
void check_float32_range(const std::string& path, const OpenedFile& f, index_t c, index_t r,
                         index_t k, const float* out) {
  const index_t total = c * r * k;
  index_t at = 0;
  while (at < total && std::isfinite(out[at])) ++at;
  if (at == total || r == 0 || k == 0) return;
  // out is column-major per matrix: element (g, i, j) at g*r*k + j*r + i.
  const index_t g = at / (r * k), j = (at % (r * k)) / r, i = at % r;
  const ParsedFile& p = f.file;
  const index_t in_file = !p.header.fortran_order ? (g * r + i) * k + j
                          : c == 1                ? j * r + i
                                                  : g + c * (i + r * j);
  std::uint64_t bits = 0;
  if (::pread(f.fd.get(), &bits, 8, static_cast<off_t>(p.data_offset + in_file * 8)) != 8) return;
  if (p.swap_bytes) bits = __builtin_bswap64(bits);
  double v = 0;
  std::memcpy(&v, &bits, 8);
  if (!std::isfinite(v)) return;
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  fail(path, std::string("the value ") + text + " at " +
                 (c > 1 || p.header.shape.size() == 3 ? "matrix " + std::to_string(g) + ", " : "") +
                 "row " + std::to_string(i) + ", column " + std::to_string(j) +
                 " is out of float32's range (magnitude at most 3.4028235e+38): it is read as "
                 "float32 here; use float64, or scale the data");
}

template <typename T>
void read_data(const std::string& path, const OpenedFile& f, index_t c, index_t r, index_t k,
               T* out) {
  const ParsedFile& p = f.file;
  // See "Reading the data" above for the two layouts.
  const bool fortran = p.header.fortran_order;
  const index_t groups = fortran ? 1 : c, rows = fortran ? r * k : r, cols = fortran ? c : k;
  const int fd = f.fd.get();
  const auto run = [&](auto src_tag, auto swap_tag) {
    using Src = decltype(src_tag);
    read_groups<Src, T, decltype(swap_tag)::value>(path, fd, p.data_offset, groups, rows, cols,
                                                   out);
  };
  if (p.header.dtype == DType::float32) {
    if (p.swap_bytes)
      run(float{}, std::true_type{});
    else
      run(float{}, std::false_type{});
  } else {
    if (p.swap_bytes)
      run(double{}, std::true_type{});
    else
      run(double{}, std::false_type{});
    if constexpr (std::is_same_v<T, float>) check_float32_range(path, f, c, r, k, out);
  }
}

/// Writes a C-order version 1.0 file of shape (c, r, k), or (r, k) when `two_d`; element
/// arr[s, i, j] is at(s)(i, j).
template <typename T, typename MatrixAt>
void write_file(const std::string& path, bool two_d, index_t c, index_t r, index_t k, MatrixAt at) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (c < 0 || r < 0 || k < 0)
    throw InvalidInput("write_npy '" + path + "': negative extent in shape (" + std::to_string(c) +
                       ", " + std::to_string(r) + ", " + std::to_string(k) + ")");
  const std::vector<index_t> shape =
      two_d ? std::vector<index_t>{r, k} : std::vector<index_t>{c, r, k};
  std::string header = std::string("{'descr': '<") + (sizeof(T) == 4 ? "f4" : "f8") +
                       "', 'fortran_order': False, 'shape': " + shape_string(shape) + ", }";
  const std::size_t preamble = kMagicSize + 2 + 2;
  // Pad with spaces so that the data, after the terminating newline, starts 64-byte aligned.
  const std::size_t unpadded = preamble + header.size() + 1;
  header.append((kDataAlignment - unpadded % kDataAlignment) % kDataAlignment, ' ');
  header += '\n';
  // Cannot happen for 2-D/3-D shapes (at most ~130 bytes), but version 1.0 caps it at 16 bits.
  if (header.size() > 0xffff) throw IoError("write_npy '" + path + "': header too long");

  const auto fail_write = [&path](const std::string& what) {
    throw IoError("cannot write npy file '" + path + "': " + what);
  };
  // Written to a temporary file beside `path` and renamed onto it only when complete: a failed
  // write leaves whatever was at `path` (a file, a symbolic link, a device node) untouched.
  io::StagedOutputs staged;
  std::string tmp;
  try {
    tmp = staged.stage(path, "npy output");
  } catch (const InvalidInput& e) {  // no such directory, a directory at `path`
    throw IoError(std::string("cannot write ") + e.what());
  }
  errno = 0;
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out)
    fail_write(std::string("cannot open for writing (") +
               (errno ? std::strerror(errno) : "unknown error") + ")");
  out.write(kMagic, kMagicSize);
  const char version_and_len[4] = {1, 0, static_cast<char>(header.size() & 0xff),
                                   static_cast<char>(header.size() >> 8)};
  out.write(version_and_len, 4);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));

  // One C-order row at a time: little memory and few stream calls. An empty array has no data,
  // whatever its other extents (a 0 x 2**40 matrix needs no 2**40-element row buffer).
  const bool swap = !host_is_little_endian();
  const bool empty = c == 0 || r == 0 || k == 0;
  std::vector<unsigned char> row(empty ? 0 : checked_bytes(k, sizeof(T), "write_npy row"));
  for (index_t s = 0; s < c && out && !empty; ++s) {
    const MatrixView<const T> m = at(s);
    for (index_t i = 0; i < r && out; ++i) {
      for (index_t j = 0; j < k; ++j) {
        const T v = m(i, j);
        std::memcpy(row.data() + j * sizeof(T), &v, sizeof(T));
        if (swap)
          for (std::size_t b = 0; b < sizeof(T) / 2; ++b)
            std::swap(row[j * sizeof(T) + b], row[j * sizeof(T) + sizeof(T) - 1 - b]);
      }
      out.write(reinterpret_cast<const char*>(row.data()),
                static_cast<std::streamsize>(row.size()));
    }
  }
  out.close();
  if (!out) fail_write("write error (disk full?)");  // `staged` removes the temporary
  staged.commit();
}

}  // namespace

template <typename T>
Matrix<T> read_npy_matrix(const std::string& path) {
  const OpenedFile f = open_array(path, 2, "read_npy_matrix", "(rows, cols)");
  const std::vector<index_t>& shape = f.file.header.shape;
  // The element count was checked against the file size, so this allocation is bounded by it.
  Matrix<T> m(shape[0], shape[1]);
  read_data(path, f, 1, shape[0], shape[1], m.data());
  return m;
}

template <typename T>
std::vector<T> read_npy_vector(const std::string& path) {
  const OpenedFile f = open_array(path, 1, "read_npy_vector", "(n,)");
  std::vector<T> v(static_cast<std::size_t>(f.file.header.shape[0]));
  read_data(path, f, 1, f.file.header.shape[0], 1, v.data());
  return v;
}

template <typename T>
Stack<T> read_npy_stack(const std::string& path) {
  const OpenedFile f = open_array(path, 3, "read_npy_stack", "(count, rows, cols)");
  const std::vector<index_t>& shape = f.file.header.shape;
  // read_data writes every element, so the stack is not zeroed first: the reading threads are
  // the first to touch (and page in) its memory.
  Stack<T> s(shape[0], shape[1], shape[2], uninitialized);
  advise_huge_pages(s.data(), static_cast<std::size_t>(s.size()) * sizeof(T));
  read_data(path, f, shape[0], shape[1], shape[2], s.data());
  return s;
}

template <typename T>
void write_npy(const std::string& path, MatrixView<const T> m) {
  write_file<T>(path, true, 1, m.rows(), m.cols(), [&m](index_t) { return m; });
}

template <typename T>
void write_npy(const std::string& path, StackView<const T> s) {
  write_file<T>(path, false, s.count(), s.rows(), s.cols(), [&s](index_t k) { return s[k]; });
}

template <typename T>
Stack<T> read_npy_stack_slice(const std::string& path, index_t first, index_t count) {
  const OpenedFile f = open_array(path, 3, "read_npy_stack_slice", "(count, rows, cols)");
  const std::vector<index_t>& shape = f.file.header.shape;
  if (first < 0 || count < 0 || first > shape[0] || count > shape[0] - first)
    fail(path, "users [" + std::to_string(first) + ", " + std::to_string(first + count) +
                   ") are outside the array of shape " + shape_string(shape));
  if (f.file.header.fortran_order && shape[0] > 1 && count < shape[0])
    fail(path,
         "cannot read a slice of users from a Fortran-order array (its users are "
         "interleaved); save it in C order (numpy.ascontiguousarray)");
  Stack<T> s(count, shape[1], shape[2]);
  OpenedFile part;  // the same descriptor, data offset moved to the first user's matrix
  part.file = f.file;
  part.file.data_offset += first * shape[1] * shape[2] * dtype_size(f.file.header.dtype);
  part.fd.reset(::dup(f.fd.get()));
  if (part.fd.get() < 0) fail(path, std::string("cannot read: ") + std::strerror(errno));
  read_data(path, part, count, shape[1], shape[2], s.data());
  return s;
}

namespace {

/// The version 1.0 header write_file writes for a C-order array of `shape` (padded, with '\n').
template <typename T>
std::string c_order_header(const std::vector<index_t>& shape) {
  std::string header = std::string("{'descr': '<") + (sizeof(T) == 4 ? "f4" : "f8") +
                       "', 'fortran_order': False, 'shape': " + shape_string(shape) + ", }";
  const std::size_t unpadded = kMagicSize + 2 + 2 + header.size() + 1;
  header.append((kDataAlignment - unpadded % kDataAlignment) % kDataAlignment, ' ');
  header += '\n';
  return header;
}

}  // namespace

template <typename T>
void create_npy_stack(const std::string& path, index_t count, index_t rows, index_t cols) {
  if (count < 0 || rows < 0 || cols < 0)
    throw InvalidInput("create_npy_stack '" + path + "': negative extent");
  const std::string header = c_order_header<T>({count, rows, cols});
  std::string pre(kMagic, kMagicSize);
  pre += static_cast<char>(1);
  pre += static_cast<char>(0);
  pre += static_cast<char>(header.size() & 0xff);
  pre += static_cast<char>(header.size() >> 8);
  pre += header;
  Fd fd;
  fd.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (fd.get() < 0) throw IoError("cannot write npy file '" + path + "': " + std::strerror(errno));
  const auto bytes =
      static_cast<index_t>(checked_bytes(count * rows * cols, sizeof(T), "create_npy_stack"));
  if (::pwrite(fd.get(), pre.data(), pre.size(), 0) != static_cast<ssize_t>(pre.size()) ||
      ::ftruncate(fd.get(), static_cast<off_t>(pre.size()) + static_cast<off_t>(bytes)) != 0)
    throw IoError("cannot write npy file '" + path + "': " + std::strerror(errno));
}

template <typename T>
void write_npy_stack_slice(const std::string& path, index_t first, StackView<const T> s) {
  if (!host_is_little_endian())
    throw IoError("write_npy_stack_slice '" + path + "': big-endian hosts are not supported");
  index_t data_offset = 0;
  {
    Fd rd;
    const ParsedFile f = parse_file(path, rd);
    const auto& shape = f.header.shape;
    const DType want = sizeof(T) == 4 ? DType::float32 : DType::float64;
    if (shape.size() != 3 || f.header.fortran_order || f.swap_bytes || f.header.dtype != want ||
        shape[1] != s.rows() || shape[2] != s.cols())
      fail(path, "write_npy_stack_slice: the file is not a C-order little-endian " +
                     std::string(dtype_name(want)) + " array of shape (c, " +
                     std::to_string(s.rows()) + ", " + std::to_string(s.cols()) + ")");
    if (first < 0 || first + s.count() > shape[0])
      fail(path, "write_npy_stack_slice: users [" + std::to_string(first) + ", " +
                     std::to_string(first + s.count()) + ") are outside the array of shape " +
                     shape_string(shape));
    data_offset = f.data_offset;
  }
  Fd fd;
  fd.reset(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) throw IoError("cannot write npy file '" + path + "': " + std::strerror(errno));
  const index_t r = s.rows(), k = s.cols();
  std::vector<T> buf(static_cast<std::size_t>(r * k));
  for (index_t m = 0; m < s.count(); ++m) {
    const MatrixView<const T> x = s[m];
    for (index_t i = 0; i < r; ++i)
      for (index_t j = 0; j < k; ++j) buf[static_cast<std::size_t>(i * k + j)] = x(i, j);
    const auto n = static_cast<std::size_t>(r * k) * sizeof(T);
    const auto* bytes = reinterpret_cast<const char*>(buf.data());
    off_t at = static_cast<off_t>(data_offset + (first + m) * r * k * index_t(sizeof(T)));
    for (std::size_t done = 0; done < n;) {
      const ssize_t w = ::pwrite(fd.get(), bytes + done, n - done, at);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        throw IoError("cannot write npy file '" + path +
                      "': " + (w < 0 ? std::strerror(errno) : "no progress (disk full?)"));
      done += static_cast<std::size_t>(w);
      at += w;
    }
  }
}

template Stack<float> read_npy_stack_slice<float>(const std::string&, index_t, index_t);
template Stack<double> read_npy_stack_slice<double>(const std::string&, index_t, index_t);
template void create_npy_stack<float>(const std::string&, index_t, index_t, index_t);
template void create_npy_stack<double>(const std::string&, index_t, index_t, index_t);
template void write_npy_stack_slice<float>(const std::string&, index_t, StackView<const float>);
template void write_npy_stack_slice<double>(const std::string&, index_t, StackView<const double>);
template Matrix<float> read_npy_matrix<float>(const std::string&);
template Matrix<double> read_npy_matrix<double>(const std::string&);
template std::vector<float> read_npy_vector<float>(const std::string&);
template std::vector<double> read_npy_vector<double>(const std::string&);
template Stack<float> read_npy_stack<float>(const std::string&);
template Stack<double> read_npy_stack<double>(const std::string&);
template void write_npy<float>(const std::string&, MatrixView<const float>);
template void write_npy<double>(const std::string&, MatrixView<const double>);
template void write_npy<float>(const std::string&, StackView<const float>);
template void write_npy<double>(const std::string&, StackView<const double>);

}  // namespace dcalign
