// The batched polar factor (include/dcalign/polar.hpp), written once on Primitives<T>. The host
// never loops over the matrices: every step is one batched primitive, and the per-matrix
// decisions are the functions of base/polar_scalar.hpp, which the backends call.
#include "dcalign/polar.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>

#include "base/polar_scalar.hpp"
#include "core/common.hpp"
#include "core/promote.hpp"

namespace dcalign {

PolarMethod choose_polar_method(Device device, index_t l, index_t count, bool single_precision) {
  (void)count;
  // GPU: no batched SVD above 32 x 32, and the iteration is all batched GEMM/LU work.
  if (device == Device::cuda) return PolarMethod::iterative;
  // CPU (bench/results/polar, Byers-Xu scaling with the Newton-Schulz hand-over, the own
  // Gauss-Jordan inverses in AVX-512): the iteration is 1.3-5.9x faster than
  // one gesdd per matrix at l = 16, 50, 64 and 96 in both precisions, except at l = 96 in double
  // with kappa = 1e12, where the two tie (1.01; with an earlier AVX2 inverse the l = 96
  // double cells were within 12% either way); gesdd wins from l = 128 (1.07-1.43x) unless the
  // matrices are well conditioned.
  (void)single_precision;
  const index_t largest = 96;
  return l >= 3 && l <= largest ? PolarMethod::iterative : PolarMethod::svd;
}

namespace {

// Throws NumericalError naming the first matrix whose polar::start flagged a NaN or Inf.
template <typename T>
void check_finite_state(const std::vector<T>& state, index_t c) {
  for (index_t k = 0; k < c; ++k) {
    const T* st = state.data() + k * polar::kStateSize;
    if ((polar::flags(st) & polar::kNonFinite) && !std::isfinite(st[polar::kAlpha])) {
      std::ostringstream os;
      os << "polar_factor: matrix " << k << " contains NaN or Inf";
      throw NumericalError(os.str());
    }
  }
}

// The per-matrix states on the host, after checking that no input matrix held a NaN or Inf.
template <typename T>
std::vector<T> read_state(Primitives<T>& p, const Buffer<T>& sb, index_t c) {
  std::vector<T> state(static_cast<size_t>(c * polar::kStateSize));
  p.to_host(sb.data(), state.data(), c * polar::kStateSize);
  check_finite_state(state, c);
  return state;
}

// max_k ||G_k^T G_k - I||_F into info, when asked for.
template <typename T>
void measure(Primitives<T>& p, StackView<T> G, PolarInfo<T>& info, const PolarOptions& opts) {
  if (!opts.measure_orthogonality) return;
  const auto e = p.orthogonality_errors(StackView<const T>(G));
  info.orthogonality_error = *std::max_element(e.begin(), e.end());
}

// `steps` Newton-Schulz steps X <- X (3I - X^T X) / 2 ending in G, from X (overwritten; Y is
// workspace). Each is taken as X + X D with the small D = (I - X^T X) / 2: the correction then
// costs no rounding of its own beyond u per entry, which keeps float within 1e-5 of
// orthogonality up to l = 1000.
template <typename T>
void newton_schulz(Primitives<T>& p, StackView<T> X, StackView<T> Y, StackView<T> G, int steps) {
  const index_t n = X.count() * X.rows() * X.cols();
  p.copy(X.data(), G.data(), n);  // G = X before every step (the copy below keeps it so)
  for (int step = 0; step < steps; ++step) {
    p.gemm_batched(Op::trans, Op::none, T(-0.5), StackView<const T>(X), StackView<const T>(X), T(0),
                   Y);
    p.add_identity_batched(T(0.5), Y);
    p.gemm_batched(Op::none, Op::none, T(1), StackView<const T>(X), StackView<const T>(Y), T(1), G);
    if (step + 1 < steps) p.copy(G.data(), X.data(), n);
  }
}

// G_k from one SVD per matrix; the caller measures the orthogonality (after any promotion).
template <typename T>
PolarInfo<T> svd_path(Primitives<T>& p, StackView<const T> M, bool transposed, StackView<T> G) {
  PolarInfo<T> info = p.polar_batched(M, transposed, G);
  info.used_svd = true;
  if constexpr (std::is_same_v<T, float>) {
    // U V^T is orthogonal only as far as the SVD's U and V are: 4.6e-6 (l = 50) to 1.6e-5
    // (l = 128) with LAPACK's sgesdd, 3.2e-5 at l = 31 with cuSOLVER's gesvdjBatched (an H200
    // run), against 1e-5 for the iterative path. One Newton-Schulz step maps an error e
    // to 1.5 e^2 plus rounding, two batched products against the SVD's ~20 l^3 flops; the
    // factor moves by O(e), inside the forward error of any float32 polar factor. float64's
    // SVDs are orthogonal to 1e-14 and are left alone.
    const index_t c = G.count(), l = G.rows();
    if (c > 0 && l > 0) {
      Buffer<T> xb = p.allocate(c * l * l), yb = p.allocate(c * l * l);
      StackView<T> X(xb.data(), c, l, l), Y(yb.data(), c, l, l);
      p.copy(G.data(), X.data(), c * l * l);
      newton_schulz(p, X, Y, G, 1);
    }
  }
  return info;
}

// The ratio sigma_min / sigma_max at or below which a matrix's rank is doubtful in T.
template <typename T>
double rank_limit(const PolarOptions& opts, index_t l) {
  return opts.fallback_ratio >= 0 ? opts.fallback_ratio
                                  : static_cast<double>(l) * std::numeric_limits<T>::epsilon();
}

// Whether these are float32 primitives with float64 ones beside them.
template <typename T>
bool has_float64(Primitives<T>& p) {
  return std::is_same_v<T, float> && p.float64() != nullptr;
}

// Whether float32 matrices can be recomputed in float64 (PolarOptions::promote).
template <typename T>
bool can_promote(Primitives<T>& p, const PolarOptions& opts) {
  return opts.promote && has_float64(p);
}

// The float32 matrices `which` recomputed in float64 from their float32 entries, their G_k and
// singular-value bounds written over the float32 ones. float32 arithmetic resolves sigma ratios
// only to about l eps_f, while the entries determine them to about kappa eps_f relative; the
// float64 factor rounded to float32 is then the accurate answer.
template <typename T>
void promote_listed(Primitives<T>& p, StackView<const T> M, bool transposed, StackView<T> G,
                    const std::vector<index_t>& which, PolarInfo<T>& info,
                    const PolarOptions& opts) {
  if constexpr (std::is_same_v<T, float>) {
    if (which.empty() || !can_promote(p, opts)) return;
    Primitives<double>& q = *p.float64();
    const index_t n = static_cast<index_t>(which.size()), l = M.rows();
    const Buffer<double> m64 = core::widen(p, M, which);
    Buffer<double> g64 = q.allocate(n * l * l);
    PolarOptions o = opts;
    o.fallback_ratio = rank_limit<double>(opts, l);
    o.measure_orthogonality = false;
    o.promote = false;
    const PolarInfo<double> wide =
        polar_factor(q, StackView<const double>(m64.data(), n, l, l), transposed,
                     StackView<double>(g64.data(), n, l, l), o);
    core::narrow(p, g64.data(), G, which);
    for (index_t i = 0; i < n; ++i) {
      info.sigma_min[which[i]] = static_cast<T>(wide.sigma_min[i]);
      info.sigma_max[which[i]] = static_cast<T>(wide.sigma_max[i]);
    }
    info.promoted = static_cast<int>(n);
    // The float64 run's SVDs count as the batch's; with every matrix promoted, its sigma values
    // are exact when float64's are.
    info.used_svd = info.used_svd || wide.used_svd;
    info.svd_matrices += wide.svd_matrices;
    if (n == M.count()) info.estimated = wide.estimated;
  } else {
    (void)p, (void)M, (void)transposed, (void)G, (void)which, (void)info, (void)opts;
  }
}

// float32 matrices whose exact sigma_min / sigma_max (in info) is at or below `limit`, promoted.
template <typename T>
void promote_doubtful(Primitives<T>& p, StackView<const T> M, bool transposed, StackView<T> G,
                      double limit, PolarInfo<T>& info, const PolarOptions& opts) {
  if (!can_promote(p, opts)) return;
  std::vector<index_t> which;
  for (index_t k = 0; k < M.count(); ++k) {
    const double hi = info.sigma_max[k], lo = info.sigma_min[k];
    if (!(hi > 0 && lo / hi > limit)) which.push_back(k);
  }
  promote_listed(p, M, transposed, G, which, info, opts);
}

}  // namespace

template <typename T>
PolarInfo<T> polar_factor(Primitives<T>& p, StackView<const T> M, bool transposed, StackView<T> G,
                          const PolarOptions& opts) {
  const index_t c = M.count(), l = M.rows();
  if (M.rows() != M.cols()) throw InvalidInput("polar_factor: square matrices expected");
  if (G.count() != c || G.rows() != l || G.cols() != l || !G.contiguous())
    throw InvalidInput("polar_factor: G must be a contiguous stack of c matrices l x l");
  if (c == 0) return {};
  const PolarMethod method = opts.method == PolarMethod::automatic
                                 ? choose_polar_method(p.device(), l, c, std::is_same_v<T, float>)
                                 : opts.method;
  if (method == PolarMethod::svd) {
    // LAPACK's behaviour on NaN is unspecified: find it first with the iteration's own start
    // (an O(l^2) pass per matrix, any layout of M), G serving as the scratch X.
    Buffer<T> sb = p.allocate(c * polar::kStateSize);
    p.polar_start(M, transposed, G, sb.data(), 0.0);
    read_state(p, sb, c);
    PolarInfo<T> info = svd_path(p, M, transposed, G);
    info.svd_matrices = static_cast<int>(c);
    promote_doubtful(p, M, transposed, G, rank_limit<T>(opts, l), info, opts);
    measure(p, G, info, opts);
    return info;
  }

  // Stopping test on the relative step delta of an unscaled Newton step. delta is the RMS of
  // the singular values' distances e_j to 1, so max e_j <= sqrt(l) delta; the step leaves
  // e_j^2 / 2 and the Newton-Schulz polish maps e to 1.5 e^2. Both together reach the unit
  // roundoff u when sqrt(l) delta <= (2 sqrt(u / 1.5))^(1/2): one Newton step fewer than a
  // test at sqrt(u).
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double tolerance = std::sqrt(2.0 * std::sqrt(u / 1.5)) / std::sqrt(static_cast<double>(l));
  Buffer<T> xb = p.allocate(c * l * l), yb;
  Buffer<T> sb = p.allocate(c * polar::kStateSize);
  StackView<T> X(xb.data(), c, l, l);
  const double fallback = rank_limit<T>(opts, l);
  const bool promote = can_promote(p, opts);
  const bool defer = opts.defer_doubtful && has_float64(p);
  // With float64 beside, every matrix whose first condition estimate makes it doubtful (the test
  // below) is recomputed there, so its iteration stops at that estimate (polar::kDoubtful): at
  // a = 1000, l = 950 on an H200 (bench/results/gpu) every float32 M_i was doubtful and ran
  // all its Newton steps in vain.
  p.polar_start(M, transposed, X, sb.data(), promote || defer ? fallback : 0.0);
  // The Newton phase, and where the backend fuses it (the GPU's one kernel per batch for small
  // l), each matrix's polish into G with it; the states below are then the only read back, and
  // no workspace Y is needed.
  const bool polished = p.polar_newton_polish(X, G, sb.data(), opts.max_iterations, tolerance);
  if (!polished) yb = p.allocate(c * l * l);
  StackView<T> Y(yb.data(), c, l, l);
  if (!polished) p.polar_newton_steps(X, Y, sb.data(), opts.max_iterations, tolerance);

  const std::vector<T> state = read_state(p, sb, c);
  PolarInfo<T> info;
  info.sigma_min.resize(static_cast<size_t>(c));
  info.sigma_max.resize(static_cast<size_t>(c));
  std::vector<index_t> doubtful;
  int most = 0, schulz = 1;
  for (index_t k = 0; k < c; ++k) {
    const T* st = state.data() + k * polar::kStateSize;
    most = std::max(most, static_cast<int>(st[polar::kIterations]));
    schulz = std::max(schulz, static_cast<int>(st[polar::kSchulz]));
    const double kappa = st[polar::kKappa];
    if (polar::failed(st) || polar::active(st) || (polar::flags(st) & polar::kDoubtful) ||
        !(kappa > 0) || !(1.0 / kappa > fallback))
      doubtful.push_back(k);
    info.sigma_max[k] = st[polar::kAlpha];
    info.sigma_min[k] = st[polar::kInvNorm] > 0 ? T(1) / st[polar::kInvNorm] : T(0);
  }
  if (!promote && !defer && 2 * doubtful.size() > static_cast<size_t>(c)) {
    // Mostly doubtful ranks, zero pivots or no convergence: the SVD path for the whole batch,
    // exact singular values for the caller's rank decision (and its G, which is the answer).
    PolarInfo<T> exact = svd_path(p, M, transposed, G);
    exact.max_iterations = most;
    exact.svd_matrices = static_cast<int>(c);
    promote_doubtful(p, M, transposed, G, fallback, exact, opts);
    measure(p, G, exact, opts);
    return exact;
  }
  // Newton-Schulz steps, as many as the worst matrix needs (its error bound when the Newton
  // phase stopped, polar::schulz_steps), the last one into G; a fused backend took each
  // matrix's own count.
  if (!polished) newton_schulz(p, X, Y, G, schulz);
  info.max_iterations = most;
  info.schulz_steps = schulz;
  info.estimated = true;
  info.used_svd = false;
  if (!doubtful.empty() && defer) {
    // The caller recomputes them in float64 (PolarOptions::defer_doubtful); a zero sigma_min
    // makes sure it does, whatever the iteration's bound said.
    for (index_t k : doubtful) info.sigma_min[k] = T(0);
  } else if (!doubtful.empty() && promote) {
    // float32 with promotion: the doubtful matrices straight to float64, however many. Their
    // float32 SVDs would only sort out those whose exact ratio clears the limit (the iteration's
    // kappa bound overstates it up to l times), at the price of an SVD each, and the float64
    // answer is at least as accurate for those too. (At a = 1000, l = 950, c = 50 on an H200,
    // the float32 SVDs of the whole batch before the promotion took 11 s against
    // float64's 0.6 s for the same batch.)
    info.svd_matrices = 0;
    promote_listed(p, M, transposed, G, doubtful, info, opts);
  } else if (!doubtful.empty()) {
    // The few doubtful matrices alone take the SVD path: gathered into a contiguous stack (any
    // layout of M), factored with exact singular values, their G_k written over the iteration's.
    // A batch of 10^4 users with one doubtful user no longer pays 10^4 SVDs.
    const index_t n = static_cast<index_t>(doubtful.size()), per = l * l;
    const Buffer<T> mb = core::gather(p, M, doubtful);
    Buffer<T> gb = p.allocate(n * per);
    const PolarInfo<T> exact = svd_path(p, StackView<const T>(mb.data(), n, l, l), transposed,
                                        StackView<T>(gb.data(), n, l, l));
    for (index_t i = 0; i < n; ++i) {
      p.copy(gb.data() + i * per, G[doubtful[i]].data(), per);
      info.sigma_min[doubtful[i]] = exact.sigma_min[i];
      info.sigma_max[doubtful[i]] = exact.sigma_max[i];
    }
    info.used_svd = true;
    info.svd_matrices = static_cast<int>(n);
    promote_doubtful(p, M, transposed, G, fallback, info, opts);
  }
  measure(p, G, info, opts);
  return info;
}

template PolarInfo<float> polar_factor<float>(Primitives<float>&, StackView<const float>, bool,
                                              StackView<float>, const PolarOptions&);
template PolarInfo<double> polar_factor<double>(Primitives<double>&, StackView<const double>, bool,
                                                StackView<double>, const PolarOptions&);

}  // namespace dcalign
