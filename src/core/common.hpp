#pragma once
// Internal pieces shared by the alignment methods. Everything here is written on Primitives<T>,
// so it runs on every backend.
#include <chrono>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/team.hpp"
#include "dcalign/align.hpp"

namespace dcalign::core {

/// Wall-clock phases; synchronises the backend before reading the clock so that GPU work is
/// attributed to the phase that queued it.
template <typename T>
class PhaseTimer {
 public:
  PhaseTimer(Primitives<T>& p, AlignReport& r) : p_(p), r_(r), t0_(now()) {}
  void lap(const std::string& phase) {
    p_.synchronize();
    const auto t = now();
    r_.add_phase(phase, std::chrono::duration<double>(t - t0_).count());
    t0_ = t;
  }

 private:
  static std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::now(); }
  Primitives<T>& p_;
  AlignReport& r_;
  std::chrono::steady_clock::time_point t0_;
};

/// Everything a method needs. `G` and `target` live in backend memory; `target` may be empty.
template <typename T>
struct Context {
  Primitives<T>& p;
  StackView<const T> A;  ///< c x (a x l); also the concatenation W = [A_1 ... A_c]
  StackView<T> G;        ///< c x (l x l) output
  const AlignOptions& opts;
  AlignReport& report;
  PhaseTimer<T>& timer;
  double rank_tolerance;
  bool values_checked = false;  ///< anchors proven finite
  /// ODC: the products W^T Z (c*l x l; row block i is M_i = A_i^T Z) of its Procrustes step,
  /// kept for the evaluation, which derives the objective from them.
  Buffer<T> products;
  /// float32: users recomputed in float64 so far (1 = promoted; empty until the first one).
  std::vector<char> promoted;
  /// ||A_i||_F^2 per user when the scale check (src/core/align.cpp) has read them, else empty;
  /// the evaluation and GOPP's tracked objective use them instead of another pass.
  std::vector<double> anchor_energy;
  /// The processes that hold the other users (src/core/team.hpp); alone in one process.
  Team<T>& team;
  /// This process's users (A.count()); all_users() counts every process's.
  index_t users() const { return A.count(); }
  index_t all_users() const { return team.solo() ? A.count() : team.total(); }
  index_t rows() const { return A.rows(); }
  index_t dim() const { return A.cols(); }
};

/// Copies a host double matrix into new backend memory as T.
template <typename T>
Buffer<T> upload(Primitives<T>& p, const Matrix<double>& m);

/// Throws InvalidInput "<what> has a non-finite entry (NaN or Inf) at row i, column j" for the
/// first such entry of a host matrix the caller supplied (O, R, an explicit target Z).
void require_finite(const Matrix<double>& m, const std::string& what);

/// ODC's right factor O (l x l) as chosen by the options (on the host).
Matrix<double> target_rotation(const AlignOptions& opts, index_t l);

/// The Rng stream of the seed that ODC's Haar O is drawn from.
inline constexpr std::uint64_t kHaarStream = 0x0DC;

/// From this l on, a backend other than the CPU draws ODC's Haar O itself
/// (haar_rotation_on_backend) instead of uploading target_rotation's. The host's LAPACK QR of
/// an l x l matrix grows as l^3: 63-68 ms of an H200 run's 'target' phase at l = 950
/// (bench/results/gpu). 128 is a first choice, not a measured crossing: bench/gpu_probe's Haar
/// cases time both routes at l = 50, 500 and 950 on the next GPU run.
inline constexpr index_t haar_on_backend_from = 128;

/// ODC's Haar O (l x l, backend memory): the Gaussian of random_orthogonal for this seed drawn
/// on the host, factorised by the backend's qr_batched in float64, the signs of R's diagonal
/// moved into Q, rounded to T. The same matrix as target_rotation's up to rounding, whatever
/// the backend and the precision.
template <typename T>
Buffer<T> haar_rotation_on_backend(Primitives<T>& p, std::uint64_t seed, index_t l);

/// Imakura-DC's right factor R (l x l) as chosen by the options (on the host): the identity,
/// Unif[0,1) entries from the seed, or the supplied matrix (checked).
Matrix<double> right_factor(const AlignOptions& opts, index_t l);

/// The matrices `which` of a stack (any layout, backend memory), copied into new contiguous
/// backend memory: which.size() x (rows x cols).
template <typename T>
Buffer<T> gather(Primitives<T>& p, StackView<const T> M, const std::vector<index_t>& which);

/// The first matrix whose ||M_k||_F^2, summed in double, is not finite (an entry, or the
/// squares of finite entries, overflowed), or M.count() when there is none. O(count r c).
template <typename T>
index_t first_overflowing(Primitives<T>& p, StackView<const T> M);

/// Throws InvalidInput naming the first user whose ratio is at or below the tolerance.
template <typename T>
void check_rank(const std::vector<T>& ratio, double tolerance, const std::string& what);

/// The Gram route of a top-k SVD is used while sigma_1 / sigma_k <= this (src/core/spectral.cpp
/// derives the bound); beyond it the exact SVD runs.
inline constexpr double kGramMaxRatio = 100.0;

/// Which algorithm produced a top-k SVD.
struct SvdPath {
  SvdAlgorithm algorithm = SvdAlgorithm::exact;
  bool gram_fallback = false;  ///< gram was asked for, but sigma_1 / sigma_k > kGramMaxRatio
  double ratio = 0.0;          ///< sigma_1 / sigma_k from the Gram eigenvalues (gram asked)
  /// "gram", "exact", "randomized" or "exact (gram fallback: sigma_1/sigma_k = ...)".
  std::string describe() const;
};

/// Top-k singular triplets of W (as Primitives::svd_topk) by the algorithm `opts` names; gram
/// runs gram_topk on `gram` (W's Gram matrix as gram_of forms it, when the caller holds it) or
/// on a K it forms, falling back to the exact SVD.
template <typename T>
SvdPath topk_svd(Primitives<T>& p, MatrixView<const T> W, index_t k, const SvdOptions& opts, T* s,
                 MatrixView<T> U, MatrixView<T> V, MatrixView<const T> gram = {});
/// K = W^T W when W has no more columns than rows, else K = W W^T (the smaller Gram matrix).
/// Fixes the sign of each column pair (x_j, y_j) of a decomposition (singular or eigenvectors,
/// unique only up to sign): both are negated where x_j^T r < 0 for a fixed pseudo-random probe
/// r, so that the result does not depend on the BLAS kernels or the backend. Y may be empty.
template <typename T>
void canonical_signs(Primitives<T>& p, MatrixView<T> X, MatrixView<T> Y);

template <typename T>
void gram_of(Primitives<T>& p, MatrixView<const T> W, MatrixView<T> K);
/// Top-l left singular vectors U of W = [A_1 ... A_c] into U (a x l, backend memory), by
/// AlignOptions::svd; records the path in the report. `gram`, when given, is W's Gram matrix
/// (gram_of) that the caller already holds.
template <typename T>
void spectral_basis(Context<T>& ctx, MatrixView<T> U, MatrixView<const T> gram = {});

/// G_k = A_k^+ Z for every k (A contiguous, G a contiguous stack) and the ratios
/// sigma_min(A_k) / sigma_max(A_k) for the rank decision: Primitives::lstsq_batched (the SVD
/// per user) on the CPU, least_squares_qr elsewhere (src/core/least_squares.cpp).
template <typename T>
std::vector<T> least_squares(Primitives<T>& p, StackView<const T> A, MatrixView<const T> Z,
                             StackView<T> G, double rank_tolerance);
/// The QR route: batched QR, one GEMM, one batched triangular solve; ratios from the batched
/// polar iteration on the R_k (bounds within a factor l below the exact ratio, exact at or below
/// rank_tolerance). G is left unsolved when some ratio is 0 (an exactly singular R_k).
template <typename T>
std::vector<T> least_squares_qr(Primitives<T>& p, StackView<const T> A, MatrixView<const T> Z,
                                StackView<T> G, double rank_tolerance);
/// Whether least_squares takes the QR route on this backend.
template <typename T>
bool qr_least_squares_preferred(const Primitives<T>& p);

/// G_i = polar(A_i^T Z) for every user, as one product Z^T W (l x c*l, whose blocks are the
/// M_i^T) followed by one batched polar step. `scratch` holds c*l*l values.
template <typename T>
PolarInfo<T> procrustes_step(Context<T>& ctx, MatrixView<const T> Z, T* scratch);

/// G_i = polar(M_i) for the row blocks M_i of the c*l x l matrix `products` (M_i = A_i^T Z):
/// the second half of procrustes_step, for callers that formed the products another way.
/// Products that are not finite or overflow are refused (NumericalError) naming the user.
template <typename T>
PolarInfo<T> polar_of_products(Context<T>& ctx, const T* products);

/// Every user's rank decision after a Procrustes step against the target that `target`
/// returns (called only when needed: GOPP's Gram form forms Z on demand), from the polar
/// step's `info`. float64: the ratios sigma_min / sigma_max against ctx.rank_tolerance. float32:
/// a user at or below it is promoted (src/core/promote.cpp): M_i = A_i^T Z and G_i recomputed in
/// float64 from the float32 inputs, G_i and (when `products` is given) M_i rounded back, and
/// the error raised only when the float64 ratio fails too. `raise`: throw for a rank-deficient
/// user, naming it and `what`. Returns the users' ratios as decided (float64 ones for the
/// promoted users) and counts the promoted users in ctx.report.promoted_users.
template <typename T>
std::vector<double> decide_ranks(Context<T>& ctx, const PolarInfo<T>& info,
                                 const std::function<MatrixView<const T>()>& target, T* products,
                                 const std::string& what, bool raise);

/// The ODC step on a target already in place: G_i = polar(A_i^T Z) through procrustes_step,
/// keeping the products in ctx.products for the evaluation, then the rank check (`what` names
/// the matrices A_i^T Z in its message). ODC and OPP differ only in their Z.
template <typename T>
void procrustes_to_target(Context<T>& ctx, MatrixView<const T> Z, const std::string& what);

/// procrustes_to_target after its products and polar step: ctx.products holds the M_i and
/// `info` is their polar step's (G written); the phase lap, the rank check and the report.
template <typename T>
void finish_procrustes(Context<T>& ctx, MatrixView<const T> Z, const PolarInfo<T>& info,
                       const std::string& what);

/// Whether ODC with a Haar O orders its products as (A_i^T A_r) O, so that the host's draw of O
/// (target_rotation: a Gaussian and a LAPACK QR, about 0.1 ms at l = 50 on a server core, which
/// the GPU otherwise waits for) runs while the device forms W^T A_r: a backend other than the
/// CPU (whose gemm returns only when done), one process (A_r is then here), l below
/// haar_on_backend_from (from there on the backend draws O), G contiguous (its memory holds
/// W^T A_r until the polar step writes G). The M_i differ from A_i^T (A_r O) by rounding only.
template <typename T>
bool host_rotation_behind_products(const Context<T>& ctx);

/// That order: W^T A_r (c*l x l) into `scratch`, then O drawn on the host (target_rotation)
/// and uploaded, Z = A_r O and `products` = (W^T A_r) O (c*l x l, row block i is M_i).
template <typename T>
void products_rotation_last(Primitives<T>& p, StackView<const T> A, index_t reference,
                            const AlignOptions& opts, T* scratch, MatrixView<T> Z, T* products);

/// align_resident for the users of one process of `team` (src/dist: every process calls it
/// with its own users; src/core/align.cpp: the one process, with a solo Team).
template <typename T>
AlignReport align_shared(Team<T>& team, Primitives<T>& p, StackView<const T> anchors,
                         StackView<T> G, MatrixView<T> target, const AlignOptions& opts);

/// Z = A_r O (r = opts.reference_user, O = target_rotation): formed by the process that holds
/// user r, then given to every process.
template <typename T>
void reference_target(Context<T>& ctx, MatrixView<T> Z);

/// The top-l left singular vectors U (a x l) and singular values s of [X_1 ... X_c] when the
/// X_i are spread over the processes of ctx.team (src/core/sharded_spectral.cpp): the summed
/// a x a Gram matrix (svd gram while a <= kShardedGramMaxRows), a sketch summed over the users
/// (svd randomized, or a larger a), or the exact SVD of the gathered [X_1 ... X_c]
/// (svd exact). Returns the report's svd text.
template <typename T>
std::string sharded_left_vectors(Context<T>& ctx, StackView<const T> X, MatrixView<T> U,
                                 std::vector<T>& s);

template <typename T>
void run_odc(Context<T>& ctx, MatrixView<T> target);
template <typename T>
void run_opp(Context<T>& ctx, MatrixView<T> target);
template <typename T>
void run_rdp(Context<T>& ctx, MatrixView<T> target);
/// The function RDP minimises (eq. 24 with the absolute weight eta) at the stack G (c x l x l,
/// contiguous, host), its gradient written to grad (same shape); +inf for a singular G_i when
/// eta > 0. The same code as in run_rdp, exposed for the tests' finite differences.
double rdp_objective(Primitives<double>& p, StackView<const double> A, const double* G, double eta,
                     double* grad);
template <typename T>
void run_imakura(Context<T>& ctx, MatrixView<T> target);
template <typename T>
void run_kawakami(Context<T>& ctx);
template <typename T>
void run_gopp(Context<T>& ctx, MatrixView<T> target);

}  // namespace dcalign::core
