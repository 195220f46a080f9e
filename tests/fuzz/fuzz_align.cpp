// libFuzzer target: dcalign::align on the CPU backend with small decoded inputs. Layout:
//   byte 0: method (bits 0-2: odc, imakura, kawakami, gopp, opp, rdp-ls, rdp-opp, odc),
//           float32 (bit 3), polar path (bits 4-5: auto, svd, iterative, auto), Kawakami form
//           (bit 6), randomized SVD (bit 7)
//   bytes 1-3: users c, anchor rows a, dimension l, each 1..8
//   byte 4: ODC rotation (bits 0-1: haar, identity, supplied, haar), explicit ODC target
//           (bit 2), Imakura right factor (bits 3-4: identity, uniform, supplied, identity),
//           evaluate (bit 5, inverted), evaluate_consensus (bit 6), a custom rank tolerance
//           (bit 7)
//   byte 5: reference user (0..c, so that an invalid one occurs); byte 6: seed
//   byte 7: GOPP iteration cap 1..16 (bits 0-3), GOPP's ODC start (bit 4), RDP iteration cap
//           1..8 (bits 5-7)
//   then one byte per matrix entry (rank tolerance, anchors, then O, Z, R when supplied):
//   0..239 give (b - 120) / 8; 240..248 give NaN, +-inf, +-1e300, 1e-300, 1e150, the smallest
//   subnormal and 0; 249..255 take the next 8 bytes as a raw double. Missing bytes read as 0.
// Contract checked: align returns G with c x l x l finite entries (orthogonal for ODC, GOPP and
// OPP, whose G_i are polar factors) and a report that matches, or throws a dcalign::Error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <type_traits>

#include "dcalign/align.hpp"
#include "dcalign/error.hpp"
#include "fuzz_util.hpp"

namespace {

using dcalign::index_t;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_align: contract violated: %s\n", what);
  std::abort();
}

double value(dcalign::fuzz::Cursor& in) {
  const std::uint8_t b = in.byte();
  if (b < 240) return (static_cast<int>(b) - 120) / 8.0;
  switch (b) {
    case 240:
      return std::nan("");
    case 241:
      return INFINITY;
    case 242:
      return -INFINITY;
    case 243:
      return 1e300;
    case 244:
      return -1e300;
    case 245:
      return 1e-300;
    case 246:
      return 1e150;
    case 247:
      return 4.9406564584124654e-324;
    case 248:
      return 0.0;
    default: {
      double d = 0;
      std::uint64_t bits = in.u64();
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
  }
}

template <typename T>
dcalign::Matrix<T> matrix(dcalign::fuzz::Cursor& in, index_t rows, index_t cols) {
  dcalign::Matrix<T> m(rows, cols);
  for (index_t j = 0; j < cols; ++j)
    for (index_t i = 0; i < rows; ++i) m(i, j) = static_cast<T>(value(in));
  return m;
}

template <typename T>
void run(dcalign::fuzz::Cursor& in, dcalign::AlignOptions& opts, index_t c, index_t a, index_t l,
         bool supplied_o, bool target, bool supplied_r) {
  dcalign::Stack<T> anchors(c, a, l);
  for (index_t k = 0; k < c; ++k)
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < a; ++i) anchors(k, i, j) = static_cast<T>(value(in));
  // The options hold double matrices whatever the precision of the anchors.
  if (supplied_o) opts.rotation_matrix = matrix<double>(in, l, l);
  if (target) opts.target = matrix<double>(in, a, l);
  if (supplied_r) opts.right_matrix = matrix<double>(in, l, l);

  const dcalign::Alignment<T> out = dcalign::align(anchors, opts);
  if (out.G.count() != c || out.G.rows() != l || out.G.cols() != l) finding("G has a wrong shape");
  for (index_t k = 0; k < out.G.size(); ++k)
    if (!std::isfinite(out.G.data()[k])) finding("G has a non-finite entry");
  const bool orthogonal = opts.method == dcalign::Method::odc ||
                          opts.method == dcalign::Method::gopp ||
                          opts.method == dcalign::Method::opp;
  if (orthogonal) {
    // ||G_i^T G_i - I||_F, computed here in double; a polar factor is orthogonal to working
    // precision whatever the conditioning of A_i^T Z (rank-deficient inputs are errors).
    const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
    for (index_t k = 0; k < c; ++k) {
      double err = 0;
      for (index_t i = 0; i < l; ++i)
        for (index_t j = 0; j < l; ++j) {
          double s = 0;
          for (index_t r = 0; r < l; ++r)
            s += static_cast<double>(out.G(k, r, i)) * static_cast<double>(out.G(k, r, j));
          s -= i == j ? 1.0 : 0.0;
          err += s * s;
        }
      if (!(std::sqrt(err) <= tol * static_cast<double>(l))) finding("G_i is not orthogonal");
    }
  }
  if (out.report.users != c || out.report.anchor_rows != a || out.report.dim != l)
    finding("report shape differs from the input");
  // Only where G is orthogonal: Imakura's and Kawakami's G_i may be finite while G_i^T G_i is
  // not (anchors of 1e-284 give G_i of 1e284), and then the reported error is rightly inf.
  if (orthogonal && out.report.evaluated && !std::isfinite(out.report.orthogonality_error))
    finding("report has a non-finite orthogonality error for orthogonal G");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dcalign::fuzz::Cursor in(data, size);
  const std::uint8_t b0 = in.byte();
  const index_t c = 1 + in.below(8), a = 1 + in.below(8), l = 1 + in.below(8);
  const std::uint8_t b4 = in.byte();
  dcalign::AlignOptions opts;
  static const dcalign::Method methods[] = {dcalign::Method::odc,      dcalign::Method::imakura,
                                            dcalign::Method::kawakami, dcalign::Method::gopp,
                                            dcalign::Method::opp,      dcalign::Method::rdp_ls,
                                            dcalign::Method::rdp_opp,  dcalign::Method::odc};
  opts.method = methods[b0 & 7];
  const bool single = (b0 >> 3) & 1;
  static const dcalign::PolarMethod polars[] = {
      dcalign::PolarMethod::automatic, dcalign::PolarMethod::svd, dcalign::PolarMethod::iterative,
      dcalign::PolarMethod::automatic};
  opts.polar = polars[(b0 >> 4) & 3];
  opts.kawakami_form = (b0 >> 6) & 1 ? dcalign::KawakamiForm::eigen : dcalign::KawakamiForm::qr_svd;
  if ((b0 >> 7) & 1) opts.svd.algorithm = dcalign::SvdAlgorithm::randomized;

  static const dcalign::TargetRotation rotations[] = {
      dcalign::TargetRotation::haar, dcalign::TargetRotation::identity,
      dcalign::TargetRotation::supplied, dcalign::TargetRotation::haar};
  opts.rotation = rotations[b4 & 3];
  const bool target = (b4 >> 2) & 1;
  static const dcalign::RightFactor rights[] = {
      dcalign::RightFactor::identity, dcalign::RightFactor::uniform, dcalign::RightFactor::supplied,
      dcalign::RightFactor::identity};
  opts.right = rights[(b4 >> 3) & 3];
  opts.evaluate = !((b4 >> 5) & 1);
  opts.evaluate_consensus = (b4 >> 6) & 1;
  const bool custom_tolerance = (b4 >> 7) & 1;
  opts.reference_user = in.below(static_cast<unsigned>(c) + 1);
  opts.seed = in.byte();
  const std::uint8_t b7 = in.byte();
  // A cap of 0 is drawn too: align must refuse it (InvalidInput), not return an all-zero G.
  opts.gopp.max_iterations = b7 & 15;
  opts.gopp.init = (b7 >> 4) & 1 ? dcalign::GoppInit::odc : dcalign::GoppInit::spectral;
  opts.rdp.max_iterations = 1 + (b7 >> 5);
  if (custom_tolerance) opts.rank_tolerance = value(in);

  try {
    const bool supplied_o = opts.rotation == dcalign::TargetRotation::supplied;
    const bool supplied_r = opts.right == dcalign::RightFactor::supplied;
    if (single)
      run<float>(in, opts, c, a, l, supplied_o, target, supplied_r);
    else
      run<double>(in, opts, c, a, l, supplied_o, target, supplied_r);
  } catch (const dcalign::Error&) {
    // Bad shapes, NaN/Inf, rank deficiency, non-convergence: all reported as dcalign::Error.
  } catch (const std::exception& e) {
    dcalign::fuzz::unexpected("fuzz_align", e.what());
  }
  return 0;
}
