// RDP, paper 004 section 3.3.3, eqs. 24-25: the rank-deficiency (log-det) penalty
//   min f(G) = 1/2 sum_ij ||A_i G_i - A_j G_j||_F^2 + eta sum_i (log det(G_i^T G_i))^2
// over full-rank G_i, started from the LS solution (rdp-ls: Imakura-DC with R = I) or the OPP
// solution (rdp-opp) and solved by L-BFGS (libLBFGS).
//
// Why Euclidean L-BFGS is the paper's Riemannian BFGS on the fixed-rank manifold (Manopt's
// fixedrankembeddedfactory, rank l, l x l matrices): that manifold is GL(l), an open subset of
// R^{l x l}. Its tangent space at every point is all of R^{l x l}, the embedded metric is the
// Euclidean one, so the Riemannian gradient is the Euclidean gradient and the tangent-space
// projection (Manopt's vector transport) is the identity; the retraction can be R_G(xi) = G + xi
// (the rank-l truncation of G + xi is G + xi itself while it has full rank). RBFGS with these
// pieces is Euclidean BFGS on the open set GL(l)^c. The iterates stay in it because f -> +inf
// as det G_i -> 0 (eta > 0), and the evaluation returns +inf for a singular G_i, which the
// backtracking line search rejects by halving the step.
//
// Cost: with W = [A_1 ... A_c] = Q C (thin QR, C upper triangular c l x c l; C = W when a < c l),
// A_i G_i = Q C_i G_i with C_i the column block i of C, and Q preserves norms, so
//   1/2 sum_ij ||A_i G_i - A_j G_j||^2 = c sum_i ||Y_i - Ybar||^2,  Y_i = C_i G_i,
// with gradient 2c C_i^T (Y_i - Ybar). One QR over the anchors (on the backend) precedes the
// optimisation; each evaluation costs O(c^2 l^3) (C_i has (i+1) l nonzero rows), independent of
// the anchor rows a, plus c LU factorisations of l x l for the penalty, whose gradient is
// 4 eta log det(G_i^T G_i) G_i^{-T}. Written as a sum of squares of Y_i - Ybar (rather than
// <Gv, L Gv> with L = c blkdiag(A_i^T A_i) - W^T W, as cheap), f has a rounding error of
// eps ||Y|| ||Y - Ybar||, not eps ||Y||^2, so the line search keeps resolving decreases as the
// users approach consensus.
//
// Precision and placement: the optimiser's vectors are double on the host (c l^2 values), and
// so is C after the QR (taken in T on the backend); the per-user products and the l x l LU
// factorisations run on host BLAS/LAPACK, whatever the backend, since C is small.
//
// Over several processes (src/core/team.hpp) the QR of all of W is out of reach: each process
// keeps its own A_i uncompressed (C_i = A_i, a rows), sums Ybar and f over the team, and
// computes the gradient blocks of its users, which a sum of the zero-padded gradient gives to
// every process. Every process then runs the same L-BFGS on the same c l^2 values (its vectors
// are small), so the iterates agree without further messages.
#include <lbfgs.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "base/host_blas.hpp"
#include "core/common.hpp"
#include "dcalign/options.hpp"

namespace dcalign::core {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// G^{-1} (l x l, into inv) and log|det G| of the l x l matrix G, by LAPACK's LU with partial
/// pivoting (getrf, getri; `work` holds l x l values, `piv` l). False for a zero or non-finite
/// pivot.
bool inverse_logdet(const double* G, index_t l, double* work, lapack_int* piv, double* inv,
                    double& logabsdet) {
  const auto n = static_cast<lapack_int>(l);
  std::copy(G, G + l * l, inv);
  if (base::getrf(n, inv, n, piv) != 0) return false;
  logabsdet = 0;
  for (index_t k = 0; k < l; ++k) {
    const double pivot = inv[k + k * l];
    if (!(pivot != 0.0) || !std::isfinite(pivot)) return false;
    logabsdet += std::log(std::abs(pivot));
  }
  return base::getri(n, inv, n, piv, work, n * n) == 0;
}

/// The anchors in compressed form: C (r x c l, host, column-major) with C^T C = W^T W.
struct Compressed {
  std::vector<double> C;
  index_t r = 0;
  bool triangular = false;  ///< C from the QR: block i has (i + 1) l nonzero rows
  double energy = 0;        ///< sum_i ||A_i||_F^2
};

template <typename T>
Compressed compress(Primitives<T>& p, StackView<const T> A, bool alone) {
  const index_t a = A.rows(), n = A.count() * A.cols();
  Compressed out;
  std::vector<T> host;
  if (a >= n && alone) {
    Buffer<T> w = p.allocate(a * n), r = p.allocate(n * n);
    p.copy(A.data(), w.data(), a * n);
    p.qr_batched(StackView<T>(w.data(), 1, a, n), StackView<T>(r.data(), 1, n, n));
    host.resize(static_cast<size_t>(n * n));
    p.to_host(r.data(), host.data(), n * n);
    out.r = n;
    out.triangular = true;
  } else {
    host.resize(static_cast<size_t>(a * n));
    p.to_host(A.data(), host.data(), a * n);
    out.r = a;
  }
  p.synchronize();
  out.C.assign(host.begin(), host.end());
  for (double v : out.C) out.energy += v * v;
  return out;
}

/// f and its gradient on the stack G (c x l x l, contiguous, host) of every user; C holds the
/// blocks of this process's users, the first of which is user `first`.
template <typename T>
class Objective {
 public:
  Objective(Compressed C, Team<T>& team, index_t c, index_t l, double eta)
      : C_(std::move(C)),
        team_(team),
        first_(team.first()),
        mine_(team.solo() ? c : static_cast<index_t>(C_.C.size()) / (C_.r * l)),
        c_(c),
        l_(l),
        eta_(eta) {
    const auto rl = static_cast<size_t>(C_.r * l);
    Y_.assign(rl * static_cast<size_t>(mine_), 0.0);  // rows below a block's nonzero rows stay 0
    D_.assign(rl * static_cast<size_t>(mine_), 0.0);
    mean_.assign(rl, 0.0);
    work_.resize(static_cast<size_t>(l * l));
    inv_.resize(static_cast<size_t>(l * l));
    piv_.resize(static_cast<size_t>(l));
  }

  /// f(x); g = grad f(x). +inf (g zero) when some G_i is singular and eta > 0.
  double operator()(const double* x, double* g) {
    const index_t l = l_, ll = l * l, rl = C_.r * l, n = mine_;
    const double* xs = x + first_ * ll;  // this process's G_i and gradient blocks
    double* gs = g + first_ * ll;
    const bool alone = team_.solo();
    for (index_t i = 0; i < n; ++i)  // Y_i = C_i G_i
      product(false, rows(i), 1.0, block(i), xs + i * ll, Y_.data() + i * rl);
    std::fill(mean_.begin(), mean_.end(), 0.0);
    for (index_t i = 0; i < n; ++i)
      for (index_t k = 0; k < rl; ++k) mean_[k] += Y_[i * rl + k];
    team_.sum_host(mean_.data(), rl);
    for (double& v : mean_) v /= static_cast<double>(c_);
    double f = 0;
    for (index_t i = 0; i < n; ++i)
      for (index_t k = 0; k < rl; ++k) {
        const double d = Y_[i * rl + k] - mean_[k];
        D_[i * rl + k] = d;
        f += d * d;
      }
    f = team_.sum_host(f) * static_cast<double>(c_);
    if (!alone) std::fill(g, g + c_ * ll, 0.0);
    for (index_t i = 0; i < n; ++i)  // g_i = 2c C_i^T D_i
      product(true, rows(i), 2.0 * static_cast<double>(c_), block(i), D_.data() + i * rl,
              gs + i * ll);
    // The penalties, added to f in user order in one process (or summed over the team, then
    // added); +inf when some G_i is singular.
    double tail = alone ? f : 0.0;
    if (eta_ > 0) {
      for (index_t i = 0; i < n; ++i) {
        double logabsdet = 0;
        if (!inverse_logdet(xs + i * ll, l, work_.data(), piv_.data(), inv_.data(), logabsdet)) {
          tail = kInf;
          break;
        }
        const double ld = 2.0 * logabsdet;  // log det(G_i^T G_i)
        tail += eta_ * ld * ld;
        const double w = 4.0 * eta_ * ld;
        for (index_t s = 0; s < l; ++s)  // g_i += w G_i^{-T}
          for (index_t t = 0; t < l; ++t) gs[i * ll + t + s * l] += w * inv_[s + t * l];
      }
    }
    if (!alone) tail = team_.sum_host(tail);
    if (tail == kInf) {
      std::fill(g, g + c_ * ll, 0.0);
      return kInf;
    }
    f = alone ? tail : f + tail;
    if (!alone && std::isfinite(f)) team_.sum_host(g, c_ * ll);
    return std::isfinite(f) ? f : kInf;
  }

  /// sigma_min / sigma_max of each G_i of this process, bounded below by
  /// 1 / (||G_i||_F ||G_i^{-1}||_F) (at most a factor l under the true ratio); 0 for a singular
  /// G_i.
  std::vector<double> rank_ratios(const double* x) {
    std::vector<double> ratio(static_cast<size_t>(mine_), 0.0);
    const index_t ll = l_ * l_;
    x += first_ * ll;
    for (index_t i = 0; i < mine_; ++i) {
      double logabsdet = 0;
      if (!inverse_logdet(x + i * ll, l_, work_.data(), piv_.data(), inv_.data(), logabsdet))
        continue;
      double gg = 0, ii = 0;
      for (index_t k = 0; k < ll; ++k) {
        gg += x[i * ll + k] * x[i * ll + k];
        ii += inv_[k] * inv_[k];
      }
      ratio[i] = 1.0 / std::sqrt(gg * ii);
    }
    return ratio;
  }

 private:
  const double* block(index_t i) const { return C_.C.data() + i * C_.r * l_; }
  index_t rows(index_t i) const { return C_.triangular ? std::min(C_.r, (i + 1) * l_) : C_.r; }

  /// Y = C_i X (trans false; X l x l, Y rows x l, leading dimension r) or
  /// Y = alpha C_i^T X (trans true; X rows x l with leading dimension r, Y l x l). Every operand
  /// is host memory (C, G and the gradient live on the host whatever the backend), so host BLAS.
  void product(bool trans, index_t rows, double alpha, const double* Ci, const double* X,
               double* Y) {
    const auto r = static_cast<lapack_int>(C_.r), l = static_cast<lapack_int>(l_),
               m = static_cast<lapack_int>(rows);
    if (!trans)
      base::gemm(false, false, m, l, l, alpha, Ci, r, X, l, 0.0, Y, r);
    else
      base::gemm(true, false, l, l, m, alpha, Ci, r, X, r, 0.0, Y, l);
  }

  Compressed C_;
  Team<T>& team_;
  index_t first_, mine_, c_, l_;
  double eta_;
  std::vector<double> Y_, D_, mean_, work_, inv_;
  std::vector<lapack_int> piv_;
};

/// What the libLBFGS callbacks share (they are C functions with a void* instance).
template <typename T>
struct Run {
  Objective<T>& f;
  AlignReport& report;
  double tolerance;
  bool converged;
  std::exception_ptr error;
};

template <typename T>
lbfgsfloatval_t evaluate_cb(void* instance, const lbfgsfloatval_t* x, lbfgsfloatval_t* g, int,
                            lbfgsfloatval_t) {
  auto& run = *static_cast<Run<T>*>(instance);
  // After an error (which every process of a team meets in the same reduction) no more
  // evaluations: the line search gets +inf until progress_cb stops libLBFGS.
  if (run.error) return kInf;
  try {  // no exception may cross the C library
    return run.f(x, g);
  } catch (...) {
    if (!run.error) run.error = std::current_exception();
    return kInf;
  }
}

template <typename T>
int progress_cb(void* instance, const lbfgsfloatval_t*, const lbfgsfloatval_t*, lbfgsfloatval_t fx,
                lbfgsfloatval_t, lbfgsfloatval_t gnorm, lbfgsfloatval_t, int, int k, int) {
  auto& run = *static_cast<Run<T>*>(instance);
  run.report.objective_history.push_back(fx);
  run.report.iterations = k;
  if (run.error) return 1;
  if (gnorm <= run.tolerance) {
    run.converged = true;
    return 1;  // stops libLBFGS at this point
  }
  return 0;
}

double norm2(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

}  // namespace

template <typename T>
void run_rdp(Context<T>& ctx, MatrixView<T> target) {
  auto& p = ctx.p;
  const AlignOptions& o = ctx.opts;
  check_align_options(o);  // the schema's ranges (dcalign/options.hpp)
  // The optimiser's vector holds every user's G_i (c over the team); this process's users are
  // the n / l from user first on.
  const index_t l = ctx.dim(), c = ctx.all_users(), n = ctx.users() * l;
  const index_t first = ctx.team.first();
  const auto size = static_cast<size_t>(c * l * l);

  // The start writes G and its own target (U_1) into `target`; LS is Imakura-DC with R = I.
  {
    AlignOptions start = o;
    start.right = RightFactor::identity;
    Context<T> sub{p,
                   ctx.A,
                   ctx.G,
                   start,
                   ctx.report,
                   ctx.timer,
                   ctx.rank_tolerance,
                   ctx.values_checked,
                   Buffer<T>(),
                   {},
                   ctx.anchor_energy,
                   ctx.team};
    if (o.method == Method::rdp_ls)
      run_imakura(sub, target);
    else
      run_opp(sub, target);
    ctx.values_checked = sub.values_checked;
  }
  std::vector<double> x0(size, 0.0);
  {
    std::vector<T> host(static_cast<size_t>(n * l));
    p.to_host(ctx.G.data(), host.data(), n * l);
    p.synchronize();
    std::copy(host.begin(), host.end(), x0.begin() + first * l * l);
    ctx.team.sum_host(x0.data(), c * l * l);  // zero-padded: every process gets every G_i
  }
  Compressed compressed = compress(p, ctx.A, ctx.team.solo());
  compressed.energy = ctx.team.sum_host(compressed.energy);
  const double energy = compressed.energy;  // sum_i ||A_i||_F^2
  // eta relative to the anchors' energy per user (AlignOptions::rdp_eta).
  const double eta = o.rdp.eta * energy / static_cast<double>(c);
  Objective<T> objective(std::move(compressed), ctx.team, c, l, eta);
  ctx.timer.lap("compress");

  AlignReport& rep = ctx.report;
  rep.objective_history.clear();
  rep.iterations = 0;
  Run<T> run{objective, rep, 0.0, false, nullptr};
  std::vector<double> g(size);
  double f = objective(x0.data(), g.data());
  rep.objective_history.push_back(f);
  if (!std::isfinite(f))
    throw NumericalError("RDP: the objective at the " +
                         std::string(o.method == Method::rdp_ls ? "LS" : "OPP") +
                         " start is not finite (a singular G_i or overflowing anchors)");
  // Relative to the anchors' energy E = sum_i ||A_i||_F^2, not Manopt's absolute tolgradnorm:
  // f and its gradient scale with the anchors (at G_i of order one the gradient's terms are of
  // size E), so the test is scale-free like eta and the same for both starts. An Armijo line
  // search cannot resolve decreases below the rounding of f, which leaves ||grad f|| near
  // sqrt(eps f lambda_max) <~ sqrt(2 c eps) E (2e-7 E for c = 100); at the paper's sizes an
  // absolute 1e-6 is 1e-11 E to 3e-12 E, out of reach (measured floors 2e-9 E to 2e-8 E).
  run.tolerance = o.rdp.gradient_tolerance * energy;
  const std::unique_ptr<lbfgsfloatval_t, void (*)(lbfgsfloatval_t*)> xp(
      lbfgs_malloc(static_cast<int>(size)), lbfgs_free);
  lbfgsfloatval_t* x = xp.get();
  if (!x)
    throw NumericalError("RDP: libLBFGS could not allocate " + std::to_string(size) + " values");
  std::copy(x0.begin(), x0.end(), x);
  int status = 0;
  if (norm2(g) > run.tolerance) {
    lbfgs_parameter_t param;
    lbfgs_parameter_init(&param);
    param.m = static_cast<int>(o.rdp.memory);
    param.epsilon = 0;  // our test in progress_cb instead of ||g|| / max(1, ||x||)
    param.past = 0;
    param.max_iterations = static_cast<int>(o.rdp.max_iterations);
    // Backtracking keeps f = +inf (a singular G_i) out: it halves the step until f is finite
    // and decreases enough; the Wolfe curvature condition keeps the BFGS update positive.
    param.linesearch = LBFGS_LINESEARCH_BACKTRACKING_WOLFE;
    lbfgsfloatval_t fx = 0;
    status = lbfgs(static_cast<int>(size), x, &fx, evaluate_cb<T>, progress_cb<T>, &run, &param);
  }
  if (run.error) std::rethrow_exception(run.error);
  // libLBFGS returns the last accepted point (after a failed line search, the previous one);
  // evaluate there so that the reported value and gradient belong to the returned G.
  f = objective(x, g.data());
  const double gnorm = norm2(g);
  std::vector<double> ratio = objective.rank_ratios(x);
  std::vector<T> gt(x + first * l * l, x + (first * l + n) * l);
  if (!std::isfinite(f))
    throw NumericalError("RDP: the objective became non-finite (libLBFGS status " +
                         std::to_string(status) + ")");
  rep.converged = gnorm <= run.tolerance;
  rep.gradient_norm = gnorm;
  if (rep.objective_history.back() != f) rep.objective_history.push_back(f);
  rep.min_rank_ratio = *std::min_element(ratio.begin(), ratio.end());
  check_rank(ratio, ctx.rank_tolerance, "G_i (the RDP result)");
  ctx.timer.lap("lbfgs");

  // G back to the backend, and the target Zbar = W [G_1; ...; G_c] / c (for enrolment).
  p.to_device(gt.data(), ctx.G.data(), n * l);
  Buffer<T> gv = p.allocate(n * l);
  p.vstack(StackView<const T>(ctx.G), gv.matrix(n, l));
  p.gemm(Op::none, Op::none, T(1) / T(c), ctx.A.concatenated(),
         MatrixView<const T>(gv.data(), n, l), T(0), target);
  ctx.team.sum(target.data(), target.rows() * l);
  p.synchronize();
  ctx.timer.lap("target");
}

double rdp_objective(Primitives<double>& p, StackView<const double> A, const double* G, double eta,
                     double* grad) {
  Team<double> alone;
  Objective<double> f(compress(p, A, true), alone, A.count(), A.cols(), eta);
  return f(G, grad);
}

template void run_rdp<float>(Context<float>&, MatrixView<float>);
template void run_rdp<double>(Context<double>&, MatrixView<double>);

}  // namespace dcalign::core
