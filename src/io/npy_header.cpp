// The .npy preamble and header: read, parsed and validated against the file's size before
// anything is allocated (see dcalign/npy.hpp for the contract, npy.cpp for the format and the
// decisions beyond NumPy's specification). The data is read and written in npy.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "dcalign/checked.hpp"
#include "io/npy_internal.hpp"

namespace dcalign {
namespace npy_detail {

bool host_is_little_endian() {
  const std::uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

std::string shape_string(const std::vector<index_t>& shape) {
  std::string out = "(";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) out += ", ";
    out += std::to_string(shape[d]);
  }
  // Python spells a one-element tuple with a trailing comma; keep the messages in NumPy's terms.
  if (shape.size() == 1) out += ",";
  return out + ")";
}

const char* dtype_name(DType t) { return t == DType::float32 ? "float32" : "float64"; }
index_t dtype_size(DType t) { return t == DType::float32 ? 4 : 8; }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw IoError("npy file '" + path + "': " + what);
}

namespace {

// Enough to show the problem without flooding a log with a corrupt multi-megabyte header.
constexpr std::size_t kMaxQuotedChars = 120;
// Largest product of the non-zero extents of an array without elements (see parse_file).
constexpr index_t kMaxEmptyElements = index_t{1} << 24;

/// Printable rendering of untrusted bytes for error messages.
std::string quote(const std::string& bytes) {
  std::string out = "'";
  std::size_t shown = 0;
  for (const char ch : bytes) {
    if (shown++ == kMaxQuotedChars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\\' || c == '\'') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out + "'";
}

/// Recursive-descent parser for the header dict. Keeps the position so that syntax errors can
/// say where the header went wrong.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  /// Parses the dict; returns the descr string, fortran_order and shape as written.
  void parse(std::string& descr, bool& fortran_order, std::vector<index_t>& shape) {
    skip_space();
    if (at_end() || peek() != '{')
      fail(path_, "header is not a Python dict literal: expected '{' at offset " +
                      std::to_string(pos_) + ", found " + found() + " (header " + quote(text_) +
                      ")");
    ++pos_;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    while (!at_end() && peek() != '}') {
      const std::size_t key_pos = pos_;
      if (peek() != '\'' && peek() != '"') syntax_error("a quoted key or '}'");
      const std::string key = parse_string();
      skip_space();
      expect(':', "':' after key " + quote(key));
      skip_space();
      if (key == "descr") {
        mark_seen(have_descr, key, key_pos);
        // A list here describes a structured (record) dtype, which has no matrix meaning.
        if (!at_end() && peek() == '[')
          fail(path_, "unsupported dtype: structured (record) dtype " + quote(rest()) +
                          "; expected '<f4' or '<f8'");
        if (at_end() || (peek() != '\'' && peek() != '"'))
          syntax_error("a quoted dtype string as the value of 'descr'");
        descr = parse_string();
      } else if (key == "fortran_order") {
        mark_seen(have_order, key, key_pos);
        fortran_order = parse_bool();
      } else if (key == "shape") {
        mark_seen(have_shape, key, key_pos);
        shape = parse_shape();
      } else {
        fail(path_, "unknown key " + quote(key) + " in header at offset " +
                        std::to_string(key_pos) +
                        "; expected only 'descr', 'fortran_order' and 'shape' (header " +
                        quote(text_) + ")");
      }
      skip_space();
      if (!at_end() && peek() == ',') {
        ++pos_;
        skip_space();
      } else if (at_end() || peek() != '}') {
        syntax_error("',' or '}' after the value of " + quote(key));
      }
    }
    expect('}', "'}' closing the header dict");
    // NumPy pads the header with spaces and a final newline; nothing else may follow the dict.
    skip_space();
    if (!at_end()) syntax_error("only padding (spaces, newline) after the header dict");

    std::string missing;
    for (const auto& [seen, name] : {std::pair<bool, const char*>{have_descr, "'descr'"},
                                     {have_order, "'fortran_order'"},
                                     {have_shape, "'shape'"}}) {
      if (!seen) missing += (missing.empty() ? "" : ", ") + std::string(name);
    }
    if (!missing.empty())
      fail(path_, "header is missing key(s) " + missing +
                      "; expected 'descr', 'fortran_order' and 'shape' (header " + quote(text_) +
                      ")");
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  std::string rest() const { return text_.substr(pos_); }
  std::string found() const { return at_end() ? std::string("end of header") : quote(rest()); }

  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }

  [[noreturn]] void syntax_error(const std::string& expected) const {
    fail(path_, "bad header syntax at offset " + std::to_string(pos_) + ": expected " + expected +
                    ", found " + found() + " (header " + quote(text_) + ")");
  }

  void expect(char c, const std::string& what) {
    if (at_end() || peek() != c) syntax_error(what);
    ++pos_;
  }

  void mark_seen(bool& seen, const std::string& key, std::size_t key_pos) {
    if (seen)
      fail(path_, "duplicate key " + quote(key) + " in header at offset " +
                      std::to_string(key_pos) + "; each key must appear once");
    seen = true;
  }

  // Python string literal without escapes; the values NumPy writes never need any.
  std::string parse_string() {
    const char q = peek();
    const std::size_t start = ++pos_;
    while (!at_end() && peek() != q && peek() != '\n') {
      if (peek() == '\\') syntax_error("a plain string without escapes");
      ++pos_;
    }
    // Python string literals cannot span lines, and NumPy's padding always ends with '\n'.
    if (at_end() || peek() == '\n') {
      pos_ = start - 1;
      syntax_error("a terminated string literal");
    }
    return text_.substr(start, pos_++ - start);
  }

  bool parse_bool() {
    std::size_t end = pos_;
    while (end < text_.size() && std::isalnum(static_cast<unsigned char>(text_[end]))) ++end;
    const std::string word = text_.substr(pos_, end - pos_);
    if (word != "True" && word != "False") syntax_error("True or False for 'fortran_order'");
    pos_ = end;
    return word == "True";
  }

  // A tuple of decimal integers; negative values are parsed so that they can be reported as
  // such by the shape validation instead of as a syntax error.
  std::vector<index_t> parse_shape() {
    std::vector<index_t> shape;
    expect('(', "a tuple '(' as the value of 'shape'");
    skip_space();
    bool trailing_comma = false;
    while (!at_end() && peek() != ')') {
      shape.push_back(parse_int());
      skip_space();
      trailing_comma = false;
      if (!at_end() && peek() == ',') {
        ++pos_;
        trailing_comma = true;
        skip_space();
      } else if (at_end() || peek() != ')') {
        syntax_error("',' or ')' in the shape tuple");
      }
    }
    // "(3)" is the integer 3 in Python, not a tuple; NumPy would reject it too.
    if (shape.size() == 1 && !trailing_comma) syntax_error("',' after the only extent of shape");
    expect(')', "')' closing the shape tuple");
    return shape;
  }

  index_t parse_int() {
    const std::size_t start = pos_;
    const bool negative = !at_end() && peek() == '-';
    if (negative) ++pos_;
    if (at_end() || !std::isdigit(static_cast<unsigned char>(peek())))
      syntax_error("an integer extent in the shape tuple");
    const std::size_t digits = pos_;
    index_t value = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) {
      const int d = peek() - '0';
      if (value > (std::numeric_limits<index_t>::max() - d) / 10)
        fail(path_, "absurd shape: extent " + quote(text_.substr(start, 40)) +
                        " does not fit in a 64-bit integer");
      value = value * 10 + d;
      ++pos_;
    }
    if (pos_ - digits > 1 && text_[digits] == '0') {
      pos_ = start;
      syntax_error("an integer without leading zeros");
    }
    return negative ? -value : value;
  }

  const std::string& path_;
  const std::string& text_;
  std::size_t pos_ = 0;
};

/// Maps the 'descr' string to a dtype and byte order, or throws.
void interpret_descr(const std::string& path, const std::string& descr, ParsedFile& out) {
  const std::string expected = "; expected float32 or float64 as '<f4' or '<f8'";
  const std::string code = descr.size() == 3 ? descr.substr(1) : std::string();
  if (code != "f4" && code != "f8") fail(path, "unsupported dtype " + quote(descr) + expected);
  out.header.dtype = code == "f4" ? DType::float32 : DType::float64;
  bool file_little = true;
  switch (descr[0]) {
    case '<':
      file_little = true;
      break;
    case '>':
      file_little = false;
      break;
    case '=':
      file_little = host_is_little_endian();
      break;
    case '|':
      fail(path, "unsupported dtype " + quote(descr) +
                     ": byte order '|' (not applicable) is ambiguous for a multi-byte float" +
                     expected);
    default:
      fail(path, "unsupported dtype " + quote(descr) + ": unknown byte order character" + expected);
  }
  out.swap_bytes = file_little != host_is_little_endian();
}

}  // namespace

// One read() returns at most about 2 GiB on Linux; larger requests are split.
constexpr index_t kMaxReadBytes = index_t{1} << 30;

/// Reads exactly `n` bytes at `offset` into `dst` with pread (which does not move a file
/// position, so threads can share the descriptor). Returns an empty string on success, otherwise
/// what went wrong. Thread-safe; never throws.
std::string pread_exact(int fd, void* dst, index_t n, index_t offset) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got =
        ::pread(fd, p, static_cast<std::size_t>(std::min(n, kMaxReadBytes)), offset);
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::error_code(errno, std::generic_category()).message();
    }
    if (got == 0) return "unexpected end of file";
    p += got;
    n -= got;
    offset += got;
  }
  return {};
}

/// Opens `path` into `fd`, reads and validates the preamble and header, and checks the data size
/// against the file size.
ParsedFile parse_file(const std::string& path, Fd& fd) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) fail(path, "cannot read: no such file");
  // Other failures (permissions on a parent directory, broken media) keep the system's words.
  if (ec || !fs::exists(st)) fail(path, "cannot read: " + ec.message());
  if (fs::is_directory(st)) fail(path, "cannot read: it is a directory, expected a .npy file");
  const std::uintmax_t file_size = fs::file_size(path, ec);
  if (ec) fail(path, "cannot read: cannot determine the file size (" + ec.message() + ")");
  if (file_size > static_cast<std::uintmax_t>(std::numeric_limits<index_t>::max()))
    fail(path, "cannot read: file is too large");
  const auto size = static_cast<index_t>(file_size);

  fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));

  index_t pos = 0;
  auto read_exact = [&](std::string& buf, index_t n, const char* what) {
    buf.resize(static_cast<std::size_t>(n));
    const std::string error = pread_exact(fd.get(), buf.data(), n, pos);
    if (!error.empty())
      fail(path, std::string("read error in the ") + what + " (" + error +
                     "; file changed while reading?)");
    pos += n;
  };

  std::string pre;
  read_exact(pre, std::min<index_t>(size, kMagicSize + 2), "preamble");
  if (pre.compare(0, kMagicSize, kMagic, kMagicSize) != 0)
    fail(path, "bad magic string: expected '\\x93NUMPY', found " +
                   quote(pre.substr(0, kMagicSize)) + " (not a .npy file)");
  if (size < static_cast<index_t>(kMagicSize + 2))
    fail(path, "truncated header: file ends after " + std::to_string(size) +
                   " bytes, inside the version field");
  const int major = static_cast<unsigned char>(pre[6]);
  const int minor = static_cast<unsigned char>(pre[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(path, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
                   "; expected 1.0, 2.0 or 3.0");

  const index_t len_bytes = major == 1 ? 2 : 4;
  const index_t preamble = static_cast<index_t>(kMagicSize) + 2 + len_bytes;
  if (size < preamble)
    fail(path, "truncated header: file ends after " + std::to_string(size) +
                   " bytes, inside the header length field of version " + std::to_string(major) +
                   ".0");
  std::string len_field;
  read_exact(len_field, len_bytes, "header length");
  index_t header_len = 0;  // little-endian in every version
  for (index_t b = len_bytes - 1; b >= 0; --b)
    header_len = header_len * 256 + static_cast<unsigned char>(len_field[static_cast<size_t>(b)]);
  if (header_len > size - preamble)
    fail(path, "truncated header: declared header length is " + std::to_string(header_len) +
                   " bytes, but only " + std::to_string(size - preamble) +
                   " bytes follow the preamble");

  std::string text;
  read_exact(text, header_len, "header");
  std::string descr;
  ParsedFile out;
  HeaderParser(path, text).parse(descr, out.header.fortran_order, out.header.shape);
  interpret_descr(path, descr, out);

  const std::vector<index_t>& shape = out.header.shape;
  for (const index_t extent : shape) {
    if (extent < 0)
      fail(path, "negative extent in shape " + shape_string(shape) + "; expected extents >= 0");
  }
  // Byte count with overflow checks. Zero extents are counted as 1 here so that a shape like
  // (0, 10**19) is still rejected as absurd even though it holds no element.
  const index_t limit = std::numeric_limits<index_t>::max();
  index_t bytes = dtype_size(out.header.dtype), bound = bytes;
  for (const index_t extent : shape) {
    const index_t e = extent == 0 ? 1 : extent;
    if (bound > limit / e)
      fail(path, "absurd shape " + shape_string(shape) + ": its byte count overflows int64");
    bound *= e;
    bytes *= extent;
  }
  // An empty array holds no data that could justify its other extents, yet whoever uses it
  // sizes loops and per-matrix, per-row or per-column structures by them (a (2**40, 0, 5)
  // anchor stack would be 2**40 users). Bound them as a file of that many elements would be.
  const index_t virtual_elements = bound / dtype_size(out.header.dtype);
  if (bytes == 0 && virtual_elements > kMaxEmptyElements)
    fail(path, "absurd shape " + shape_string(shape) + ": the array is empty, but its other " +
                   "extents multiply to " + std::to_string(virtual_elements) +
                   "; an empty array may have at most " + std::to_string(kMaxEmptyElements) +
                   " there (a file with no data cannot justify larger extents)");
  out.data_offset = preamble + header_len;
  out.data_bytes = size - out.data_offset;
  const std::string described = "shape " + shape_string(shape) + " of " +
                                dtype_name(out.header.dtype) + " needs " + std::to_string(bytes) +
                                " data bytes";
  if (out.data_bytes < bytes)
    fail(path, "truncated data: " + described + ", but only " + std::to_string(out.data_bytes) +
                   " bytes follow the header");
  if (out.data_bytes > bytes)
    fail(path, "trailing garbage: " + described + ", but " + std::to_string(out.data_bytes) +
                   " bytes follow the header (" + std::to_string(out.data_bytes - bytes) +
                   " extra)");
  return out;
}

}  // namespace npy_detail

NpyHeader read_npy_header(const std::string& path) {
  npy_detail::Fd fd;
  return npy_detail::parse_file(path, fd).header;
}

}  // namespace dcalign
