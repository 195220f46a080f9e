// libFuzzer target: the IDX (MNIST) readers of the data layer (src/data/idx.cpp), plain or
// gzip-compressed. The input is the file. Each reader either returns data that agree with the
// header or throws dcalign::Error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "dcalign/data.hpp"
#include "dcalign/error.hpp"
#include "fuzz_util.hpp"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_idx: invariant violated: %s\n", what);
    std::abort();
  }
}

template <typename F>
void guarded(F f) {
  try {
    f();
  } catch (const dcalign::Error&) {
    // Malformed input is reported as a dcalign::Error (IoError naming the file).
  } catch (const std::exception& e) {
    dcalign::fuzz::unexpected("fuzz_idx", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dcalign::data;
  static dcalign::fuzz::ScratchFile file("idx", ".gz");
  const std::string& path = file.write(data, size);
  guarded([&] {
    const std::vector<dcalign::index_t> dims = read_idx_dims(path);
    check(dims.size() == 1 || dims.size() == 3, "read_idx_dims: neither 1 nor 3 dimensions");
    for (const auto d : dims) check(d >= 0, "read_idx_dims: negative dimension");
  });
  guarded([&] {
    const IdxImages img = read_idx_images(path);
    check(img.count >= 0 && img.rows > 0 && img.cols > 0, "read_idx_images: bad dimensions");
    check(static_cast<dcalign::index_t>(img.pixels.size()) == img.count * img.rows * img.cols,
          "read_idx_images: pixel count != count x rows x cols");
  });
  guarded([&] {
    const std::vector<std::uint8_t> labels = read_idx_labels(path);
    check(static_cast<dcalign::index_t>(labels.size()) == read_idx_dims(path).at(0),
          "read_idx_labels: label count != declared count");
  });
  return 0;
}
