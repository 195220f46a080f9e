#pragma once
// NRI-DC, paper 004 Algorithm 1 with the experiment of its section 4.1. Three functions, one per
// step of the protocol, whose arguments are exactly what that party holds:
//
//   worker_release  (steps 1-7)    worker i: its X_i, Y_i and the shared anchor X^anc
//                                  -> Release (the only thing the master ever sees)
//   master          (steps 8-13)   the releases -> Y^anc_i, hard labels of the anchor rows;
//                                  G_i and h stay inside it
//   worker_finish   (steps 14-16)  worker i: X^anc, Y^anc_i and its test data -> its scores
//
// The master never gets X^anc, the secret bases, the noise or the permutations; the workers
// never get G_i or h.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/backend.hpp"
#include "dcalign/learn.hpp"
#include "dcalign/matrix.hpp"

namespace dcalign::experiment::nri {

struct WorkerOptions {
  index_t dim = 1;      ///< m~, the columns of the secret basis F'_i
  double delta = 0.05;  ///< the PCA is fitted on X_i + delta E_i, E_i standard normal
  /// scikit-learn's PCA: subtract the mean mu_i of the noisy copy from X_i and from the anchor
  /// before projecting. false: the plain linear map X_i F'_i of Algorithm 1.
  bool center = true;
  bool permute = true;  ///< shuffle the rows of (X_i, Y_i) with P_i (step 2)
  /// > 0: the down-sampling defence of paper 004 section 2.3 before step 5: the rows x of X_i
  /// with r(x) = ||x - x F'_i F'_i^+|| / ||x|| < defence_epsilon (dcalign::dr_ratios on the raw
  /// rows, the ratio an affine collusion attacker's per-row error equals) are dropped with their
  /// labels; F'_i and mu_i stay those fitted on all rows. 0: off.
  double defence_epsilon = 0;
};

/// What worker i shares with the master (step 7).
struct Release {
  Matrix<double> data;         ///< X~'_i = P_i (X_i - mu_i) F'_i, n_i x m~
  std::vector<double> labels;  ///< Y~'_i = P_i Y_i
  Matrix<double> anchor;       ///< X~anc_i = (X^anc - mu_i) F'_i, r x m~
};

/// The worker's secrets, for the evaluator of the privacy measurements only (as
/// User::reveal_secret_basis for DC): never part of the protocol, never given to the master.
struct Secrets {
  Matrix<double> basis;         ///< F'_i, m x m~ (orthonormal columns)
  std::vector<double> mean;     ///< mu_i (empty when not centred)
  std::vector<index_t> origin;  ///< origin[k]: the row of X_i that released row k came from
};

/// Steps 2-7 for one worker. F'_i is the top-m~ right singular vectors of X_i + delta E_i
/// (centred when options.center), applied to the clean X_i and to the anchor. E_i and P_i come
/// from `seed` (separate streams, so that switching the permutation off leaves the basis as it
/// is). F'_i, mu_i, E_i and P_i are locals of this call: they go when it returns (step 6), except
/// into `reveal` when given. With options.defence_epsilon > 0 the rows below it are dropped
/// before step 5 (P_i then shuffles the rows kept); a worker that would drop every row throws
/// InvalidInput (it would have nothing to release).
Release worker_release(const Matrix<double>& X, const std::vector<double>& y,
                       const Matrix<double>& anchor, const WorkerOptions& options,
                       std::uint64_t seed, Secrets* reveal = nullptr);

struct MasterOptions {
  AlignOptions align;  ///< the collaboration function (step 9)
  std::string model;   ///< h: "logreg", "mlp", "svm", "knn" or "forest"
  learn::ModelOptions model_options;
  index_t num_classes = 2;
};

/// Steps 8-13: G_i from the released anchors (dcalign::align), h trained on the stacked
/// X~'_i G_i, and Y^anc_i = h(X~anc_i G_i) as hard labels, one vector of r labels per worker
/// in the order of `releases`. That is all that leaves the master. `alignment`, when given,
/// receives step 9's report (its phases time the G_i computation, 004's Tables 4, 8 and 12).
std::vector<std::vector<double>> master(const std::vector<Release>& releases,
                                        const MasterOptions& options, Backend& backend,
                                        AlignReport* alignment = nullptr);

/// A worker's result: its scores on its test data, and whether t_i was the constant predictor.
struct Outcome {
  std::map<std::string, double> scores;
  bool constant = false;
};

/// Steps 14-16: t_i trained on (X^anc, Y^anc_i) in the raw feature space, scored on the
/// worker's test data. When Y^anc_i holds a single class no classifier can be fitted: t_i is the
/// constant predictor of that class (probability 1; ROC-AUC 0.5), and Outcome::constant is set.
Outcome worker_finish(const Matrix<double>& anchor, const std::vector<double>& anchor_labels,
                      const Matrix<double>& X_test, const std::vector<double>& y_test,
                      const std::string& model, const learn::ModelOptions& model_options,
                      index_t num_classes, const std::vector<std::string>& metrics);

}  // namespace dcalign::experiment::nri
