// Precision promotion for float32 ODC, OPP and GOPP.
//
// Why: float32 forms M_i = A_i^T Z with an absolute error of up to about a eps_f ||A_i|| ||Z||
// (a sum of a products per entry), so a sigma_min(M_i) / sigma_max(M_i) below roughly l eps_f
// (the rank tolerance) is lost in the product, and the polar factor of such an M_i is noise in
// its weakest direction. The float32 inputs themselves determine that ratio to far better: an
// H200 run refused users at 1.4e-6 and 3e-6 that float64 aligned. So a user whose
// float32 rank test fails is recomputed: M_i in float64 from the float32 A_i and Z, its polar
// factor in float64, G_i rounded back to float32. Only when the float64 test fails too is the
// user rank deficient. Written on the primitives, so every backend with float64 primitives
// does the same; the widening and the rounding back stay in backend memory (to_float64,
// from_float64): at l = 950 every user is promoted, and a round trip through the host cost
// two transfers of the whole stack each way.
#include "core/promote.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/common.hpp"

namespace dcalign::core {

Buffer<double> widen(Primitives<float>& p, StackView<const float> M,
                     const std::vector<index_t>& which) {
  Primitives<double>& q = *p.float64();
  const index_t n = static_cast<index_t>(which.size()), r = M.rows(), k = M.cols();
  const Buffer<float> packed = gather(p, M, which);  // n r x k matrices side by side
  Buffer<double> out = q.allocate(n * r * k);
  p.to_float64(MatrixView<const float>(packed.data(), r, n * k),
               MatrixView<double>(out.data(), r, n * k));
  return out;
}

void narrow(Primitives<float>& p, const double* src, StackView<float> out,
            const std::vector<index_t>& which) {
  const index_t r = out.rows(), k = out.cols(), per = r * k, n = static_cast<index_t>(which.size());
  for (index_t i = 0; i < n; ++i)
    p.from_float64(MatrixView<const double>(src + i * per, r, k), out[which[i]]);
}

namespace {

double tolerance64(const Context<float>& ctx) {
  return ctx.opts.rank_tolerance >= 0
             ? ctx.opts.rank_tolerance
             : static_cast<double>(ctx.dim()) * std::numeric_limits<double>::epsilon();
}

// G_i = polar(A_i^T Z) in float64 for the users `which`, written into ctx.G (and M_i, rounded,
// into the row blocks of `products` when given); returns their float64 sigma ratios. Users in
// chunks of at most 2^24 anchor values (128 MiB of float64).
std::vector<double> recompute(Context<float>& ctx, MatrixView<const float> Z,
                              const std::vector<index_t>& which, float* products) {
  auto& p = ctx.p;
  Primitives<double>& q = *p.float64();
  const index_t a = ctx.rows(), l = ctx.dim(), c = ctx.users();
  const Buffer<double> z64 =
      widen(p, StackView<const float>(Z.data(), 1, a, l, Z.ld(), Z.ld() * l), {0});
  PolarOptions po;
  po.method = ctx.opts.polar;
  po.fallback_ratio = tolerance64(ctx);  // doubtful users get exact float64 singular values
  po.measure_orthogonality = false;
  po.promote = false;
  const index_t chunk = std::max<index_t>(1, (index_t(1) << 24) / std::max<index_t>(1, a * l));
  std::vector<double> ratio;
  for (size_t first = 0; first < which.size(); first += static_cast<size_t>(chunk)) {
    const std::vector<index_t> part(
        which.begin() + static_cast<std::ptrdiff_t>(first),
        which.begin() + static_cast<std::ptrdiff_t>(
                            std::min(which.size(), first + static_cast<size_t>(chunk))));
    const index_t n = static_cast<index_t>(part.size());
    const Buffer<double> w64 = widen(p, ctx.A, part);  // [A_k1 ... A_kn], a x n l
    Buffer<double> m64 = q.allocate(n * l * l), g64 = q.allocate(n * l * l);
    q.gemm(Op::trans, Op::none, 1.0, MatrixView<const double>(w64.data(), a, n * l),
           MatrixView<const double>(z64.data(), a, l), 0.0,
           MatrixView<double>(m64.data(), n * l, l));
    const PolarInfo<double> info =
        polar_factor(q, StackView<const double>(m64.data(), n, l, l, n * l, l), false,
                     StackView<double>(g64.data(), n, l, l), po);
    for (index_t i = 0; i < n; ++i)
      ratio.push_back(info.sigma_max[i] > 0 ? info.sigma_min[i] / info.sigma_max[i] : 0.0);
    narrow(p, g64.data(), ctx.G, part);
    if (products) {
      // The row blocks M_i of the c l x l product matrix, for the evaluation's tr(G_i^T M_i).
      Buffer<double> blocks = q.allocate(n * l * l);
      q.unvstack(MatrixView<const double>(m64.data(), n * l, l),
                 StackView<double>(blocks.data(), n, l, l));
      narrow(p, blocks.data(), StackView<float>(products, c, l, l, c * l, l), part);
    }
  }
  return ratio;
}

}  // namespace

template <typename T>
std::vector<double> decide_ranks(Context<T>& ctx, const PolarInfo<T>& info,
                                 const std::function<MatrixView<const T>()>& target, T* products,
                                 const std::string& what, bool raise) {
  const index_t c = ctx.users();
  std::vector<double> ratio(static_cast<size_t>(c));
  for (index_t k = 0; k < c; ++k)
    ratio[k] = info.sigma_max[k] > 0
                   ? static_cast<double>(info.sigma_min[k]) / static_cast<double>(info.sigma_max[k])
                   : 0.0;
  std::vector<index_t> failing;
  for (index_t k = 0; k < c; ++k)
    if (!(ratio[k] > ctx.rank_tolerance)) failing.push_back(k);
  if constexpr (std::is_same_v<T, float>) {
    if (!failing.empty() && ctx.p.float64()) {
      const std::vector<double> wide = recompute(ctx, target(), failing, products);
      const double tol = tolerance64(ctx);
      if (ctx.promoted.size() != static_cast<size_t>(c)) ctx.promoted.assign(c, 0);
      for (size_t i = 0; i < failing.size(); ++i) {
        const index_t k = failing[i];
        ratio[k] = wide[i];
        ctx.promoted[k] = 1;
        if (raise && !(wide[i] > tol)) {
          std::ostringstream os;
          os << "user " << k << ": " << what
             << " is numerically rank deficient (sigma_min/sigma_max = " << wide[i]
             << " in float64 arithmetic from the float32 inputs, tolerance " << tol
             << "); every A_i must have full column rank l";
          throw InvalidInput(os.str());
        }
      }
      ctx.report.promoted_users =
          static_cast<index_t>(std::count(ctx.promoted.begin(), ctx.promoted.end(), 1));
      return ratio;
    }
  }
  if (raise) check_rank(ratio, ctx.rank_tolerance, what);
  return ratio;
}

template std::vector<double> decide_ranks<float>(Context<float>&, const PolarInfo<float>&,
                                                 const std::function<MatrixView<const float>()>&,
                                                 float*, const std::string&, bool);
template std::vector<double> decide_ranks<double>(Context<double>&, const PolarInfo<double>&,
                                                  const std::function<MatrixView<const double>()>&,
                                                  double*, const std::string&, bool);

}  // namespace dcalign::core
