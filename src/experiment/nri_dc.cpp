// NRI-DC (paper 004, Algorithm 1; experiment of section 4.1).
#include "experiment/nri_dc.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "dcalign/random.hpp"
#include "dcalign/user.hpp"
#include "experiment/common.hpp"

namespace dcalign::experiment::nri {
namespace {

// (X - 1 mu^T) F for X n x m, mu of length m (or empty: no shift), F m x k.
Matrix<double> shifted_product(const Matrix<double>& X, const std::vector<double>& mu,
                               const Matrix<double>& F) {
  const index_t n = X.rows(), m = X.cols(), k = F.cols();
  Matrix<double> out(n, k);
  for (index_t q = 0; q < k; ++q)
    for (index_t j = 0; j < m; ++j) {
      const double f = F(j, q), s = mu.empty() ? 0.0 : mu[static_cast<size_t>(j)];
      for (index_t i = 0; i < n; ++i) out(i, q) += (X(i, j) - s) * f;
    }
  return out;
}

}  // namespace

Release worker_release(const Matrix<double>& X, const std::vector<double>& y,
                       const Matrix<double>& anchor, const WorkerOptions& options,
                       std::uint64_t seed, Secrets* reveal) {
  const index_t n = X.rows(), m = X.cols();
  if (static_cast<index_t>(y.size()) != n || anchor.cols() != m)
    throw InvalidInput("nri::worker_release: X is " + std::to_string(n) + " x " +
                       std::to_string(m) + ", y has " + std::to_string(y.size()) +
                       " entries and the anchor " + std::to_string(anchor.cols()) +
                       " columns; expected n labels and m anchor columns");
  if (!(std::isfinite(options.defence_epsilon) && options.defence_epsilon >= 0))
    throw InvalidInput(
        "nri::worker_release: defence_epsilon = " + std::to_string(options.defence_epsilon) +
        " must be a finite number >= 0 (0: no defence)");
  // Steps 3-4: F'_i from the noisy copy X_i + delta E_i (004 sec. 4.1: E_i ~ N(0, 1)).
  Rng noise = Rng::stream(seed, 1);
  Matrix<double> noisy = random_normal<double>(n, m, noise);
  for (index_t j = 0; j < m; ++j)
    for (index_t i = 0; i < n; ++i) noisy(i, j) = X(i, j) + options.delta * noisy(i, j);
  const Matrix<double> F = top_right_singular_vectors(noisy, options.dim, options.center);
  std::vector<double> mu;
  if (options.center) {  // scikit-learn's PCA.transform subtracts the mean it was fitted on
    mu.assign(static_cast<size_t>(m), 0.0);
    for (index_t j = 0; j < m; ++j) {
      for (index_t i = 0; i < n; ++i) mu[static_cast<size_t>(j)] += noisy(i, j);
      mu[static_cast<size_t>(j)] /= static_cast<double>(n);
    }
  }
  // The down-sampling defence: the rows the worker releases, r(x) >= epsilon under F'_i.
  std::vector<index_t> kept(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) kept[static_cast<size_t>(i)] = i;
  if (options.defence_epsilon > 0) kept = defended_rows(X, F, options.defence_epsilon);
  // Step 2's P_i, applied to the rows of (X_i, Y_i) that are released (Fisher-Yates from its own
  // stream): released row k is row order[k] of X_i.
  std::vector<index_t> order = kept;
  if (options.permute) {
    Rng perm_rng = Rng::stream(seed, 2);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[perm_rng.below(i)]);
  }
  // Step 5, on the clean X_i.
  Release r;
  r.data = shifted_product(data::take_rows(X, order), mu, F);
  r.labels = data::take(y, order);
  r.anchor = shifted_product(anchor, mu, F);
  if (reveal) *reveal = Secrets{F, mu, order};
  return r;  // step 6: F, mu, the noisy copy and the permutation end with this call
}

std::vector<std::vector<double>> master(const std::vector<Release>& releases,
                                        const MasterOptions& options, Backend& backend,
                                        AlignReport* alignment) {
  if (releases.empty()) throw InvalidInput("nri::master: no releases");
  const index_t c = static_cast<index_t>(releases.size());
  // Step 9: G_i from the released anchors alone.
  std::vector<Matrix<double>> anchors;
  for (const auto& r : releases) anchors.push_back(r.anchor);
  const auto al = align(Stack<double>::from_matrices(anchors), options.align, backend);
  if (alignment) *alignment = al.report;
  // Steps 10-11: h on the stacked X~'_i G_i.
  std::vector<Matrix<double>> aligned;
  std::vector<std::vector<double>> labels;
  for (index_t i = 0; i < c; ++i) {
    aligned.push_back(apply_change_of_basis(releases[i].data, al.G.matrix(i)));
    labels.push_back(releases[i].labels);
  }
  auto h = learn::make_model(options.model, options.model_options);
  h->fit(vstack(aligned), concat(labels), static_cast<int>(options.num_classes));
  // Step 12-13: only the anchor labels go back.
  std::vector<std::vector<double>> anchor_labels;
  for (index_t i = 0; i < c; ++i)
    anchor_labels.push_back(h->predict(apply_change_of_basis(releases[i].anchor, al.G.matrix(i))));
  return anchor_labels;
}

Outcome worker_finish(const Matrix<double>& anchor, const std::vector<double>& anchor_labels,
                      const Matrix<double>& X_test, const std::vector<double>& y_test,
                      const std::string& model, const learn::ModelOptions& model_options,
                      index_t num_classes, const std::vector<std::string>& metrics) {
  const std::set<double> classes(anchor_labels.begin(), anchor_labels.end());
  Outcome out;
  if (classes.size() < 2) {
    // One class in Y^anc_i: t_i predicts it everywhere, with probability 1 (every score tied).
    if (classes.empty()) throw InvalidInput("nri::worker_finish: no anchor labels");
    const double label = *classes.begin();
    out.constant = true;
    const index_t n = X_test.rows();
    out.scores = score(
        metrics, y_test, num_classes,
        [&] { return std::vector<double>(static_cast<size_t>(n), label); },
        [&] {
          Matrix<double> p(n, num_classes);
          for (index_t i = 0; i < n; ++i) p(i, static_cast<index_t>(label)) = 1.0;
          return p;
        });
    return out;
  }
  auto t = learn::make_model(model, model_options);
  t->fit(anchor, anchor_labels, static_cast<int>(num_classes));
  out.scores = score(*t, X_test, y_test, metrics, num_classes);
  return out;
}

}  // namespace dcalign::experiment::nri
