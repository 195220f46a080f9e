// IDX reader (the MNIST file format): a big-endian header of magic number and dimensions,
// then unsigned bytes. See http://yann.lecun.com/exdb/mnist/ for the layout.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "dcalign/checked.hpp"
#include "dcalign/data.hpp"
#include "file_io.hpp"

namespace dcalign::data {

namespace {

constexpr std::uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
// Plausibility bounds on what an image header may declare (MNIST: 28 x 28, 60000 images).
constexpr index_t kMaxImagePixels = index_t{1} << 24;
constexpr index_t kMaxTotalPixels = index_t{1} << 40;

std::uint32_t read_be32(detail::GzReader& in, const std::string& what) {
  unsigned char b[4];
  in.read_exact(b, 4, what);
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         std::uint32_t{b[3]};
}

std::vector<index_t> read_header(detail::GzReader& in, std::uint32_t expected_magic) {
  const std::uint32_t magic = read_be32(in, "IDX magic number");
  if (expected_magic != 0 && magic != expected_magic)
    throw IoError("'" + in.path() + "': bad IDX magic number " + std::to_string(magic) +
                  ", expected " + std::to_string(expected_magic) +
                  (expected_magic == kImagesMagic ? " (images)" : " (labels)"));
  if (magic != kImagesMagic && magic != kLabelsMagic)
    throw IoError("'" + in.path() + "': bad IDX magic number " + std::to_string(magic) +
                  ", expected 2051 (images) or 2049 (labels)");
  const int ndims = magic == kImagesMagic ? 3 : 1;
  std::vector<index_t> dims;
  for (int d = 0; d < ndims; ++d)
    dims.push_back(static_cast<index_t>(read_be32(in, "IDX dimension " + std::to_string(d))));
  return dims;
}

// Reads n bytes without trusting n for the allocation: a corrupt header may declare terabytes,
// so the buffer grows only as data actually arrive, from 64 KiB and doubling (at most twice
// what the file holds, however much it declares).
std::vector<std::uint8_t> read_payload(detail::GzReader& in, index_t n, const std::string& what) {
  std::vector<std::uint8_t> out;
  const auto total = static_cast<std::size_t>(n);
  std::size_t done = 0;
  while (done < total) {
    const std::size_t next = std::min(total, std::max<std::size_t>(2 * done, 1 << 16));
    out.resize(next);
    done += in.read(out.data() + done, next - done);
    if (done < next)
      throw IoError("'" + in.path() + "': file ends early: expected " + std::to_string(total) +
                    " bytes of " + what + ", found " + std::to_string(done));
  }
  return out;
}

}  // namespace

std::vector<index_t> read_idx_dims(const std::string& path) {
  detail::GzReader in(path);
  return read_header(in, 0);
}

IdxImages read_idx_images(const std::string& path) {
  detail::GzReader in(path);
  const auto dims = read_header(in, kImagesMagic);
  IdxImages img;
  img.count = dims[0];
  img.rows = dims[1];
  img.cols = dims[2];
  if (img.rows == 0 || img.cols == 0)
    throw IoError("'" + path + "': image size " + std::to_string(img.rows) + " x " +
                  std::to_string(img.cols) + " declared, expected non-empty images");
  const std::string what = "pixel data (" + std::to_string(img.count) + " images of " +
                           std::to_string(img.rows) + " x " + std::to_string(img.cols) +
                           " declared in the header)";
  // Everything the header declares is validated before anything is sized by it: an image of at
  // most 2^24 pixels (4096 x 4096) and at most 2^40 pixels in all, also when no image follows
  // (0 images of 2^20 x 2^20 would otherwise pass to callers that size per-pixel structures).
  // The products are checked: each dimension is below 2^32, so they could overflow 64 bits.
  index_t pixels = 0, total = 0;
  try {
    pixels = checked_mul(img.rows, img.cols, "pixels per image");
    total = checked_mul(img.count, pixels, "pixels in all");
  } catch (const InvalidInput& e) {
    throw IoError("'" + path + "': implausible size declared: " + what + ": " + e.what());
  }
  if (pixels > kMaxImagePixels || total > kMaxTotalPixels)
    throw IoError("'" + path + "': implausible size declared: " + what + "; expected at most " +
                  std::to_string(kMaxImagePixels) + " pixels per image and " +
                  std::to_string(kMaxTotalPixels) + " in all");
  img.pixels = read_payload(in, total, what);
  in.expect_end(std::to_string(img.count) + " images");
  return img;
}

std::vector<std::uint8_t> read_idx_labels(const std::string& path) {
  detail::GzReader in(path);
  const auto dims = read_header(in, kLabelsMagic);
  auto labels =
      read_payload(in, dims[0], "labels (" + std::to_string(dims[0]) + " declared in the header)");
  in.expect_end(std::to_string(dims[0]) + " labels");
  return labels;
}

}  // namespace dcalign::data
