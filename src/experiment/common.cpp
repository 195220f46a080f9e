#include "experiment/common.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "dcalign/error.hpp"
#include "dcalign/privacy_attacks.hpp"
#include "dcalign/random.hpp"

namespace dcalign::experiment {

namespace {
/// Dirichlet skew of a regression dataset is over its target's deciles (data::quantile_bins).
constexpr index_t kTargetBins = 10;
}  // namespace

void standardize_aligned(Matrix<double>& train, Matrix<double>& test) {
  std::vector<index_t> all(static_cast<size_t>(train.cols()));
  for (index_t j = 0; j < train.cols(); ++j) all[static_cast<size_t>(j)] = j;
  const data::Standardizer st = data::Standardizer::fit(train, all);
  st.apply(train);
  if (test.rows() > 0) st.apply(test);
}

std::vector<index_t> defended_rows(const Matrix<double>& X, const Matrix<double>& F,
                                   double epsilon) {
  const std::vector<double> ratios = dr_ratios(X, F);
  std::vector<index_t> kept = dr_downsample(ratios, epsilon);
  if (kept.empty()) {
    std::ostringstream os;
    os << "the down-sampling defence at epsilon = " << epsilon << " drops all " << X.rows()
       << " rows (the largest ratio ||x - x F F^+|| / ||x|| is "
       << *std::max_element(ratios.begin(), ratios.end()) << "), leaving nothing to release";
    throw InvalidInput(os.str());
  }
  return kept;
}

std::vector<double> concat(const std::vector<std::vector<double>>& parts) {
  std::vector<double> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::uint64_t derive(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  Rng r = Rng::stream(seed, a * 1000003ULL + b);
  return r.next();
}

Split draw_split(const Config& c, const data::Dataset& pool, const data::Dataset& test_in,
                 index_t n_test, index_t trial) {
  const std::uint64_t s = derive(c.seed, 11, static_cast<std::uint64_t>(trial));
  // Paper 004's subsample: the trial's rows of the pool, from a stream of its own (so the draws
  // below are those of a run without a subsample when it is off).
  data::Dataset sub;
  if (c.subsample > 0)
    sub = data::take(pool, data::subsample(pool.y, pool.num_classes, c.subsample,
                                           c.subsample_stratified, derive(s, 4)));
  const data::Dataset& train_in = c.subsample > 0 ? sub : pool;
  data::TrainTest own;
  const bool split_per_trial = test_in.samples() == 0;
  if (split_per_trial) own = data::random_split(train_in, n_test, derive(s, 3));
  const data::Dataset& train = split_per_trial ? own.train : train_in;
  const data::Dataset& test = split_per_trial ? own.test : test_in;
  data::Partition part;
  // Vertical partitions draw iid rows; "vertical-joined" draws them for the c/2 pairs.
  const index_t holders = row_holders(c);
  if (c.partition == "iid" || c.partition == "vertical" || c.partition == "vertical-joined")
    part = data::partition_iid(train.samples(), holders, c.samples_per_user, s);
  else if (c.partition == "label-skew")
    part = data::partition_label_skew(train.y, train.num_classes, c.users, c.samples_per_user, s);
  else if (train.num_classes > 0)
    part = data::partition_dirichlet(train.y, train.num_classes, c.users, c.samples_per_user,
                                     c.dirichlet_alpha, s);
  else  // regression: the skew is over the target's deciles
    part = data::partition_dirichlet(data::quantile_bins(train.y, kTargetBins), kTargetBins,
                                     c.users, c.samples_per_user, c.dirichlet_alpha, s);
  std::vector<index_t> test_idx;
  if (n_test == test.samples()) {
    test_idx.resize(static_cast<size_t>(n_test));
    for (index_t i = 0; i < n_test; ++i) test_idx[static_cast<size_t>(i)] = i;
  } else {
    test_idx = data::partition_iid(test.samples(), 1, n_test, derive(s, 1))[0];
  }
  const auto shares = data::partition_even(n_test, holders, derive(s, 2));
  Split sp;
  for (index_t i = 0; i < holders; ++i) {
    sp.X.push_back(data::take_rows(train.X, part[static_cast<size_t>(i)]));
    sp.y.push_back(data::take(train.y, part[static_cast<size_t>(i)]));
    std::vector<index_t> mine;
    for (index_t k : shares[static_cast<size_t>(i)])
      mine.push_back(test_idx[static_cast<size_t>(k)]);
    sp.Y.push_back(data::take_rows(test.X, mine));
    sp.yY.push_back(data::take(test.y, mine));
  }
  return sp;
}

std::map<std::string, double> score(const std::vector<std::string>& metrics,
                                    const std::vector<double>& y, index_t num_classes,
                                    const std::function<std::vector<double>()>& predict,
                                    const std::function<Matrix<double>()>& proba) {
  std::map<std::string, double> out;
  std::vector<double> labels;
  Matrix<double> p;
  bool have_labels = false;
  for (const auto& m : metrics) {
    if (m == "accuracy" || m == "rmse") {
      if (!have_labels) labels = predict();
      have_labels = true;
      out[m] = m == "accuracy" ? learn::accuracy(y, labels) : learn::rmse(y, labels);
    } else {
      if (p.size() == 0) p = proba();
      if (num_classes == 2) {
        std::vector<double> s(static_cast<size_t>(p.rows()));
        for (index_t i = 0; i < p.rows(); ++i) s[static_cast<size_t>(i)] = p(i, 1);
        out[m] = m == "roc_auc" ? learn::roc_auc(y, s) : learn::average_precision(y, s);
      } else {
        out[m] = m == "roc_auc" ? learn::roc_auc_ovr(y, p) : learn::average_precision_ovr(y, p);
      }
    }
  }
  return out;
}

std::map<std::string, double> score(const learn::Model& h, const Matrix<double>& X,
                                    const std::vector<double>& y,
                                    const std::vector<std::string>& metrics, index_t num_classes) {
  return score(
      metrics, y, num_classes, [&] { return h.predict(X); }, [&] { return h.predict_proba(X); });
}

learn::ModelOptions trial_model_options(const Config& c, std::uint64_t seed) {
  learn::ModelOptions mo = c.model_options;
  mo.seed = seed;
  mo.device = c.device;
  mo.threads = 1;  // every task on one thread; Config::threads counts the workers
  for (const auto& m : c.metrics)
    if (m == "roc_auc" || m == "pr_auc") mo.svm.probability = true;
  return mo;
}

}  // namespace dcalign::experiment
