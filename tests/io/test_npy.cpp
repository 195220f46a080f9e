// Tests of the .npy reader and writer: round trips, files written by NumPy itself (see
// tests/data/npy/make_fixtures.py), and every kind of malformed file the reader must reject.
#include "dcalign/npy.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "data/alloc_tracker.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;

std::string Fixture(const std::string& name) {
  return std::string(DCALIGN_TEST_DATA_DIR) + "/npy/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Encodes values explicitly byte by byte so that the expected bytes do not depend on the host.
template <typename U>
void AppendUnsigned(std::string& out, U bits, bool big_endian) {
  for (std::size_t b = 0; b < sizeof(U); ++b) {
    const std::size_t shift = 8 * (big_endian ? sizeof(U) - 1 - b : b);
    out += static_cast<char>((bits >> shift) & 0xff);
  }
}

std::string F8Bytes(const std::vector<double>& values, bool big_endian = false) {
  std::string out;
  for (const double v : values) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    AppendUnsigned(out, bits, big_endian);
  }
  return out;
}

std::string F4Bytes(const std::vector<float>& values, bool big_endian = false) {
  std::string out;
  for (const float v : values) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    AppendUnsigned(out, bits, big_endian);
  }
  return out;
}

// Magic, version and header length field, as the format defines them.
std::string Preamble(int major, int minor, std::uint32_t header_len) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  if (major == 1)
    AppendUnsigned(out, static_cast<std::uint16_t>(header_len), false);
  else
    AppendUnsigned(out, header_len, false);
  return out;
}

// A complete file: `dict` padded like NumPy does (spaces, newline, data 64-byte aligned) unless
// `pad` is false, followed by `data`.
std::string NpyFile(std::string dict, const std::string& data, int major = 1, bool pad = true) {
  if (pad) {
    const std::size_t preamble = major == 1 ? 10 : 12;
    while ((preamble + dict.size() + 1) % 64 != 0) dict += ' ';
    dict += '\n';
  }
  return Preamble(major, 0, static_cast<std::uint32_t>(dict.size())) + dict + data;
}

std::string Dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

// 3 x 4 float64 holding 10*i + j, in C order: a valid file that the malformed cases perturb.
std::vector<double> Grid34() {
  std::vector<double> v;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) v.push_back(10 * i + j);
  return v;
}

// Succeeds when `f` throws IoError whose message names `path` and contains every phrase.
::testing::AssertionResult ThrowsIoError(const std::function<void()>& f, const std::string& path,
                                         const std::vector<std::string>& phrases) {
  try {
    f();
  } catch (const IoError& e) {
    const std::string msg = e.what();
    if (msg.find(path) == std::string::npos)
      return ::testing::AssertionFailure() << "message does not name " << path << ": " << msg;
    for (const auto& p : phrases)
      if (msg.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << p << "\": " << msg;
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another exception type: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("dcalign_npy_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::string WriteBytes(const std::string& name, const std::string& bytes) const {
    const std::string path = Path(name);
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    EXPECT_TRUE(out.good()) << path;
    return path;
  }

  // Each reader must reject the file with the same diagnosis.
  void ExpectAllReadersReject(const std::string& path, const std::vector<std::string>& phrases) {
    EXPECT_TRUE(ThrowsIoError([&] { read_npy_header(path); }, path, phrases));
    EXPECT_TRUE(ThrowsIoError([&] { read_npy_matrix<double>(path); }, path, phrases));
    EXPECT_TRUE(ThrowsIoError([&] { read_npy_matrix<float>(path); }, path, phrases));
    EXPECT_TRUE(ThrowsIoError([&] { read_npy_stack<double>(path); }, path, phrases));
  }

  fs::path dir_;
};

// ---------------------------------------------------------------------------------------------
// Round trips and the written layout.

template <typename T>
Matrix<T> TestMatrix(index_t rows, index_t cols) {
  Matrix<T> m(rows, cols);
  // Values that are not small integers, so that any precision loss would show.
  for (index_t j = 0; j < cols; ++j)
    for (index_t i = 0; i < rows; ++i) m(i, j) = T(0.1) * T(i + 1) - T(j) / T(3) + T(1e-7);
  return m;
}

template <typename T>
Stack<T> TestStack(index_t count, index_t rows, index_t cols) {
  Stack<T> s(count, rows, cols);
  for (index_t k = 0; k < count; ++k)
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) s(k, i, j) = T(k) * T(1.5) - T(i) / T(7) + T(j) * T(0.3);
  return s;
}

template <typename T>
void ExpectMatrixRoundTrip(const std::string& path) {
  const Matrix<T> m = TestMatrix<T>(3, 5);
  write_npy(path, m.view());
  const Matrix<T> back = read_npy_matrix<T>(path);
  ASSERT_EQ(back.rows(), 3);
  ASSERT_EQ(back.cols(), 5);
  EXPECT_EQ(back.values(), m.values());
}

template <typename T>
void ExpectStackRoundTrip(const std::string& path) {
  const Stack<T> s = TestStack<T>(3, 2, 5);
  write_npy(path, s.view());
  const Stack<T> back = read_npy_stack<T>(path);
  ASSERT_EQ(back.count(), 3);
  ASSERT_EQ(back.rows(), 2);
  ASSERT_EQ(back.cols(), 5);
  EXPECT_EQ(std::vector<T>(back.data(), back.data() + back.size()),
            std::vector<T>(s.data(), s.data() + s.size()));
}

TEST_F(NpyTest, RoundTripMatrixDouble) { ExpectMatrixRoundTrip<double>(Path("m.npy")); }
TEST_F(NpyTest, RoundTripMatrixFloat) { ExpectMatrixRoundTrip<float>(Path("m.npy")); }
TEST_F(NpyTest, RoundTripStackDouble) { ExpectStackRoundTrip<double>(Path("s.npy")); }
TEST_F(NpyTest, RoundTripStackFloat) { ExpectStackRoundTrip<float>(Path("s.npy")); }

// read_npy_stack allocates its result without zero-filling it (the reader writes every
// element); the constructor it uses checks the shape like the zeroing one, and zeroing stays
// the default.
TEST_F(NpyTest, UninitializedStackKeepsTheShapeChecks) {
  const Stack<double> s(2, 3, 4, uninitialized);
  EXPECT_EQ(s.size(), 24);
  EXPECT_EQ(s.stride(), 12);
  EXPECT_THROW(Stack<double>(2, -3, 4, uninitialized), InvalidInput);
  EXPECT_THROW(Stack<float>(index_t(1) << 40, index_t(1) << 40, 4, uninitialized), InvalidInput);
  const Stack<double> z(2, 3, 4);
  EXPECT_EQ(std::count(z.data(), z.data() + z.size(), 0.0), 24);
}

TEST_F(NpyTest, RoundTripEmptyMatrixAndStack) {
  write_npy(Path("m.npy"), Matrix<double>(0, 3).view());
  const Matrix<double> m = read_npy_matrix<double>(Path("m.npy"));
  EXPECT_EQ(m.rows(), 0);
  EXPECT_EQ(m.cols(), 3);
  write_npy(Path("s.npy"), Stack<float>(2, 0, 4).view());
  const Stack<float> s = read_npy_stack<float>(Path("s.npy"));
  EXPECT_EQ(s.count(), 2);
  EXPECT_EQ(s.rows(), 0);
  EXPECT_EQ(s.cols(), 4);
}

TEST_F(NpyTest, WritesViewWithLeadingDimension) {
  // Rows 1..2 of a 4 x 3 matrix: a view whose ld (4) differs from its row count (2).
  const Matrix<double> big = TestMatrix<double>(4, 3);
  write_npy(Path("sub.npy"), big.view().rows_range(1, 2));
  const Matrix<double> back = read_npy_matrix<double>(Path("sub.npy"));
  ASSERT_EQ(back.rows(), 2);
  ASSERT_EQ(back.cols(), 3);
  for (index_t j = 0; j < 3; ++j)
    for (index_t i = 0; i < 2; ++i) EXPECT_EQ(back(i, j), big(i + 1, j)) << i << "," << j;
}

TEST_F(NpyTest, WrittenMatrixHasNumpyLayout) {
  Matrix<double> m(2, 3);
  for (index_t i = 0; i < 2; ++i)
    for (index_t j = 0; j < 3; ++j) m(i, j) = 10.0 * i + j;
  write_npy(Path("m.npy"), m.view());
  const std::string bytes = ReadAll(Path("m.npy"));
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_len =
      static_cast<unsigned char>(bytes[8]) + 256u * static_cast<unsigned char>(bytes[9]);
  const std::size_t offset = 10 + header_len;
  EXPECT_EQ(offset % 64, 0u);
  ASSERT_EQ(bytes.size(), offset + 6 * 8);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_EQ(header.rfind(Dict("<f8", "(2, 3)"), 0), 0u) << header;
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.find_first_not_of(' ', Dict("<f8", "(2, 3)").size()), header_len - 1);
  // C order: row 0 first.
  EXPECT_EQ(bytes.substr(offset), F8Bytes({0, 1, 2, 10, 11, 12}));
}

TEST_F(NpyTest, WrittenFloatStackHasNumpyLayout) {
  Stack<float> s(2, 2, 3);
  for (index_t k = 0; k < 2; ++k)
    for (index_t i = 0; i < 2; ++i)
      for (index_t j = 0; j < 3; ++j) s(k, i, j) = 100.0f * k + 10.0f * i + j;
  write_npy(Path("s.npy"), s.view());
  const std::string bytes = ReadAll(Path("s.npy"));
  ASSERT_GE(bytes.size(), 10u);
  const std::size_t offset =
      10 + static_cast<unsigned char>(bytes[8]) + 256u * static_cast<unsigned char>(bytes[9]);
  EXPECT_EQ(offset % 64, 0u);
  EXPECT_EQ(bytes.substr(10, Dict("<f4", "(2, 2, 3)").size()), Dict("<f4", "(2, 2, 3)"));
  ASSERT_LE(offset, bytes.size());
  EXPECT_EQ(bytes.substr(offset), F4Bytes({0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112}));
}

TEST_F(NpyTest, WrittenDataMatchesNumpyFixtureBytes) {
  // NumPy's header differs (it reserves room to grow the shape), but the data must be identical.
  Stack<double> s(2, 3, 4);
  for (index_t k = 0; k < 2; ++k)
    for (index_t i = 0; i < 3; ++i)
      for (index_t j = 0; j < 4; ++j) s(k, i, j) = 100.0 * k + 10.0 * i + j;
  write_npy(Path("s.npy"), s.view());
  const std::string ours = ReadAll(Path("s.npy"));
  const std::string numpy = ReadAll(Fixture("c_f8_3d.npy"));
  ASSERT_GE(ours.size(), 192u);
  ASSERT_GE(numpy.size(), 192u);
  EXPECT_EQ(ours.substr(ours.size() - 192), numpy.substr(numpy.size() - 192));
}

// ---------------------------------------------------------------------------------------------
// Files written by NumPy.

template <typename T>
void ExpectGrid34(const std::string& path) {
  SCOPED_TRACE(path);
  const Matrix<T> m = read_npy_matrix<T>(path);
  ASSERT_EQ(m.rows(), 3);
  ASSERT_EQ(m.cols(), 4);
  for (index_t i = 0; i < 3; ++i)
    for (index_t j = 0; j < 4; ++j) EXPECT_EQ(m(i, j), T(10 * i + j)) << i << "," << j;
}

template <typename T>
void ExpectGrid234(const std::string& path) {
  SCOPED_TRACE(path);
  const Stack<T> s = read_npy_stack<T>(path);
  ASSERT_EQ(s.count(), 2);
  ASSERT_EQ(s.rows(), 3);
  ASSERT_EQ(s.cols(), 4);
  for (index_t k = 0; k < 2; ++k)
    for (index_t i = 0; i < 3; ++i)
      for (index_t j = 0; j < 4; ++j)
        EXPECT_EQ(s(k, i, j), T(100 * k + 10 * i + j)) << k << "," << i << "," << j;
}

TEST_F(NpyTest, ReadsNumpyMatrices) {
  for (const char* name :
       {"c_f4_2d.npy", "f_f4_2d.npy", "c_f8_2d.npy", "f_f8_2d.npy", "v2_f8_2d.npy"}) {
    ExpectGrid34<double>(Fixture(name));
    ExpectGrid34<float>(Fixture(name));
  }
}

TEST_F(NpyTest, ReadsNumpyStacks) {
  for (const char* name : {"c_f4_3d.npy", "f_f4_3d.npy", "c_f8_3d.npy", "f_f8_3d.npy",
                           "v3_f4_3d.npy", "be_f8_3d.npy"}) {
    ExpectGrid234<double>(Fixture(name));
    ExpectGrid234<float>(Fixture(name));
  }
}

TEST_F(NpyTest, ReadsNumpyHeaders) {
  const NpyHeader f = read_npy_header(Fixture("f_f4_3d.npy"));
  EXPECT_EQ(f.dtype, DType::float32);
  EXPECT_TRUE(f.fortran_order);
  EXPECT_EQ(f.shape, (std::vector<index_t>{2, 3, 4}));
  const NpyHeader c = read_npy_header(Fixture("c_f8_2d.npy"));
  EXPECT_EQ(c.dtype, DType::float64);
  EXPECT_FALSE(c.fortran_order);
  EXPECT_EQ(c.shape, (std::vector<index_t>{3, 4}));
  const NpyHeader v2 = read_npy_header(Fixture("v2_f8_2d.npy"));
  EXPECT_EQ(v2.dtype, DType::float64);
  EXPECT_EQ(v2.shape, (std::vector<index_t>{3, 4}));
  const NpyHeader be = read_npy_header(Fixture("be_f8_3d.npy"));
  EXPECT_EQ(be.dtype, DType::float64);
  EXPECT_EQ(be.shape, (std::vector<index_t>{2, 3, 4}));
}

TEST_F(NpyTest, Float32ReadAsDoubleWidens) {
  const Matrix<double> m = read_npy_matrix<double>(Fixture("c_f4_tenths.npy"));
  ASSERT_EQ(m.rows(), 2);
  ASSERT_EQ(m.cols(), 3);
  const float expected[2][3] = {{0.1f, 0.2f, 0.3f}, {0.7f, 1.5f, -2.25f}};
  for (index_t i = 0; i < 2; ++i)
    for (index_t j = 0; j < 3; ++j) EXPECT_EQ(m(i, j), static_cast<double>(expected[i][j]));
  // The widened float32 value, not the decimal the generator started from.
  EXPECT_NE(m(0, 0), 0.1);
}

TEST_F(NpyTest, Float64ReadAsFloatRounds) {
  const std::vector<double> v = {0.1, 1.0 / 3.0, -2.0 / 7.0, 1e-40, 16777217.0, 5.0};
  write_npy(Path("d.npy"), Matrix<double>(2, 3, v).view());
  const Matrix<float> m = read_npy_matrix<float>(Path("d.npy"));
  ASSERT_EQ(m.rows(), 2);
  ASSERT_EQ(m.cols(), 3);
  for (std::size_t k = 0; k < v.size(); ++k) EXPECT_EQ(m.values()[k], static_cast<float>(v[k]));
  // 2^24 + 1 is not a float; rounding to nearest (even) gives 2^24.
  EXPECT_EQ(m.values()[4], 16777216.0f);
}

// ---------------------------------------------------------------------------------------------
// Valid variations that NumPy does not write but that the format allows.

TEST_F(NpyTest, AcceptsUnpaddedHeaderWithOtherQuotingAndSpacing) {
  const std::string path =
      WriteBytes("v.npy", NpyFile("{\"shape\":(2,2),\"fortran_order\":True,\"descr\":\"<f8\"}",
                                  F8Bytes({1, 2, 3, 4}), 1, false));
  const Matrix<double> m = read_npy_matrix<double>(path);
  // Fortran order: the data is already column-major.
  EXPECT_EQ(m.values(), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(m(0, 1), 3.0);
}

TEST_F(NpyTest, ReadsVectorsAndRefusesOtherRanksAsVectors) {
  const std::string v = WriteBytes("vec.npy", NpyFile(Dict("<f8", "(3,)"), F8Bytes({1.5, -2, 7})));
  EXPECT_EQ(read_npy_vector<double>(v), (std::vector<double>{1.5, -2, 7}));
  EXPECT_EQ(read_npy_vector<float>(v), (std::vector<float>{1.5f, -2.0f, 7.0f}));
  const std::string f4 = WriteBytes("vec4.npy", NpyFile(Dict("<f4", "(2,)"), F4Bytes({0.25f, 3})));
  EXPECT_EQ(read_npy_vector<double>(f4), (std::vector<double>{0.25, 3}));
  const std::string m = WriteBytes("m2.npy", NpyFile(Dict("<f8", "(3, 1)"), F8Bytes({1, 2, 3})));
  try {
    (void)read_npy_vector<double>(m);
    FAIL() << "a 2-D array read as a vector";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a 1-D array"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)read_npy_matrix<double>(v), IoError);
}

TEST_F(NpyTest, HandBuiltVersion2And3Files) {
  for (const int major : {2, 3}) {
    const std::string path = WriteBytes("v" + std::to_string(major) + ".npy",
                                        NpyFile(Dict("<f8", "(3, 4)"), F8Bytes(Grid34()), major));
    ExpectGrid34<double>(path);
  }
}

TEST_F(NpyTest, BigEndianAndNativeByteOrders) {
  // '>': byte-swapped on read; '=': the host's order (little-endian on supported hosts).
  ExpectGrid34<double>(
      WriteBytes("be8.npy", NpyFile(Dict(">f8", "(3, 4)"), F8Bytes(Grid34(), true))));
  const std::vector<double> grid = Grid34();
  const std::vector<float> g(grid.begin(), grid.end());
  ExpectGrid34<float>(WriteBytes("be4.npy", NpyFile(Dict(">f4", "(3, 4)"), F4Bytes(g, true))));
  ExpectGrid34<double>(WriteBytes("ne8.npy", NpyFile(Dict("=f8", "(3, 4)"), F8Bytes(Grid34()))));
}

TEST_F(NpyTest, HeaderOfOneDimensionalFileIsReported) {
  // read_npy_header describes any valid file, so a caller can see why a read would fail.
  const std::string path =
      WriteBytes("1d.npy", NpyFile(Dict("<f8", "(4,)"), F8Bytes({1, 2, 3, 4})));
  EXPECT_EQ(read_npy_header(path).shape, (std::vector<index_t>{4}));
}

// ---------------------------------------------------------------------------------------------
// Large files: the reader works in blocks (several small matrices, whole rows of a large one, or
// partial rows of very long rows), transposes them in tiles, and shares the blocks among threads
// above a few MiB. Shapes are chosen so that no block or tile size divides them; every element
// is compared with its expected value.

// The value at arr[s, i, j]: pseudo-random, so that a misplaced element shows, and exactly
// representable in float32, so that the expected value does not depend on the file's dtype.
double LargeValue(index_t s, index_t i, index_t j) {
  std::uint64_t h =
      (static_cast<std::uint64_t>(s) * 1000003u + static_cast<std::uint64_t>(i)) * 1000033u +
      static_cast<std::uint64_t>(j);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return static_cast<double>(h & 0xffffff) / 64.0 - 100000.0;
}

struct LargeCase {
  index_t c, r, k;
  bool fortran, f32, big_endian;
  bool two_d = false;  // write shape (r, k); c must be 1
};

std::string LargeFileBytes(const LargeCase& t) {
  const std::string shape = "(" + (t.two_d ? "" : std::to_string(t.c) + ", ") +
                            std::to_string(t.r) + ", " + std::to_string(t.k) + ")";
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(t.c * t.r * t.k));
  if (t.fortran) {
    for (index_t j = 0; j < t.k; ++j)
      for (index_t i = 0; i < t.r; ++i)
        for (index_t s = 0; s < t.c; ++s) values.push_back(LargeValue(s, i, j));
  } else {
    for (index_t s = 0; s < t.c; ++s)
      for (index_t i = 0; i < t.r; ++i)
        for (index_t j = 0; j < t.k; ++j) values.push_back(LargeValue(s, i, j));
  }
  const std::string descr = std::string(t.big_endian ? ">" : "<") + (t.f32 ? "f4" : "f8");
  const std::string data =
      t.f32 ? F4Bytes(std::vector<float>(values.begin(), values.end()), t.big_endian)
            : F8Bytes(values, t.big_endian);
  return NpyFile(Dict(descr, shape, t.fortran), data);
}

template <typename T>
::testing::AssertionResult StackHasLargeValues(const Stack<T>& s, const LargeCase& t) {
  if (s.count() != t.c || s.rows() != t.r || s.cols() != t.k)
    return ::testing::AssertionFailure()
           << "shape " << s.count() << " x " << s.rows() << " x " << s.cols();
  for (index_t k = 0; k < t.c; ++k)
    for (index_t j = 0; j < t.k; ++j)
      for (index_t i = 0; i < t.r; ++i)
        if (s(k, i, j) != static_cast<T>(LargeValue(k, i, j)))
          return ::testing::AssertionFailure()
                 << "element (" << k << ", " << i << ", " << j << ") is " << s(k, i, j)
                 << ", expected " << LargeValue(k, i, j);
  return ::testing::AssertionSuccess();
}

TEST_F(NpyTest, LargeStacksInEveryLayout) {
  const std::vector<std::vector<index_t>> shapes = {
      {3, 5000, 37},   // float64: 4.4 MB (threads), 2 row blocks per matrix, odd tiles
      {7, 301, 250},   // Fortran order: one 75250 x 7 matrix in 5 row blocks
      {2, 17, 17000},  // rows too long for a block: partial-row blocks, 17 rows not a multiple
      {9000, 3, 5},    // many tiny matrices, several per block; Fortran: 9000-element rows
      {3, 1, 300000},  // one row per matrix: no transposition
      {2, 70001, 1},   // one column per matrix: no transposition either
  };
  for (const auto& sh : shapes) {
    for (const auto& [fortran, f32, big_endian] :
         {std::tuple<bool, bool, bool>{false, false, false},
          {true, false, false},
          {false, true, false},
          {true, true, false},
          {false, false, true},
          {true, true, true}}) {
      const LargeCase t{sh[0], sh[1], sh[2], fortran, f32, big_endian};
      SCOPED_TRACE(::testing::Message()
                   << "shape (" << t.c << ", " << t.r << ", " << t.k << ") "
                   << (big_endian ? ">" : "<") << (f32 ? "f4" : "f8") << (fortran ? " F" : " C"));
      const std::string path = WriteBytes("large.npy", LargeFileBytes(t));
      EXPECT_TRUE(StackHasLargeValues(read_npy_stack<double>(path), t));
      EXPECT_TRUE(StackHasLargeValues(read_npy_stack<float>(path), t));
    }
  }
}

TEST_F(NpyTest, LargeMatricesInBothOrders) {
  // A matrix is the one-matrix case of the stack reader; Fortran order needs no transposition.
  for (const bool fortran : {false, true}) {
    const LargeCase t{1, 1201, 901, fortran, false, false, true};  // 8.7 MB
    const Matrix<double> m = read_npy_matrix<double>(WriteBytes("m.npy", LargeFileBytes(t)));
    ASSERT_EQ(m.rows(), 1201);
    ASSERT_EQ(m.cols(), 901);
    bool all = true;
    for (index_t j = 0; j < 901; ++j)
      for (index_t i = 0; i < 1201; ++i) all = all && m(i, j) == LargeValue(0, i, j);
    EXPECT_TRUE(all) << (fortran ? "Fortran" : "C") << " order";
  }
}

TEST_F(NpyTest, LargeRoundTripMatchesElementwise) {
  // write_npy (C order) then read: the blocked transpose must put every element where the
  // element-wise definition does. 5 x 3001 x 93 doubles is 11 MB: several blocks per matrix,
  // read on all threads.
  Stack<double> s(5, 3001, 93);
  for (index_t k = 0; k < s.count(); ++k)
    for (index_t j = 0; j < s.cols(); ++j)
      for (index_t i = 0; i < s.rows(); ++i) s(k, i, j) = LargeValue(k, i, j) / 3.0;
  write_npy(Path("rt.npy"), s.view());
  const Stack<double> back = read_npy_stack<double>(Path("rt.npy"));
  ASSERT_EQ(back.count(), 5);
  ASSERT_EQ(back.rows(), 3001);
  ASSERT_EQ(back.cols(), 93);
  EXPECT_TRUE(std::equal(s.data(), s.data() + s.size(), back.data()));
  const Stack<float> narrow = read_npy_stack<float>(Path("rt.npy"));
  bool all = true;
  for (index_t e = 0; e < s.size(); ++e)
    all = all && narrow.data()[e] == static_cast<float>(s.data()[e]);
  EXPECT_TRUE(all);
}

// ---------------------------------------------------------------------------------------------
// Malformed files and I/O failures.

TEST_F(NpyTest, MissingFile) {
  const std::string path = Path("does_not_exist.npy");
  ExpectAllReadersReject(path, {"no such file"});
}

TEST_F(NpyTest, DirectoryInsteadOfFile) {
  const std::string path = Path("a_directory.npy");
  fs::create_directory(path);
  ExpectAllReadersReject(path, {"directory"});
}

TEST_F(NpyTest, BadMagic) {
  ExpectAllReadersReject(WriteBytes("empty.npy", ""), {"bad magic", "found ''"});
  ExpectAllReadersReject(WriteBytes("short.npy", "\x93NUM"), {"bad magic"});
  std::string npz = NpyFile(Dict("<f8", "(3, 4)"), F8Bytes(Grid34()));
  npz[5] = 'Z';
  ExpectAllReadersReject(WriteBytes("npz.npy", npz), {"bad magic", "NUMPZ", "expected"});
  ExpectAllReadersReject(WriteBytes("text.npy", "hello, world\n"), {"bad magic", "hello"});
}

TEST_F(NpyTest, UnknownVersion) {
  const std::string rest = NpyFile(Dict("<f8", "(3, 4)"), F8Bytes(Grid34())).substr(8);
  for (const auto& [major, minor, shown] : {std::tuple<int, int, const char*>{4, 0, "4.0"},
                                            {1, 1, "1.1"},
                                            {0, 0, "0.0"},
                                            {255, 0, "255.0"}}) {
    std::string bytes = "\x93NUMPY";
    bytes += static_cast<char>(major);
    bytes += static_cast<char>(minor);
    ExpectAllReadersReject(WriteBytes("v.npy", bytes + rest),
                           {"unsupported format version " + std::string(shown), "expected 1.0"});
  }
}

TEST_F(NpyTest, TruncatedPreamble) {
  ExpectAllReadersReject(WriteBytes("a.npy", "\x93NUMPY\x01"), {"truncated header"});
  ExpectAllReadersReject(WriteBytes("b.npy", std::string("\x93NUMPY\x01\x00\x10", 9)),
                         {"truncated header", "header length field"});
  ExpectAllReadersReject(WriteBytes("c.npy", std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11)),
                         {"truncated header", "header length field"});
}

TEST_F(NpyTest, TruncatedHeader) {
  const std::string full = NpyFile(Dict("<f8", "(3, 4)"), F8Bytes(Grid34()));
  // Cut inside the header: the declared length (118) exceeds what is left.
  ExpectAllReadersReject(WriteBytes("cut.npy", full.substr(0, 40)),
                         {"truncated header", "118", "30 bytes follow"});
  // A version 2.0 length of 4 GiB - 1 must not be trusted either.
  ExpectAllReadersReject(WriteBytes("huge.npy", Preamble(2, 0, 0xffffffffu) + "{}"),
                         {"truncated header", "4294967295"});
}

TEST_F(NpyTest, HeaderNotADict) {
  const std::vector<std::string> headers = {"", "   \n", "['descr', '<f8']", "descr: <f8",
                                            "dict(descr='<f8')"};
  for (const auto& h : headers)
    ExpectAllReadersReject(WriteBytes("h.npy", NpyFile(h, "")),
                           {"not a Python dict literal", "expected '{'"});
}

TEST_F(NpyTest, MissingKeys) {
  const std::string data = F8Bytes(Grid34());
  ExpectAllReadersReject(
      WriteBytes("a.npy", NpyFile("{'descr': '<f8', 'fortran_order': False}", data)),
      {"missing key", "'shape'"});
  ExpectAllReadersReject(WriteBytes("b.npy", NpyFile("{'shape': (3, 4)}", data)),
                         {"missing key", "'descr', 'fortran_order'"});
  ExpectAllReadersReject(WriteBytes("c.npy", NpyFile("{}", data)),
                         {"missing key", "'descr', 'fortran_order', 'shape'"});
}

TEST_F(NpyTest, UnknownKey) {
  const std::string path = WriteBytes(
      "k.npy", NpyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), 'order': 'C'}",
                       F8Bytes(Grid34())));
  ExpectAllReadersReject(path, {"unknown key 'order'", "expected only"});
}

TEST_F(NpyTest, DuplicateKey) {
  const std::string path = WriteBytes(
      "d.npy", NpyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), 'descr': '<f4'}",
                       F8Bytes(Grid34())));
  ExpectAllReadersReject(path, {"duplicate key 'descr'"});
}

TEST_F(NpyTest, BadHeaderSyntax) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{'descr' '<f8', 'fortran_order': False, 'shape': (3, 4)}", "expected ':'"},
      {"{'descr': '<f8, 'fortran_order': False, 'shape': (3, 4)}", "expected ',' or '}'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4)", "expected ',' or '}'"},
      {"{'descr': '<f8' 'fortran_order': False, 'shape': (3, 4)}", "expected ',' or '}'"},
      {"{'descr': '<f8', 'fortran_order': 'False', 'shape': (3, 4)}", "True or False"},
      {"{'descr': '<f8', 'fortran_order': 0, 'shape': (3, 4)}", "True or False"},
      {"{'descr': '<f8', 'fortran_order': Falsey, 'shape': (3, 4)}", "True or False"},
      {"{'descr': <f8, 'fortran_order': False, 'shape': (3, 4)}", "quoted dtype string"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': [3, 4]}", "a tuple"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4.5)}", "',' or ')'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (3 4)}", "',' or ')'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 'a')}", "integer extent"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (12)}", "',' after the only"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (03, 4)}", "leading zeros"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4)} x", "only padding"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4)}}", "only padding"},
      {"{descr: '<f8', 'fortran_order': False, 'shape': (3, 4)}", "a quoted key"},
      {"{'des\\cr': '<f8', 'fortran_order': False, 'shape': (3, 4)}", "without escapes"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), 'x", "terminated string"},
  };
  for (const auto& [header, phrase] : cases) {
    SCOPED_TRACE(header);
    ExpectAllReadersReject(WriteBytes("s.npy", NpyFile(header, F8Bytes(Grid34()))),
                           {"bad header syntax", phrase});
  }
}

TEST_F(NpyTest, UnsupportedDtype) {
  // Data sized for the declared shape at 8 bytes per element; the dtype check comes first.
  const std::string data = F8Bytes(Grid34());
  for (const char* descr :
       {"<i4", "<i8", "<c16", "|O", "<f2", "<f16", "f8", "<d", "|f8", "!f8", "<U8", ""}) {
    SCOPED_TRACE(descr);
    ExpectAllReadersReject(WriteBytes("t.npy", NpyFile(Dict(descr, "(3, 4)"), data)),
                           {"unsupported dtype '" + std::string(descr) + "'", "'<f8'"});
  }
  ExpectAllReadersReject(
      WriteBytes(
          "rec.npy",
          NpyFile("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (3, 4)}", data)),
      {"unsupported dtype", "structured"});
  ExpectAllReadersReject(WriteBytes("pipe.npy", NpyFile(Dict("|f8", "(3, 4)"), data)),
                         {"ambiguous"});
}

TEST_F(NpyTest, WrongNumberOfDimensions) {
  const std::string two = WriteBytes("two.npy", NpyFile(Dict("<f8", "(3, 4)"), F8Bytes(Grid34())));
  EXPECT_TRUE(ThrowsIoError(
      [&] { read_npy_stack<double>(two); }, two,
      {"expected a 3-D array of shape (count, rows, cols)", "found a 2-D array of shape (3, 4)"}));
  EXPECT_TRUE(ThrowsIoError([&] { read_npy_stack<float>(two); }, two, {"found a 2-D array"}));

  std::vector<double> d(24, 1.0);
  const std::string three = WriteBytes("three.npy", NpyFile(Dict("<f8", "(2, 3, 4)"), F8Bytes(d)));
  EXPECT_TRUE(ThrowsIoError(
      [&] { read_npy_matrix<double>(three); }, three,
      {"expected a 2-D array of shape (rows, cols)", "found a 3-D array of shape (2, 3, 4)"}));

  const std::string one =
      WriteBytes("one.npy", NpyFile(Dict("<f8", "(4,)"), F8Bytes({1, 2, 3, 4})));
  EXPECT_TRUE(ThrowsIoError([&] { read_npy_matrix<float>(one); }, one,
                            {"expected a 2-D array", "found a 1-D array of shape (4,)"}));
  EXPECT_TRUE(ThrowsIoError([&] { read_npy_stack<double>(one); }, one, {"found a 1-D array"}));

  const std::string zero = WriteBytes("zero.npy", NpyFile(Dict("<f8", "()"), F8Bytes({7})));
  EXPECT_TRUE(ThrowsIoError([&] { read_npy_matrix<double>(zero); }, zero,
                            {"found a 0-D array of shape ()"}));

  const std::string four = WriteBytes("four.npy", NpyFile(Dict("<f8", "(1, 2, 3, 4)"), F8Bytes(d)));
  EXPECT_TRUE(ThrowsIoError([&] { read_npy_stack<double>(four); }, four,
                            {"found a 4-D array of shape (1, 2, 3, 4)"}));
}

TEST_F(NpyTest, NegativeShape) {
  ExpectAllReadersReject(WriteBytes("n.npy", NpyFile(Dict("<f8", "(3, -4)"), "")),
                         {"negative extent", "(3, -4)"});
  ExpectAllReadersReject(WriteBytes("m.npy", NpyFile(Dict("<f8", "(-1, 0, 2)"), "")),
                         {"negative extent", "(-1, 0, 2)"});
}

TEST_F(NpyTest, AbsurdShapeIsRejectedBeforeAllocating) {
  const std::string data = F8Bytes({1, 2});
  // An extent that does not fit in int64 at all.
  ExpectAllReadersReject(
      WriteBytes("a.npy", NpyFile(Dict("<f8", "(99999999999999999999, 1)"), data)),
      {"absurd shape", "99999999999999999999", "64-bit"});
  // Extents that fit, but whose byte count overflows int64 (2^32 * 2^32 * 8).
  ExpectAllReadersReject(
      WriteBytes("b.npy", NpyFile(Dict("<f8", "(4294967296, 4294967296)"), data)),
      {"absurd shape", "overflows int64"});
  // Even with a zero extent: 2^61 * 8 bytes overflows.
  ExpectAllReadersReject(
      WriteBytes("c.npy", NpyFile(Dict("<f8", "(0, 2305843009213693952)"), data)),
      {"absurd shape", "overflows int64"});
  // Representable but far beyond the file: 8e18 bytes. Allocating it would throw bad_alloc
  // (not IoError), so passing this proves that the size is checked first.
  ExpectAllReadersReject(
      WriteBytes("d.npy", NpyFile(Dict("<f8", "(1000000000, 1000000000)"), data)),
      {"truncated data", "8000000000000000000 data bytes", "only 16 bytes"});
  ExpectAllReadersReject(
      WriteBytes("e.npy", NpyFile(Dict("<f4", "(1000, 1000000, 1000000)"), data)),
      {"truncated data", "4000000000000000 data bytes"});
}

// A tiny file declaring an empty array with enormous other extents (found by fuzzing: writing
// such an array back looped over 2^40 matrices) is rejected from its header, before anything
// is sized by those extents; empty arrays of plausible shape still read.
TEST_F(NpyTest, EmptyArrayWithEnormousExtentsIsRejected) {
  const auto started = std::chrono::steady_clock::now();
  testing::AllocationTracker tracker;
  ExpectAllReadersReject(WriteBytes("a.npy", NpyFile(Dict("<f8", "(0, 1099511627776)"), "")),
                         {"absurd shape", "(0, 1099511627776)", "empty", "at most 16777216"});
  ExpectAllReadersReject(WriteBytes("b.npy", NpyFile(Dict("<f4", "(1099511627776, 0, 5)"), "")),
                         {"absurd shape", "(1099511627776, 0, 5)", "multiply to 5497558138880"});
  ExpectAllReadersReject(WriteBytes("c.npy", NpyFile(Dict("<f4", "(1152921504606846976, 0)"), "")),
                         {"absurd shape", "empty"});
  // Byte counts that overflow are still reported as such.
  ExpectAllReadersReject(WriteBytes("d.npy", NpyFile(Dict("<f8", "(4611686018427387904, 0)"), "")),
                         {"absurd shape", "overflows int64"});
  // Every rejection above comes from the header alone: no allocation or loop of that size.
  EXPECT_LT(tracker.largest(), std::size_t{1} << 20);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 5.0);

  // At the bound, an empty array reads (and writes back without a row buffer of its width).
  const std::string edge = WriteBytes("e.npy", NpyFile(Dict("<f8", "(0, 16777216)"), ""));
  const Matrix<double> m = read_npy_matrix<double>(edge);
  EXPECT_EQ(m.rows(), 0);
  EXPECT_EQ(m.cols(), 16777216);
  const Stack<float> s =
      read_npy_stack<float>(WriteBytes("f.npy", NpyFile(Dict("<f4", "(4096, 0, 4096)"), "")));
  EXPECT_EQ(s.count(), 4096);
  EXPECT_EQ(s.cols(), 4096);
  ExpectAllReadersReject(WriteBytes("g.npy", NpyFile(Dict("<f8", "(0, 16777217)"), "")),
                         {"absurd shape", "at most 16777216"});
  // The writer needs no memory for an empty array, whatever its other extents.
  const testing::AllocationTracker write_tracker;
  write_npy(Path("w.npy"), Matrix<double>(0, index_t{1} << 40).view());
  EXPECT_LT(write_tracker.largest(), std::size_t{1} << 20);
  EXPECT_LE(ReadAll(Path("w.npy")).size(), 256u);
}

TEST_F(NpyTest, TruncatedData) {
  const std::string file = NpyFile(Dict("<f8", "(3, 4)"), F8Bytes(Grid34()));
  ExpectAllReadersReject(
      WriteBytes("t.npy", file.substr(0, file.size() - 1)),
      {"truncated data", "(3, 4) of float64 needs 96 data bytes", "only 95 bytes"});
  ExpectAllReadersReject(WriteBytes("h.npy", NpyFile(Dict("<f4", "(3, 4)"), "")),
                         {"truncated data", "of float32 needs 48", "only 0 bytes"});
}

TEST_F(NpyTest, TrailingGarbage) {
  const std::string file = NpyFile(Dict("<f8", "(3, 4)"), F8Bytes(Grid34()));
  ExpectAllReadersReject(WriteBytes("g.npy", file + "x"),
                         {"trailing garbage", "needs 96 data bytes", "97 bytes", "1 extra"});
  // A float64 file whose header claims float32 has twice the data it declares.
  ExpectAllReadersReject(WriteBytes("f.npy", NpyFile(Dict("<f4", "(3, 4)"), F8Bytes(Grid34()))),
                         {"trailing garbage", "48 extra"});
}

TEST_F(NpyTest, WriteFailuresNameThePath) {
  const Matrix<double> m = TestMatrix<double>(2, 2);
  const Stack<float> s = TestStack<float>(2, 2, 2);
  const std::string missing_dir = Path("no_such_dir/out.npy");
  EXPECT_TRUE(ThrowsIoError([&] { write_npy(missing_dir, m.view()); }, missing_dir,
                            {"cannot write", "does not exist"}));
  EXPECT_TRUE(
      ThrowsIoError([&] { write_npy(missing_dir, s.view()); }, missing_dir, {"cannot write"}));
  const std::string dir = Path("");
  EXPECT_TRUE(ThrowsIoError([&] { write_npy(dir, m.view()); }, dir, {"cannot write"}));
  EXPECT_FALSE(fs::exists(missing_dir));
}

// write_npy replaces its destination atomically (a temporary beside it, renamed into place): a
// symbolic link at the destination is replaced by the new file and its target left untouched,
// and a failed write leaves no temporary behind.
TEST_F(NpyTest, WriteReplacesTheDestinationAtomically) {
  const Matrix<double> m = TestMatrix<double>(3, 2);
  const std::string target = Path("target.txt"), link = Path("link.npy");
  { std::ofstream(target) << "keep me"; }
  fs::create_symlink(target, link);
  write_npy(link, m.view());
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_EQ(read_npy_matrix<double>(link).values(), m.values());
  std::ifstream in(target);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "keep me");
  // A directory in the way: an error naming it, and nothing left in the folder but what was there.
  const std::string dir = Path("subdir");
  fs::create_directory(dir);
  EXPECT_TRUE(ThrowsIoError([&] { write_npy(dir, m.view()); }, dir, {"is a directory"}));
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(Path(""))) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 3u);  // target.txt, link.npy, subdir
}

}  // namespace
}  // namespace dcalign

namespace dcalign {
namespace {

// A float64 value beyond float32's range, read as float32, is named with its value and place
// (it would otherwise become an infinity that a later check calls "non-finite"); an infinity or
// NaN in the file itself is left to that check.
TEST(NpyFloat32Range, AValueBeyondFloat32IsNamedWithItsValue) {
  const auto path = (std::filesystem::temp_directory_path() /
                     ("dcalign_npy_range_" + std::to_string(::getpid()) + ".npy"))
                        .string();
  Matrix<double> m(3, 2);
  m(2, 1) = -1e300;
  write_npy(path, m.view());
  try {
    (void)read_npy_matrix<float>(path);
    ADD_FAILURE() << "read as float32";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("the value -1.0000000000000001e+300 at row 2, column 1 is "
                                         "out of float32's range"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_npy_matrix<double>(path)(2, 1), -1e300);  // float64 reads it
  m(2, 1) = std::numeric_limits<double>::infinity();
  write_npy(path, m.view());
  EXPECT_TRUE(std::isinf(read_npy_matrix<float>(path)(2, 1)));
  Stack<double> s(2, 3, 2);
  s(1, 0, 1) = 5e38;
  write_npy(path, s.view());
  try {
    (void)read_npy_stack<float>(path);
    ADD_FAILURE() << "read as float32";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("matrix 1, row 0, column 1"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dcalign
