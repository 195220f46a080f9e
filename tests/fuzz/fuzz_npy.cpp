// libFuzzer target: the NumPy .npy reader (src/io/npy.cpp). The input is the file. Every
// reader either returns an array that agrees with the header or throws dcalign::Error; an array
// that was read is written back and must read back bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "dcalign/error.hpp"
#include "dcalign/npy.hpp"
#include "fuzz_util.hpp"

namespace {

using dcalign::index_t;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_npy: invariant violated: %s\n", what);
    std::abort();
  }
}

template <typename T>
bool same_bits(const T* a, const T* b, index_t n) {
  return n == 0 || std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(T)) == 0;
}

template <typename T>
void read_all_ways(const std::string& path, const std::string& copy) {
  const dcalign::NpyHeader h = dcalign::read_npy_header(path);
  if (h.shape.size() == 2) {
    const dcalign::Matrix<T> m = dcalign::read_npy_matrix<T>(path);
    check(m.rows() == h.shape[0] && m.cols() == h.shape[1], "matrix shape != header shape");
    dcalign::write_npy(copy, m.view());
    const dcalign::Matrix<T> back = dcalign::read_npy_matrix<T>(copy);
    check(back.rows() == m.rows() && back.cols() == m.cols() &&
              same_bits(back.data(), m.data(), m.size()),
          "matrix round trip changed the data");
  } else if (h.shape.size() == 3) {
    const dcalign::Stack<T> s = dcalign::read_npy_stack<T>(path);
    check(s.count() == h.shape[0] && s.rows() == h.shape[1] && s.cols() == h.shape[2],
          "stack shape != header shape");
    dcalign::write_npy(copy, s.view());
    const dcalign::Stack<T> back = dcalign::read_npy_stack<T>(copy);
    check(back.count() == s.count() && back.rows() == s.rows() && back.cols() == s.cols() &&
              same_bits(back.data(), s.data(), s.size()),
          "stack round trip changed the data");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static dcalign::fuzz::ScratchFile file("npy", ".npy"), copy("npy-copy", ".npy");
  const std::string& path = file.write(data, size);
  for (int as_float = 0; as_float < 2; ++as_float) {
    try {
      if (as_float)
        read_all_ways<float>(path, copy.path());
      else
        read_all_ways<double>(path, copy.path());
    } catch (const dcalign::Error&) {
      // The contract: malformed input is reported as a dcalign::Error (IoError).
    } catch (const std::exception& e) {
      dcalign::fuzz::unexpected("fuzz_npy", e.what());
    }
  }
  // The wrong-dimension readers must reject (or read) as well, never misbehave.
  try {
    (void)dcalign::read_npy_matrix<double>(path);
  } catch (const dcalign::Error&) {
  } catch (const std::exception& e) {
    dcalign::fuzz::unexpected("fuzz_npy", e.what());
  }
  try {
    (void)dcalign::read_npy_stack<float>(path);
  } catch (const dcalign::Error&) {
  } catch (const std::exception& e) {
    dcalign::fuzz::unexpected("fuzz_npy", e.what());
  }
  return 0;
}
