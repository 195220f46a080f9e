// libFuzzer target: the model directory reader (Aligner::load, src/core/aligner.cpp). The input
// is a model directory: its first two bytes give the length n of model.json (modulo the rest),
// the next n bytes are model.json and the remainder is target.npy. Every load either returns a
// model that saves and loads back unchanged or throws dcalign::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "dcalign/aligner.hpp"
#include "dcalign/error.hpp"
#include "fuzz_util.hpp"

namespace {

namespace fs = std::filesystem;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_model: invariant violated: %s\n", what);
    std::abort();
  }
}

fs::path scratch(const char* stem) {
  return fs::temp_directory_path() /
         ("dcalign-fuzz-model-" + std::to_string(::getpid()) + "-" + stem);
}

template <typename T>
void load_and_round_trip(const fs::path& dir, const fs::path& copy) {
  const dcalign::Aligner<T> a = dcalign::Aligner<T>::load(dir.string());
  check(a.fitted(), "a loaded model is not fitted");
  std::error_code ec;
  fs::remove_all(copy, ec);
  a.save(copy.string());
  const dcalign::Aligner<T> b = dcalign::Aligner<T>::load(copy.string());
  check(b.method() == a.method() && b.users() == a.users() && b.anchor_rows() == a.anchor_rows() &&
            b.dim() == a.dim() && b.rank_tolerance() == a.rank_tolerance(),
        "save + load changed the model's metadata");
  check(std::memcmp(a.target().data(), b.target().data(),
                    static_cast<std::size_t>(a.target().size()) * sizeof(T)) == 0,
        "save + load changed the target");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path dir = scratch("in"), copy = scratch("copy");
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  const std::size_t rest = size >= 2 ? size - 2 : 0;
  const std::size_t n = size >= 2 ? (std::size_t(data[0]) << 8 | data[1]) % (rest + 1) : 0;
  dcalign::fuzz::ScratchFile::write_file((dir / "model.json").string(),
                                         data + (size >= 2 ? 2 : size), n);
  dcalign::fuzz::ScratchFile::write_file((dir / "target.npy").string(),
                                         data + (size >= 2 ? 2 : size) + n, rest - n);
  // Both precisions: a model saved in the other one is an error naming it.
  for (int precision = 0; precision < 2; ++precision) {
    try {
      if (precision == 0)
        load_and_round_trip<double>(dir, copy);
      else
        load_and_round_trip<float>(dir, copy);
    } catch (const dcalign::Error&) {
      // A refused model: the expected outcome for most inputs.
    }
  }
  return 0;
}
