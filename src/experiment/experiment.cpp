// The DC protocol runner (paper 001, Algorithm 1 and section 7).
#include "dcalign/experiment.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "dcalign/align.hpp"
#include "dcalign/data.hpp"
#include "dcalign/random.hpp"

namespace dcalign::experiment {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const std::set<std::string> kAlignMethods = {"odc", "imakura", "kawakami", "gopp"};
const std::set<std::string> kBaselines = {"central", "local"};
const std::set<std::string> kModels = {"svm", "mlp", "logreg", "knn"};
const std::set<std::string> kMetrics = {"accuracy", "roc_auc", "pr_auc", "rmse"};
const std::set<std::string> kPartitions = {"iid", "label-skew", "dirichlet"};

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

void check_names(const std::vector<std::string>& given, const std::set<std::string>& known,
                 const char* what) {
  if (given.empty()) throw InvalidInput(std::string("experiment: no ") + what + " given");
  for (const auto& g : given)
    if (!known.count(g))
      throw InvalidInput(std::string("experiment: unknown ") + what + " '" + g +
                         "'; expected one of: " + join(known));
}

Matrix<double> vstack(const std::vector<Matrix<double>>& parts) {
  index_t rows = 0;
  for (const auto& p : parts) rows += p.rows();
  const index_t cols = parts.empty() ? 0 : parts[0].cols();
  Matrix<double> out(rows, cols);
  index_t r0 = 0;
  for (const auto& p : parts) {
    for (index_t j = 0; j < cols; ++j)
      std::copy(p.data() + j * p.rows(), p.data() + (j + 1) * p.rows(), &out(r0, j));
    r0 += p.rows();
  }
  return out;
}

std::vector<double> concat(const std::vector<std::vector<double>>& parts) {
  std::vector<double> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::uint64_t derive(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) {
  Rng r = Rng::stream(seed, a * 1000003ULL + b);
  return r.next();
}

std::string machine_description() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
}

// A clearly artificial stand-in used when no real data is available: 10 Gaussian classes in
// 64 features whose means lie in a 16-dimensional subspace, 6000 training and 2000 test samples.
data::TrainTest synthetic_dataset(std::uint64_t seed) {
  const index_t m = 64, k = 10, r = 16, n_train = 6000, n_test = 2000;
  Rng rng(seed);
  const Matrix<double> basis = random_normal<double>(r, m, rng);
  const Matrix<double> centres = random_normal<double>(k, r, rng);
  auto draw = [&](index_t n, const char* name) {
    data::Dataset d;
    d.name = name;
    d.num_classes = k;
    d.X = Matrix<double>(n, m);
    d.y.resize(static_cast<size_t>(n));
    for (index_t i = 0; i < n; ++i) {
      const index_t cls = static_cast<index_t>(rng.below(k));
      d.y[i] = static_cast<double>(cls);
      std::vector<double> z(r);
      for (index_t q = 0; q < r; ++q) z[q] = 1.5 * centres(cls, q) + rng.normal();
      for (index_t j = 0; j < m; ++j) {
        double v = 0.5 * rng.normal();
        for (index_t q = 0; q < r; ++q) v += z[q] * basis(q, j) / 4.0;
        d.X(i, j) = v;
      }
    }
    for (index_t j = 0; j < m; ++j) d.feature_names.push_back("x" + std::to_string(j));
    for (index_t c = 0; c < k; ++c) d.class_names.push_back("class " + std::to_string(c));
    return d;
  };
  data::TrainTest tt;
  tt.train = draw(n_train, "synthetic");
  tt.test = draw(n_test, "synthetic");
  return tt;
}

struct Split {
  std::vector<Matrix<double>> X, Y;        // per user: training and test features
  std::vector<std::vector<double>> y, yY;  // labels
};

class Runner {
 public:
  Runner(const Config& c, const Progress& progress) : c_(c), progress_(progress) {}

  Result run() {
    const auto t0 = Clock::now();
    validate_names();
    load();
    validate_sizes();
    backend_ = make_backend(parse_device(c_.device));
    Result res;
    res.config = c_;
    res.machine = machine_description();
    for (index_t t = 0; t < c_.trials; ++t) {
      const double el = since(t0);
      if (progress_) {
        std::ostringstream os;
        os << "trial " << (t + 1) << " of " << c_.trials << ", elapsed " << static_cast<int>(el)
           << " s";
        if (t > 0) os << ", estimated " << static_cast<int>(el / t * (c_.trials - t)) << " s left";
        progress_(os.str());
      }
      trial(t, res.records);
    }
    res.wall_seconds = since(t0);
    return res;
  }

 private:
  void validate_names() {
    // Before any work: the name becomes the output files' names (write_outputs checks again).
    if (const auto why = experiment_name_problem(c_.name); !why.empty())
      throw InvalidInput("experiment name \"" + c_.name + "\" " + why +
                         "; it must be a single plain file name");
    std::set<std::string> all = kAlignMethods;
    all.insert(kBaselines.begin(), kBaselines.end());
    check_names(c_.methods, all, "method");
    check_names(c_.models, kModels, "model");
    check_names(c_.metrics, kMetrics, "metric");
    if (!kPartitions.count(c_.partition))
      throw InvalidInput("experiment: unknown partition '" + c_.partition +
                         "'; expected one of: " + join(kPartitions));
    anchor_kind_ = parse_anchor_kind(c_.anchor);
    parse_device(c_.device);
    if (c_.trials < 1 || c_.users < 1 || c_.samples_per_user < 1 || c_.anchor_rows < 1)
      throw InvalidInput(
          "experiment: trials, users, samples_per_user and anchor_rows must be >= 1");
    if (c_.conditions.empty()) throw InvalidInput("experiment: no conditions given");
    if (c_.dataset != "synthetic")
      data::dataset_files(c_.dataset);  // unknown names throw with the list of known ones
  }

  void load() {
    data::LoadOptions lo;
    lo.data_dir = c_.data_dir;
    lo.verify_checksums = c_.verify_checksums;
    if (progress_)
      progress_(c_.dataset == "synthetic"
                    ? std::string("dataset 'synthetic': ARTIFICIAL Gaussian classes, not real data")
                    : "loading " + c_.dataset);
    auto tt = c_.dataset == "synthetic" ? synthetic_dataset(derive(c_.seed, 3))
                                        : data::load_dataset(c_.dataset, lo);
    train_ = std::move(tt.train);
    test_ = std::move(tt.test);
    if (test_.samples() == 0) {
      if (c_.test_samples < 1)
        throw InvalidInput("experiment: dataset '" + c_.dataset +
                           "' has no official test split; set test_samples");
      if (c_.test_samples >= train_.samples())
        throw InvalidInput("experiment: test_samples = " + std::to_string(c_.test_samples) +
                           " leaves no training data (dataset has " +
                           std::to_string(train_.samples()) + " samples)");
      auto split = data::random_split(train_, c_.test_samples, derive(c_.seed, 7));
      train_ = std::move(split.train);
      test_ = std::move(split.test);
      fixed_test_ = true;
    }
  }

  void validate_sizes() {
    const index_t m = train_.features();
    l_ = c_.dim > 0 ? c_.dim : static_cast<index_t>(std::floor(c_.dim_fraction * m));
    if (l_ < 1) throw InvalidInput("experiment: dim must be >= 1 (or dim_fraction > 0)");
    if (l_ > m)
      throw InvalidInput("experiment: dim l = " + std::to_string(l_) + " exceeds the " +
                         std::to_string(m) + " features m of '" + c_.dataset + "'");
    if (l_ > c_.samples_per_user)
      throw InvalidInput("experiment: dim l = " + std::to_string(l_) +
                         " exceeds samples_per_user = " + std::to_string(c_.samples_per_user) +
                         " (a user's top-l singular vectors need l <= n_i)");
    if (l_ > c_.anchor_rows)
      throw InvalidInput("experiment: dim l = " + std::to_string(l_) +
                         " exceeds anchor_rows = " + std::to_string(c_.anchor_rows));
    const index_t need = c_.users * c_.samples_per_user;
    if (need > train_.samples())
      throw InvalidInput("experiment: " + std::to_string(c_.users) + " users x " +
                         std::to_string(c_.samples_per_user) + " samples = " +
                         std::to_string(need) + " exceed the " + std::to_string(train_.samples()) +
                         " training samples of '" + c_.dataset + "'");
    if (!fixed_test_ && c_.test_samples > test_.samples())
      throw InvalidInput("experiment: test_samples = " + std::to_string(c_.test_samples) +
                         " exceeds the " + std::to_string(test_.samples()) + " test samples");
    const bool regression = train_.num_classes == 0;
    for (const auto& m : c_.metrics) {
      if (regression && m != "rmse")
        throw InvalidInput("experiment: metric '" + m + "' needs a classification dataset");
      if (!regression && m == "rmse")
        throw InvalidInput("experiment: metric 'rmse' needs a regression dataset");
    }
    n_test_ = fixed_test_ || c_.test_samples == 0 ? test_.samples() : c_.test_samples;
    if (n_test_ < c_.users)
      throw InvalidInput("experiment: " + std::to_string(n_test_) +
                         " test samples cannot be split among " + std::to_string(c_.users) +
                         " users");
  }

  Split make_split(index_t t) {
    const std::uint64_t s = derive(c_.seed, 11, static_cast<std::uint64_t>(t));
    data::Partition part;
    if (c_.partition == "iid")
      part = data::partition_iid(train_.samples(), c_.users, c_.samples_per_user, s);
    else if (c_.partition == "label-skew")
      part = data::partition_label_skew(train_.y, train_.num_classes, c_.users, c_.samples_per_user,
                                        s);
    else
      part = data::partition_dirichlet(train_.y, train_.num_classes, c_.users, c_.samples_per_user,
                                       c_.dirichlet_alpha, s);
    std::vector<index_t> test_idx;
    if (n_test_ == test_.samples()) {
      test_idx.resize(static_cast<size_t>(n_test_));
      for (index_t i = 0; i < n_test_; ++i) test_idx[i] = i;
    } else {
      test_idx = data::partition_iid(test_.samples(), 1, n_test_, derive(s, 1))[0];
    }
    const auto shares = data::partition_even(n_test_, c_.users, derive(s, 2));
    Split sp;
    for (index_t i = 0; i < c_.users; ++i) {
      sp.X.push_back(data::take_rows(train_.X, part[i]));
      sp.y.push_back(data::take(train_.y, part[i]));
      std::vector<index_t> mine;
      for (index_t k : shares[i]) mine.push_back(test_idx[k]);
      sp.Y.push_back(data::take_rows(test_.X, mine));
      sp.yY.push_back(data::take(test_.y, mine));
    }
    return sp;
  }

  std::unique_ptr<learn::Model> model(const std::string& kind, std::uint64_t seed) const {
    learn::ModelOptions mo = c_.model_options;
    mo.seed = seed;
    mo.device = c_.device;
    mo.threads = c_.threads;
    for (const auto& m : c_.metrics)
      if (m == "roc_auc" || m == "pr_auc") mo.svm.probability = true;
    return learn::make_model(kind, mo);
  }

  double evaluate_one(const learn::Model& h, const Matrix<double>& Y, const std::vector<double>& y,
                      const std::string& metric) const {
    return evaluate(h, Y, y, {metric}).at(metric);
  }

  std::map<std::string, double> evaluate(const learn::Model& h, const Matrix<double>& Y,
                                         const std::vector<double>& y) const {
    return evaluate(h, Y, y, c_.metrics);
  }

  std::map<std::string, double> evaluate(const learn::Model& h, const Matrix<double>& Y,
                                         const std::vector<double>& y,
                                         const std::vector<std::string>& metrics) const {
    std::map<std::string, double> out;
    const bool binary = train_.num_classes == 2;
    Matrix<double> proba;
    for (const auto& m : metrics) {
      if (m == "accuracy") {
        out[m] = learn::accuracy(y, h.predict(Y));
      } else if (m == "rmse") {
        out[m] = learn::rmse(y, h.predict(Y));
      } else {
        if (proba.size() == 0) proba = h.predict_proba(Y);
        if (binary) {
          std::vector<double> score(static_cast<size_t>(Y.rows()));
          for (index_t i = 0; i < Y.rows(); ++i) score[i] = proba(i, 1);
          out[m] = m == "roc_auc" ? learn::roc_auc(y, score) : learn::average_precision(y, score);
        } else {
          out[m] = m == "roc_auc" ? learn::roc_auc_ovr(y, proba)
                                  : learn::average_precision_ovr(y, proba);
        }
      }
    }
    return out;
  }

  void fit_and_record(index_t t, const std::string& cond, const std::string& method,
                      const Matrix<double>& X, const std::vector<double>& y,
                      const Matrix<double>& Y, const std::vector<double>& yY,
                      std::vector<Record>& out) {
    for (const auto& kind : c_.models) {
      const auto t0 = Clock::now();
      auto h = model(kind, derive(c_.seed, 13, static_cast<std::uint64_t>(t)));
      h->fit(X, y, static_cast<int>(train_.num_classes));
      const auto values = evaluate(*h, Y, yY);
      const double secs = since(t0);
      for (const auto& [metric, v] : values)
        out.push_back({t, cond, method, kind, metric, v, secs});
    }
  }

  void trial(index_t t, std::vector<Record>& out) {
    const Split sp = make_split(t);
    const auto want = [&](const char* m) {
      return std::find(c_.methods.begin(), c_.methods.end(), m) != c_.methods.end();
    };
    if (want("central"))
      fit_and_record(t, "-", "central", vstack(sp.X), concat(sp.y), vstack(sp.Y), concat(sp.yY),
                     out);
    if (want("local")) local(t, sp, out);

    const Matrix<double> A = make_anchor<double>(c_.anchor_rows, train_.features(), anchor_kind_,
                                                 derive(c_.seed, 17, t));
    for (SpanCondition cond : c_.conditions) {
      std::vector<User<double>> users;
      const Mixing mixing = orthonormal_mixing(cond) ? Mixing::haar : Mixing::uniform;
      Matrix<double> v1;
      if (shares_span(cond)) v1 = top_right_singular_vectors(sp.X[0], l_, c_.center);
      std::vector<Matrix<double>> released, projected_test, anchors;
      for (index_t i = 0; i < c_.users; ++i) {
        users.emplace_back(sp.X[i], "user " + std::to_string(i));
        const std::uint64_t s = derive(c_.seed, 19, static_cast<std::uint64_t>(t) * 4096 + i);
        if (shares_span(cond))
          users.back().choose_secret_basis_in(v1, mixing, s);
        else
          users.back().choose_secret_basis(l_, mixing, s, c_.center);
        released.push_back(users.back().release_data());
        anchors.push_back(users.back().release_anchor(A));
        // "own": each user maps its test share (paper eq. 9); "first": user 1 holds the whole
        // test set and maps it with F_1 G_1.
        if (c_.test_holder == "own")
          projected_test.push_back(users.back().project(sp.Y[i]));
        else if (i == 0)
          projected_test.push_back(users.back().project(vstack(sp.Y)));
      }
      const Stack<double> stack = Stack<double>::from_matrices(anchors);
      for (const auto& method : c_.methods) {
        if (!kAlignMethods.count(method)) continue;
        AlignOptions ao;
        ao.method = parse_method(method);
        ao.seed = derive(c_.seed, 23, t);
        ao.evaluate = false;
        ao.rotation = parse_target_rotation(c_.odc_rotation);
        ao.right = parse_right_factor(c_.imakura_right);
        const auto al = align(stack, ao, *backend_);
        std::vector<Matrix<double>> Xh, Yh;
        for (index_t i = 0; i < c_.users; ++i) {
          const Matrix<double> G = al.G.matrix(i);
          Xh.push_back(apply_change_of_basis(released[i], G));
          if (i < static_cast<index_t>(projected_test.size()))
            Yh.push_back(apply_change_of_basis(projected_test[i], G));
        }
        fit_and_record(t, to_string(cond), method, vstack(Xh), concat(sp.y), vstack(Yh),
                       concat(sp.yY), out);
      }
    }
  }

  // Each user alone on its own data, evaluated on its own test share; mean over users. A
  // user whose training data hold a single class cannot fit a classifier and is left out.
  void local(index_t t, const Split& sp, std::vector<Record>& out) {
    // With test_holder = "first", only user 1's model is scored, on the whole test set.
    const bool first = c_.test_holder == "first";
    const index_t scored = first ? 1 : c_.users;
    const Matrix<double> Y_all = first ? vstack(sp.Y) : Matrix<double>();
    const std::vector<double> y_all = first ? concat(sp.yY) : std::vector<double>();
    for (const auto& kind : c_.models) {
      const auto t0 = Clock::now();
      std::map<std::string, std::vector<double>> per_metric;
      for (index_t i = 0; i < scored; ++i) {
        if (train_.num_classes > 0) {
          const std::set<double> classes(sp.y[i].begin(), sp.y[i].end());
          if (classes.size() < 2) continue;
        }
        auto h = model(kind, derive(c_.seed, 29, static_cast<std::uint64_t>(t) * 4096 + i));
        h->fit(sp.X[i], sp.y[i], static_cast<int>(train_.num_classes));
        // A user's test share may hold a single class, where ROC-AUC and PR-AUC are undefined
        // (the metrics refuse it); such users are left out of that metric's mean.
        for (const auto& metric : c_.metrics) {
          try {
            const double v = first ? evaluate_one(*h, Y_all, y_all, metric)
                                   : evaluate_one(*h, sp.Y[i], sp.yY[i], metric);
            if (std::isfinite(v)) per_metric[metric].push_back(v);
          } catch (const InvalidInput&) {
            if (metric != "roc_auc" && metric != "pr_auc") throw;
          }
        }
      }
      const double secs = since(t0);
      for (const auto& [metric, vals] : per_metric) {
        double mean = 0;
        for (double v : vals) mean += v;
        out.push_back(
            {t, "-", "local", kind, metric, mean / static_cast<double>(vals.size()), secs});
      }
      if (per_metric.empty() && progress_)
        progress_("local baseline skipped for " + kind + ": no user holds two classes");
    }
  }

  const Config& c_;
  const Progress& progress_;
  data::Dataset train_, test_;
  bool fixed_test_ = false;
  index_t l_ = 0, n_test_ = 0;
  AnchorKind anchor_kind_ = AnchorKind::uniform;
  std::shared_ptr<Backend> backend_;
};

std::string percent_or_raw(const std::string& metric, double v) {
  char buf[64];
  if (metric == "rmse")
    std::snprintf(buf, sizeof buf, "%.4f", v);
  else
    std::snprintf(buf, sizeof buf, "%.1f", 100 * v);
  return buf;
}

}  // namespace

Result run(const Config& config, const Progress& progress) {
  return Runner(config, progress).run();
}

std::string summary_table(const Result& r) {
  const auto& c = r.config;
  // (condition, method, model, metric) -> values over trials
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<double>> g;
  for (const auto& rec : r.records)
    g[{rec.condition, rec.method, rec.model, rec.metric}].push_back(rec.value);
  auto cell = [&](const std::string& cond, const std::string& method, const std::string& model,
                  const std::string& metric, bool with_ci) -> std::string {
    auto it = g.find({cond, method, model, metric});
    if (it == g.end()) return "n/a";
    const auto s = learn::summarize(it->second);
    std::string out = percent_or_raw(metric, s.mean);
    if (with_ci && s.count > 1) {
      const double hw = metric == "rmse" ? s.half_width : 100 * s.half_width;
      char buf[32];
      std::snprintf(buf, sizeof buf, metric == "rmse" ? " ± %.4f" : " ± %.1f", hw);
      out += buf;
    }
    return out;
  };
  std::vector<std::string> dc;
  for (const auto& m : c.methods)
    if (kAlignMethods.count(m)) dc.push_back(m);
  std::ostringstream os;
  for (const auto& metric : c.metrics) {
    os << "### " << c.dataset << ", " << metric << (metric == "rmse" ? "" : " (%)") << ", "
       << c.trials << " trial(s), mean";
    if (c.trials > 1) os << " ± 95% CI";
    os << "\n\nDC cells list ";
    for (size_t k = 0; k < dc.size(); ++k) os << (k ? " / " : "") << dc[k];
    os << ".\n\n| model |";
    for (auto cond : c.conditions) os << " " << to_string(cond) << " |";
    os << " Central | Local |\n|---|";
    for (size_t k = 0; k < c.conditions.size() + 2; ++k) os << "---|";
    os << "\n";
    for (const auto& model : c.models) {
      os << "| " << model << " |";
      for (auto cond : c.conditions) {
        os << " ";
        for (size_t k = 0; k < dc.size(); ++k)
          os << (k ? " / " : "") << cell(to_string(cond), dc[k], model, metric, dc.size() == 1);
        os << " |";
      }
      os << " " << cell("-", "central", model, metric, true) << " | "
         << cell("-", "local", model, metric, true) << " |\n";
    }
    if (dc.size() > 1 && c.trials > 1) {
      os << "\nHalf-widths of the 95% CIs of the DC cells:\n\n| model |";
      for (auto cond : c.conditions) os << " " << to_string(cond) << " |";
      os << "\n|---|";
      for (size_t k = 0; k < c.conditions.size(); ++k) os << "---|";
      os << "\n";
      for (const auto& model : c.models) {
        os << "| " << model << " |";
        for (auto cond : c.conditions) {
          os << " ";
          for (size_t k = 0; k < dc.size(); ++k) {
            auto it = g.find({to_string(cond), dc[k], model, metric});
            const double hw = it == g.end() ? NAN : learn::summarize(it->second).half_width;
            os << (k ? " / " : "") << percent_or_raw(metric, hw);
          }
          os << " |";
        }
        os << "\n";
      }
    }
    os << "\n";
  }
  return os.str();
}

void write_outputs(const Result& r, const std::string& dir) {
  if (const auto why = experiment_name_problem(r.config.name); !why.empty())
    throw InvalidInput("experiment name \"" + r.config.name + "\" " + why +
                       "; it must be a single plain file name");
  const std::string base = dir + "/" + r.config.name;
  nlohmann::ordered_json j;
  const auto& c = r.config;
  j["name"] = c.name;
  j["source"] = c.source;
  j["machine"] = r.machine;
  j["wall_seconds"] = r.wall_seconds;
  nlohmann::ordered_json cfg;
  cfg["dataset"] = c.dataset;
  cfg["partition"] = c.partition;
  cfg["users"] = c.users;
  cfg["samples_per_user"] = c.samples_per_user;
  cfg["test_samples"] = c.test_samples;
  cfg["anchor_rows"] = c.anchor_rows;
  cfg["anchor"] = c.anchor;
  cfg["dim"] = c.dim;
  cfg["dim_fraction"] = c.dim_fraction;
  cfg["center"] = c.center;
  cfg["odc_rotation"] = c.odc_rotation;
  cfg["imakura_right"] = c.imakura_right;
  cfg["test_holder"] = c.test_holder;
  std::vector<std::string> conds;
  for (auto cond : c.conditions) conds.push_back(to_string(cond));
  cfg["conditions"] = conds;
  cfg["methods"] = c.methods;
  cfg["models"] = c.models;
  cfg["metrics"] = c.metrics;
  cfg["trials"] = c.trials;
  cfg["seed"] = c.seed;
  cfg["device"] = c.device;
  j["config"] = cfg;
  nlohmann::ordered_json recs = nlohmann::ordered_json::array();
  for (const auto& rec : r.records)
    recs.push_back({{"trial", rec.trial},
                    {"condition", rec.condition},
                    {"method", rec.method},
                    {"model", rec.model},
                    {"metric", rec.metric},
                    {"value", rec.value},
                    {"seconds", rec.seconds}});
  j["records"] = recs;
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream f(path);
    if (!f) throw IoError("cannot write '" + path + "'");
    f << text;
    if (!f) throw IoError("writing '" + path + "' failed");
  };
  write(base + ".json", j.dump(2) + "\n");
  std::ostringstream csv;
  csv << "trial,condition,method,model,metric,value,seconds\n";
  for (const auto& rec : r.records)
    csv << rec.trial << "," << rec.condition << "," << rec.method << "," << rec.model << ","
        << rec.metric << "," << rec.value << "," << rec.seconds << "\n";
  write(base + ".csv", csv.str());
  std::ostringstream md;
  md << "# " << c.name << "\n\nMachine: " << r.machine << ". Wall time: " << r.wall_seconds
     << " s. Command: `dcalign experiment " << (c.source.empty() ? "<config>" : c.source);
  if (!c.source.empty()) md << " --trials " << c.trials << " --device " << c.device;
  md << "`.\n\n" << summary_table(r);
  write(base + ".md", md.str());
}

}  // namespace dcalign::experiment
