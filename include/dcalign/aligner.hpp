#pragma once
// Enrolment of users who join after the alignment. An Aligner is fitted on the anchor
// representations A_1..A_c of the first c users, keeps its method's target Z (a x l), and aligns
// a user who joins later from that user's A_new (a x l) alone, in O(a l^2), without changing the
// G_i of anyone else:
//
//   ODC, GOPP    G_new = polar(A_new^T Z), the Procrustes step against the kept target (ODC: A_r O
//                or the explicit target, paper 001 Alg. 4 / paper 004 eqs. 17-20; GOPP: its final
//                Z). For ODC this is exactly the G_i the batch alignment gives that user, since
//                each G_i depends only on A_i and Z (paper 001 sec. 6.3).
//   Imakura-DC   G_new = A_new^+ Z with the kept Z = U R (paper 001 Alg. 2, eqs. 27-29).
//   Kawakami-DC  has no target in the paper. The Aligner keeps Zbar = (1/c) sum_i A_i G_i and
//                enrols by G_new = A_new^+ Zbar, the minimiser over G_new of Kawakami's pairwise
//                objective sum_i ||A_new G_new - A_i G_i||_F^2 with the fitted G_i held fixed.
//                It is not what re-solving Kawakami-DC on c + 1 users gives (that changes every
//                G_i, and the new user's columns are not normalised by the constraint of problem
//                (47)); it is what keeps the others' G_i valid.
//   OPP          as ODC, against its target U_1 (paper 004 eqs. 17-19): the batch G_i exactly.
//   RDP          (rdp-ls, rdp-opp) as Kawakami-DC: Zbar = (1/c) sum_i A_i G_i, which RDP returns
//                as its target, and G_new = A_new^+ Zbar.
//
// A saved model is a directory holding two files:
//   model.json   format "dcalign-aligner", format_version, dcalign_version, method, precision,
//                anchor_rows (a), dim (l), users (c), rank_tolerance, enrolment ("procrustes" or
//                "least_squares"), target {file, shape}, and the method's options (exactly the
//                keys of that method: a JSON edited to another method is rejected);
//   target.npy   Z (a x l) in the model's precision (Kawakami-DC: Zbar).
// save() writes the whole directory under a temporary name beside it and renames it into place
// (an existing model is swapped atomically with renameat2(RENAME_EXCHANGE) where the file
// system supports it), so a failed save never leaves a half-written model at the path. load()
// rejects a missing, truncated or corrupt file, another format version or method, and matrices
// whose shape or dtype disagree with model.json, with an IoError naming the file.
#include <string>
#include <utility>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/matrix.hpp"

namespace dcalign {

/// What an enrolment did, one entry per new user k in the vectors. Keys of to_json() are stable
/// (CLI `dcalign enroll --report`).
struct EnrolmentReport {
  std::string method;
  std::string device;
  std::string precision;
  index_t users = 0;  ///< new users enrolled by this call
  index_t anchor_rows = 0, dim = 0;
  index_t fitted_users = 0;  ///< c, the users the model was fitted on
  /// ||A_k G_k - Z||_F^2 against the kept target (the user's term of the method's objective).
  std::vector<double> residual;
  /// ||A_k G_k - Z||_F / ||Z||_F.
  std::vector<double> relative_residual;
  /// ||G_k^T G_k - I||_F (rounding level for ODC and GOPP, whose G_k are orthogonal).
  std::vector<double> orthogonality_error;
  /// sigma_min / sigma_max of the matrix enrolment factorises: A_k^T Z (ODC, GOPP) or A_k. On a
  /// GPU, and for A_k^T Z through the iterative polar step, the lower bound between exact / l and
  /// exact (AlignReport::min_rank_ratio), exact at or below the rank tolerance.
  std::vector<double> rank_ratio;
  std::vector<std::pair<std::string, double>> seconds;  ///< phase -> seconds, in order
  double total_seconds = 0.0;

  void add_phase(const std::string& name, double s);
  std::string to_json(int indent = 2) const;
};

template <typename T>
struct Enrolment {
  Matrix<T> G;  ///< l x l
  EnrolmentReport report;
};

template <typename T>
struct BatchEnrolment {
  Stack<T> G;  ///< k x (l x l), G[k] for A_new[k]
  EnrolmentReport report;
};

/// The metadata of a saved model, read without its matrices (e.g. to choose T before load).
struct ModelInfo {
  Method method = Method::odc;
  std::string precision;  ///< "float32" or "float64"
  index_t anchor_rows = 0, dim = 0, users = 0;
  int format_version = 0;
  std::string dcalign_version;  ///< the version that wrote the model (informational)
};

/// Reads and validates `dir`/model.json (IoError naming the file when it is not a model).
ModelInfo read_model_info(const std::string& dir);

/// Throws IoError unless Aligner::save may write `dir`: it does not exist, or it is a dcalign
/// model directory (not a symbolic link) holding model.json with the format marker and a
/// format_version, and target.npy, and nothing else. Anything else is never replaced.
void check_model_destination(const std::string& dir);

/// The format version this dcalign writes and reads.
constexpr int kModelFormatVersion = 1;

template <typename T>
class Aligner {
 public:
  Aligner() = default;

  /// Aligns the first c users (exactly `align(anchors, opts, backend)`) and keeps what
  /// enrolment needs. Returns that alignment.
  Alignment<T> fit(const Stack<T>& anchors, const AlignOptions& opts, Backend& backend);
  /// Same on a default CPU backend.
  Alignment<T> fit(const Stack<T>& anchors, const AlignOptions& opts);

  /// G_new for one new user (A_new: a x l, the fitted shape). Throws InvalidInput for a wrong
  /// shape, a NaN or Inf (naming row and column) or a rank-deficient A_new (or A_new^T Z).
  Enrolment<T> enroll(const Matrix<T>& A_new, Backend& backend) const;
  Enrolment<T> enroll(const Matrix<T>& A_new) const;
  /// G_new[k] for k new users at once (one product and one batched factorisation).
  BatchEnrolment<T> enroll(const Stack<T>& A_new, Backend& backend) const;
  BatchEnrolment<T> enroll(const Stack<T>& A_new) const;

  /// Writes the model directory `dir` atomically (see the top of this header). An existing
  /// path is replaced only when it is a model directory (holds model.json).
  void save(const std::string& dir) const;
  /// Reads a model written by save(). Throws IoError for a missing, truncated or inconsistent
  /// model and InvalidInput when it was saved in the other precision.
  static Aligner load(const std::string& dir);

  bool fitted() const { return target_.size() > 0; }
  Method method() const { return opts_.method; }
  index_t anchor_rows() const { return target_.rows(); }
  index_t dim() const { return target_.cols(); }
  index_t users() const { return users_; }  ///< c, the users of the fit
  /// Z (a x l); for Kawakami-DC, Zbar = mean_i A_i G_i.
  const Matrix<T>& target() const { return target_; }
  /// The rank threshold of the fit, applied to every enrolment.
  double rank_tolerance() const { return rank_tolerance_; }
  /// The options of the fit. A loaded model restores the scalar options recorded in
  /// model.json; supplied matrices (O, R, an explicit target) live on only through Z.
  const AlignOptions& options() const { return opts_; }

 private:
  void require_fitted(const char* what) const;
  AlignOptions opts_;
  Matrix<T> target_;
  index_t users_ = 0;
  double rank_tolerance_ = 0.0;
  bool explicit_target_ = false;  ///< ODC aligned to a given Z instead of A_r O
  index_t iterations_ = 0;        ///< GOPP
  bool converged_ = true;         ///< GOPP
};

}  // namespace dcalign
