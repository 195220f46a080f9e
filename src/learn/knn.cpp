// k-nearest neighbours with Euclidean distance, in plain C++ (no BLAS).
//
// Distances use ||q - t||^2 = ||q||^2 + ||t||^2 - 2 q.t. The query's own norm is the same for
// every training point, so the ranking only needs ||t||^2 - 2 q.t. The dot products are
// computed block by block: the training matrix is stored column-major (feature f of all training
// samples is contiguous), so for a block of training samples the inner loop
//   acc[j] += q_f * t_f[j]
// runs over contiguous memory and vectorises without reassociating sums; four queries share
// each load of t_f. Neighbours are ranked by (distance, training index), so ties go to the
// earlier training sample and results are deterministic under any thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "learn/internal.hpp"
#include "learn/model_io.hpp"

namespace dcalign::learn {

namespace {

constexpr index_t kTrainBlock = 512;  // 4 accumulators x 512 doubles = 16 KiB, fits in L1
constexpr index_t kQueryGroup = 4;

class Knn final : public Model {
 public:
  explicit Knn(const ModelOptions& o) : opt_(o) {}
  std::string name() const override { return "knn"; }
  void restore(detail::ModelReader& in);

 protected:
  void fit_impl(const Matrix<double>& X, const std::vector<double>& y) override {
    if (X.rows() < opt_.knn.k)
      throw InvalidInput("knn.fit: k = " + std::to_string(opt_.knn.k) +
                         " neighbours need at least " + std::to_string(opt_.knn.k) +
                         " training samples; got " + std::to_string(X.rows()));
    set_training(X, y);
  }
  std::vector<double> predict_impl(const Matrix<double>& X) const override;
  Matrix<double> predict_proba_impl(const Matrix<double>& X) const override;
  void save_state(detail::ModelState& s) const override {
    s.options["threads"] = opt_.threads;
    s.options["k"] = opt_.knn.k;
    s.add("train", train_);
    s.add("targets", Matrix<double>(train_.rows(), 1, y_));
  }

 private:
  // The training set and the norms that rank the distances; fit and restore both end here.
  void set_training(const Matrix<double>& X, const std::vector<double>& y) {
    train_ = X;
    y_ = y;
    norms_.assign(static_cast<size_t>(X.rows()), 0.0);
    for (index_t f = 0; f < X.cols(); ++f)
      for (index_t j = 0; j < X.rows(); ++j) norms_[static_cast<size_t>(j)] += X(j, f) * X(j, f);
  }

  // Indices of the k nearest training samples of every query, nearest first (m x k, row-major).
  std::vector<index_t> neighbours(const Matrix<double>& Q) const;

  ModelOptions opt_;
  Matrix<double> train_;
  std::vector<double> y_;
  std::vector<double> norms_;
};

std::vector<index_t> Knn::neighbours(const Matrix<double>& Q) const {
  const index_t m = Q.rows(), n = train_.rows(), d = train_.cols();
  const index_t k = opt_.knn.k;
  std::vector<index_t> result(static_cast<size_t>(m * k));
  const index_t groups = (m + kQueryGroup - 1) / kQueryGroup;
  const int threads = detail::resolve_threads(opt_.threads);
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> acc(static_cast<size_t>(kQueryGroup * kTrainBlock));
    // Current k best (distance, index) per query in the group, kept sorted ascending.
    std::vector<double> best_d(static_cast<size_t>(kQueryGroup * k));
    std::vector<index_t> best_i(static_cast<size_t>(kQueryGroup * k));
#pragma omp for schedule(dynamic, 4)
    for (index_t g = 0; g < groups; ++g) {
      const index_t q0 = g * kQueryGroup;
      const index_t nq = std::min(kQueryGroup, m - q0);
      std::fill(best_d.begin(), best_d.end(), std::numeric_limits<double>::infinity());
      std::fill(best_i.begin(), best_i.end(), index_t{-1});
      for (index_t j0 = 0; j0 < n; j0 += kTrainBlock) {
        const index_t nb = std::min(kTrainBlock, n - j0);
        double* a0 = acc.data();
        double* a1 = a0 + kTrainBlock;
        double* a2 = a1 + kTrainBlock;
        double* a3 = a2 + kTrainBlock;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (index_t f = 0; f < d; ++f) {
          const double* t = train_.data() + f * n + j0;
          // Rows past the end of a short last group multiply by zero; cheaper than branching.
          const double c0 = Q(q0, f);
          const double c1 = nq > 1 ? Q(q0 + 1, f) : 0.0;
          const double c2 = nq > 2 ? Q(q0 + 2, f) : 0.0;
          const double c3 = nq > 3 ? Q(q0 + 3, f) : 0.0;
          for (index_t j = 0; j < nb; ++j) {
            const double tv = t[j];
            a0[j] += c0 * tv;
            a1[j] += c1 * tv;
            a2[j] += c2 * tv;
            a3[j] += c3 * tv;
          }
        }
        for (index_t q = 0; q < nq; ++q) {
          const double* a = acc.data() + q * kTrainBlock;
          double* bd = best_d.data() + q * k;
          index_t* bi = best_i.data() + q * k;
          for (index_t j = 0; j < nb; ++j) {
            const double dist = norms_[static_cast<size_t>(j0 + j)] - 2.0 * a[j];
            // Strict comparison: a later sample at an equal distance never displaces an
            // earlier one, so ties resolve to the lower training index.
            if (!(dist < bd[k - 1])) continue;
            index_t p = k - 1;
            while (p > 0 && dist < bd[p - 1]) {
              bd[p] = bd[p - 1];
              bi[p] = bi[p - 1];
              --p;
            }
            bd[p] = dist;
            bi[p] = j0 + j;
          }
        }
      }
      for (index_t q = 0; q < nq; ++q)
        std::copy(best_i.begin() + q * k, best_i.begin() + (q + 1) * k,
                  result.begin() + (q0 + q) * k);
    }
  }
  return result;
}

std::vector<double> Knn::predict_impl(const Matrix<double>& X) const {
  const index_t m = X.rows(), k = opt_.knn.k;
  const auto nb = neighbours(X);
  std::vector<double> out(static_cast<size_t>(m));
  std::vector<int> votes(static_cast<size_t>(std::max(num_classes_, 1)));
  for (index_t i = 0; i < m; ++i) {
    const index_t* idx = nb.data() + i * k;
    if (num_classes_ == 0) {
      double s = 0.0;
      for (index_t r = 0; r < k; ++r) s += y_[static_cast<size_t>(idx[r])];
      out[static_cast<size_t>(i)] = s / static_cast<double>(k);
      continue;
    }
    std::fill(votes.begin(), votes.end(), 0);
    int top = 0;
    for (index_t r = 0; r < k; ++r)
      top = std::max(top, ++votes[static_cast<size_t>(y_[static_cast<size_t>(idx[r])])]);
    // Majority vote; among tied classes the one of the nearest neighbour wins.
    for (index_t r = 0; r < k; ++r) {
      const double c = y_[static_cast<size_t>(idx[r])];
      if (votes[static_cast<size_t>(c)] == top) {
        out[static_cast<size_t>(i)] = c;
        break;
      }
    }
  }
  return out;
}

Matrix<double> Knn::predict_proba_impl(const Matrix<double>& X) const {
  const index_t m = X.rows(), k = opt_.knn.k;
  const auto nb = neighbours(X);
  Matrix<double> proba(m, num_classes_);
  // Counts first, one division last, so that each row sums to one up to a single rounding.
  for (index_t i = 0; i < m; ++i)
    for (index_t r = 0; r < k; ++r) {
      const double c = y_[static_cast<size_t>(nb[static_cast<size_t>(i * k + r)])];
      proba(i, static_cast<index_t>(c)) += 1.0;
    }
  for (auto* p = proba.data(); p != proba.data() + proba.size(); ++p) *p /= static_cast<double>(k);
  return proba;
}

void Knn::restore(detail::ModelReader& in) {
  const Matrix<double>& X = in.f64("train");
  const Matrix<double>& y = in.f64("targets");
  const index_t n = X.rows(), k = opt_.knn.k;
  const int classes = in.num_classes();
  if (X.cols() != in.num_features())
    in.fail_parameter("train",
                      "has " + std::to_string(X.cols()) +
                          " columns; expected num_features = " + std::to_string(in.num_features()));
  if (n < k)
    in.fail_parameter("train", "has " + std::to_string(n) +
                                   " rows, fewer than k = " + std::to_string(k) + " neighbours");
  if (y.rows() != n || y.cols() != 1)
    in.fail_parameter("targets", "is " + std::to_string(y.rows()) + " x " +
                                     std::to_string(y.cols()) + "; expected " + std::to_string(n) +
                                     " x 1, one per row of train");
  std::vector<double> targets(y.data(), y.data() + n);
  for (index_t i = 0; i < n && classes > 0; ++i) {
    const double c = targets[static_cast<size_t>(i)];
    if (!(c >= 0 && c < classes && c == std::floor(c)))
      in.fail_parameter("targets", "has " + detail::number_text(c) + " in row " +
                                       std::to_string(i) + "; expected a class index in 0.." +
                                       std::to_string(classes - 1));
  }
  set_training(X, targets);
  set_trained(classes, in.num_features());
  info_ = in.fit_info();
}

}  // namespace

namespace detail {
std::unique_ptr<Model> make_knn(const ModelOptions& options) {
  return std::make_unique<Knn>(options);
}

std::unique_ptr<Model> restore_knn(ModelReader& in) {
  const Json& o = in.options({"threads", "k"});
  ModelOptions options;
  options.threads = in.threads(o);
  options.knn.k = in.int_option(o, "k", 1);
  in.check_options("knn", options);
  auto model = std::make_unique<Knn>(options);
  model->restore(in);
  return model;
}
}  // namespace detail

}  // namespace dcalign::learn
