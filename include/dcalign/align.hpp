#pragma once
// Analyst side: change-of-basis matrices G_i from the released anchor representations A_i.
//
//   ODC        paper 001 Alg. 4: G_i = polar(A_i^T A_r O); optionally an explicit target Z
//              (OPP with a given target, paper 004 eqs. 17-20): G_i = polar(A_i^T Z).
//   Imakura    paper 001 Alg. 2: Z = U R, U top-l left singular vectors of [A_1 ... A_c];
//              G_i = A_i^+ Z.
//   Kawakami   paper 001 Alg. 3 (QR of each A_i, SVD of [Q_1 ... Q_c], G_i = R_i^{-1} g^_i), or
//              the generalized eigenproblem S v = lambda T v of papers 000/003/004.
//   GOPP       paper 003 App. B / 004 sec. 3.4: alternating minimisation of
//              sum_i ||A_i G_i - Z||_F^2 over orthogonal G_i and Z, from Z = U or the ODC target.
//   OPP        paper 004 eqs. 17-19: G_i = polar(A_i^T U), U as for Imakura (GOPP's first step).
//   RDP        paper 004 eqs. 24-25: L-BFGS on 1/2 sum_ij ||A_i G_i - A_j G_j||_F^2 +
//              eta sum_i (log det(G_i^T G_i))^2 over full-rank G_i, from the LS (Imakura, R = I)
//              or the OPP solution (rdp-ls, rdp-opp).
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dcalign/backend.hpp"
#include "dcalign/matrix.hpp"
#include "dcalign/polar.hpp"

namespace dcalign {

enum class Method { odc, imakura, kawakami, gopp, opp, rdp_ls, rdp_opp };
Method parse_method(const std::string& name);
std::string to_string(Method m);
/// The canonical names of every method ("odc", "imakura", ...), in the order of Method.
std::vector<std::string> method_names();

/// ODC's right factor O of the target A_r O.
enum class TargetRotation { haar, identity, supplied };
TargetRotation parse_target_rotation(const std::string& name);
std::string to_string(TargetRotation r);
/// Imakura-DC's right factor R of the target U R.
enum class RightFactor { identity, uniform, supplied };
RightFactor parse_right_factor(const std::string& name);
std::string to_string(RightFactor r);
enum class KawakamiForm { qr_svd, eigen };
KawakamiForm parse_kawakami_form(const std::string& name);
std::string to_string(KawakamiForm f);
enum class GoppInit { spectral, odc };
GoppInit parse_gopp_init(const std::string& name);
std::string to_string(GoppInit i);

/// ODC-GOPP's parameters (paper 003 App. B / 004 sec. 3.4), AlignOptions::gopp. Their ranges,
/// defaults and keys at every entry point are the option schema's (dcalign/options.hpp).
struct GoppParameters {
  GoppInit init = GoppInit::spectral;
  /// Stop when the objective's relative decrease in one iteration is at or below this, where
  /// that is above the objective's rounding level (8 eps(T) sum_i ||A_i||_F^2); 0 leaves only
  /// the precision-derived tests (src/core/gopp_stop.hpp, AlignReport::stop_reason).
  double tolerance = 1e-10;
  /// The iteration cap (AlignReport::stop_reason "iteration cap", converged = false). Uniform
  /// anchors at (a, l, c) = (300, 10, 13) converge at 0.987 per iteration and stop after 211-678
  /// (float64) and 153-670 (float32) iterations over 6 seeds, paper 004's layouts after 5-9;
  /// i.i.d. anchors at l = 50 need thousands and end here (docs/explanation/methods.md).
  index_t max_iterations = 1000;
};

/// RDP's parameters (paper 004 eqs. 24-25), AlignOptions::rdp.
struct RdpParameters {
  /// The penalty weight relative to the anchors' energy: eq. 24's eta is eta * s with
  /// s = (1/c) sum_i ||A_i||_F^2, so that scaling the anchors does not change the minimiser and
  /// rdp-ls and rdp-opp solve the same problem. The paper gives none; 1e-2 is the smallest value
  /// of {1e-4, ..., 1} whose held-apart ROC-AUC reaches the plateau on Pima and Heart disease
  /// (experiments/results/tuning/rdp_eta.md); larger values only cost time.
  double eta = 1e-2;
  /// Stop when ||grad f(G)||_F <= this * sum_i ||A_i||_F^2. Manopt's tolgradnorm (1e-6) is
  /// absolute; relative here because f scales with the anchors and an absolute 1e-6 lies below
  /// the rounding floor of the line search at the paper's sizes (src/core/rdp.cpp).
  double gradient_tolerance = 1e-6;
  index_t max_iterations = 1000;  ///< Manopt rlbfgs' maxiter
  index_t memory = 30;            ///< L-BFGS memory (Manopt rlbfgs' memory)
};

struct AlignOptions {
  Method method = Method::odc;
  std::uint64_t seed = 0;      ///< for O (haar), R (uniform) and randomized SVD sketches
  index_t reference_user = 0;  ///< r in the ODC target A_r O (0-based)

  TargetRotation rotation = TargetRotation::haar;
  Matrix<double> rotation_matrix;  ///< O when rotation == supplied (l x l, orthogonal)
  Matrix<double> target;           ///< ODC: explicit a x l target Z instead of A_r O

  RightFactor right = RightFactor::identity;
  Matrix<double> right_matrix;  ///< R when right == supplied (l x l, invertible)

  SvdOptions svd;  ///< Imakura, Kawakami, GOPP's spectral start, OPP, RDP's starts
  KawakamiForm kawakami_form = KawakamiForm::qr_svd;

  /// How ODC, GOPP and OPP take the polar factors: one SVD per user, the batched Newton iteration,
  /// or the measured faster of the two for the backend and shape (include/dcalign/polar.hpp).
  PolarMethod polar = PolarMethod::automatic;

  GoppParameters gopp;  ///< ODC-GOPP's start, tolerance and iteration cap
  RdpParameters rdp;    ///< RDP's penalty weight, stopping test and L-BFGS settings

  /// A_i is declared rank deficient when sigma_min / sigma_max of the matrix the method
  /// factorises is at or below this; negative means the default l * eps(T), the threshold of
  /// numpy.linalg.matrix_rank and LAPACK's xGELSD. Kawakami-DC's eigen form takes the ratio
  /// from the Cholesky factor of A_i^T A_i, which cannot resolve it below about sqrt(eps(T)),
  /// so it applies max(this, 4 sqrt(eps(T))).
  double rank_tolerance = -1.0;
  /// Compute the objective and the orthogonality error. For ODC and GOPP (orthogonal G_i) the
  /// objective is derived from quantities the method already has (sum_i ||A_i||^2, ||Z||^2 and
  /// tr(G_i^T M_i)), one reduction over the anchors instead of recomputing every A_i G_i.
  bool evaluate = true;
  /// Also compute the consensus objective, which needs Zbar = mean_i A_i G_i: a second product
  /// over all anchors, as costly as ODC itself. Always computed for Kawakami-DC (its objective).
  bool evaluate_consensus = false;
};

/// What an alignment did. Keys of to_json() are stable (CLI --report).
struct AlignReport {
  std::string method;
  std::string device;
  std::string precision;
  index_t users = 0, anchor_rows = 0, dim = 0;
  /// sum_i ||A_i G_i - Z||_F^2 with the method's target Z (Imakura: U R, ODC: A_r O or the
  /// given target, GOPP: the final Z, OPP: U). Kawakami-DC has no target: Z is the mean of
  /// A_i G_i. RDP: the value of eq. 24 that it minimised (its Z, the mean, is for enrolment).
  double objective = 0.0;
  /// sum_i ||A_i G_i - Zbar||_F^2 with Zbar = mean_i A_i G_i; equals the pairwise objective
  /// sum_{i,j} ||A_i G_i - A_j G_j||_F^2 / (2c), comparable across methods. NaN (JSON null)
  /// unless AlignOptions::evaluate_consensus, Kawakami-DC, GOPP (where Z is that mean) or RDP.
  double consensus_objective = 0.0;
  /// max_i ||G_i^T G_i - I||_F.
  double orthogonality_error = 0.0;
  /// Method-specific residual of the factorisation, e.g. Kawakami's max_k |sum_i ||A_i g_ik||^2 -
  /// 1|.
  double constraint_error = 0.0;
  /// Smallest sigma_min / sigma_max over users of the matrices the method factorised (RDP: of
  /// its G_i, as the lower bound 1 / (||G_i||_F ||G_i^{-1}||_F)). Imakura-DC on a GPU (the QR
  /// route of its least squares, src/core/least_squares.cpp) reports that same kind of lower
  /// bound, between the exact ratio / l and the exact ratio, unless the bound is at or below the
  /// rank tolerance, where the ratio is exact; ODC's iterative polar step likewise.
  double min_rank_ratio = 0.0;
  /// The top-k SVD that ran, for methods that need one (AlignOptions::svd): "gram", "exact",
  /// "randomized", or "exact (gram fallback: ...)" when the Gram route's accuracy bound failed.
  std::string svd;
  index_t iterations = 0;  ///< GOPP, RDP (and iterative polar on GPUs)
  /// float32 ODC, OPP and GOPP: users whose float32 rank test failed and whose M_i = A_i^T Z
  /// and polar factor were recomputed in float64 from the float32 inputs (precision
  /// promotion, src/core/promote.cpp); their G_i are the float64 answers rounded to float32.
  index_t promoted_users = 0;
  /// GOPP and RDP: false when the iteration cap ended the run.
  bool converged = true;
  /// GOPP: why the iteration stopped (src/core/gopp_stop.hpp): "objective at rounding level",
  /// "tolerance", "iterates stationary", "decrease at rounding level" (converged) or "iteration
  /// cap" (not converged). Empty (JSON null) for the other methods.
  std::string stop_reason;
  /// RDP: ||grad f||_F at the result (NaN, JSON null, for the other methods).
  double gradient_norm = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> objective_history;  ///< GOPP, RDP: objective after each iteration
  /// The host BLAS that ran (library, kernel set and who chose it; see blas_info()).
  BlasInfo blas;
  std::vector<std::pair<std::string, double>> seconds;  ///< phase -> seconds, in order
  double total_seconds = 0.0;
  bool evaluated = false;

  void add_phase(const std::string& name, double s);
  std::string to_json(int indent = 2) const;
};

template <typename T>
struct Alignment {
  Stack<T> G;        ///< c x (l x l)
  Matrix<T> target;  ///< the target Z where the method has one (a x l), else empty
  AlignReport report;
};

/// Aligns anchors held in host memory on the given backend (uploading them if needed).
template <typename T>
Alignment<T> align(const Stack<T>& anchors, const AlignOptions& opts, Backend& backend);
/// Same on a default CPU backend.
template <typename T>
Alignment<T> align(const Stack<T>& anchors, const AlignOptions& opts);

/// Users with different latent dimensions (paper 002, eq. 1: user i releases A_i = A F_i with
/// its own l_i). anchors[i] is a x l_i; G[i] is l_i x dim and maps user i into one common
/// dim-dimensional space: A_i G_i ~ Z (a x dim).
///   Imakura-DC   Z = U R with U the top-dim left singular vectors of [A_1 ... A_c] (a x sum l_i)
///                and R as AlignOptions::right says; G_i = A_i^+ Z (paper 001 Alg. 2).
///   Kawakami-DC  its QR-SVD form: A_i = Q_i R_i, V the top-dim right singular vectors of
///                [Q_1 ... Q_c], G_i = R_i^-1 V_i with V_i the l_i rows of user i (paper 001
///                Alg. 3); the eigen form is solved through it (the same subspace).
/// With every l_i equal this gives what align() gives. ODC, GOPP, OPP and RDP need one l for
/// every user (their G_i are square, orthogonal or l x l) and are refused with the users'
/// dimensions. Throws InvalidInput for no users, anchors with different row counts, l_i < 1 or
/// l_i > a, dim outside 1..min(a, sum l_i), a NaN or Inf (naming user, row and column) or a
/// rank-deficient A_i. The report's objective is sum_i ||A_i G_i - Z||_F^2 (Imakura) or
/// sum_i ||A_i G_i - Zbar||_F^2 with Zbar their mean (Kawakami, whose constraint
/// sum_i ||A_i g_ik||^2 = 1 per column k gives constraint_error).
template <typename T>
struct RaggedAlignment {
  std::vector<Matrix<T>> G;  ///< G[i]: l_i x dim
  Matrix<T> target;          ///< Z (a x dim) for Imakura-DC; empty for Kawakami-DC
  AlignReport report;
};
template <typename T>
RaggedAlignment<T> align_ragged(const std::vector<Matrix<T>>& anchors, index_t dim,
                                const AlignOptions& opts, Backend& backend);
template <typename T>
RaggedAlignment<T> align_ragged(const std::vector<Matrix<T>>& anchors, index_t dim,
                                const AlignOptions& opts);

/// Aligns anchors already in the backend's memory; writes G (c x l x l, backend memory) and,
/// when `target` is non-empty (a x l), the target. No host-device copies of the anchors.
template <typename T>
AlignReport align_resident(Primitives<T>& p, StackView<const T> anchors, StackView<T> G,
                           MatrixView<T> target, const AlignOptions& opts);

/// Checks the anchor stack's shape before any work: at least one user, l >= 1, l <= a, a valid
/// reference user.
template <typename T>
void validate_anchors(Primitives<T>& p, StackView<const T> anchors, const AlignOptions& opts);
/// Throws InvalidInput naming the user, row and column of the first NaN or Inf. Every method
/// runs it: upfront, or (ODC, GOPP) when its first product over all anchors is not finite.
template <typename T>
void validate_anchor_values(Primitives<T>& p, StackView<const T> anchors);

}  // namespace dcalign
