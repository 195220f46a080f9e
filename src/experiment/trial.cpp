// The trial protocols: DC (paper 001, Algorithm 1 and section 7) per secret-basis condition,
// NRI-DC (paper 004, Algorithm 1 and section 4.1; its three steps are in nri_dc.cpp), and the
// Central and Local baselines; the models fitted and scored on what each produces.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "dcalign/privacy.hpp"
#include "dcalign/random.hpp"
#include "experiment/nri_dc.hpp"
#include "experiment/runner.hpp"

namespace dcalign::experiment::detail {
namespace {

// Whether the labels hold every one of the K classes (the AUC metrics need that).
bool all_classes(const std::vector<double>& y, index_t num_classes) {
  return static_cast<index_t>(std::set<double>(y.begin(), y.end()).size()) >= num_classes;
}

// The first k columns of V (column-major: one contiguous block).
Matrix<double> leading_columns(const Matrix<double>& V, index_t k) {
  Matrix<double> out(V.rows(), k);
  std::copy(V.data(), V.data() + V.rows() * k, out.data());
  return out;
}

}  // namespace

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

// The devices, before any data is read: the alignment backend (the CUDA one fails without a
// GPU) and, for the LibTorch models (the MLP also inside FedAvg), LibTorch's own device check,
// whose error names a CPU-only LibTorch or a missing GPU.
void Runner::open_devices() {
  // The CPU backend's threads too: one per run unless asked (two OpenMP threads made step 9
  // 1.7x slower on the 2-core development machine, bench/results/004).
  // Every task runs on one thread: the workers are the run's threads (scheduler.hpp).
  BackendOptions bo;
  bo.threads = 1;
  for (int k = 0; k < std::max(1, workers_); ++k)
    backends_.push_back(make_backend(parse_device(c_.device), bo));
  if (c_.device == "cpu") return;
  const auto uses = [&](const std::vector<std::string>& names, const char* name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const char* kind : {"mlp", "logreg"})
    if (uses(c_.models, kind) || (std::string(kind) == "mlp" && uses(c_.methods, "fedavg")))
      (void)model(kind, c_.seed);
}

void Runner::open() {
  open_devices();
  prepare();
}

void Runner::trial(index_t t, UnitRun& unit) {
  Split sp = data_.make_split(t);
  // The privacy measurements compare with the users' rows as they hold them, before "raw" noise
  // (a copy only then; otherwise sp.X stays as drawn).
  const std::vector<Matrix<double>> raw_rows =
      !c_.privacy.empty() && c_.dp_target == "raw" ? sp.X : std::vector<Matrix<double>>();
  const std::vector<Matrix<double>>& clean = raw_rows.empty() ? sp.X : raw_rows;
  // Paper 001's DP baseline: the users' training rows themselves are released with noise.
  if (c_.dp_target == "raw")
    for (index_t i = 0; i < c_.users; ++i)
      add_gaussian_noise(
          sp.X[i], data_.dp_sigma(),
          derive(c_.seed, 43, static_cast<std::uint64_t>(data_.data_trial(t)) * 4096 + i));
  const auto want = [&](const char* m) {
    return std::find(c_.methods.begin(), c_.methods.end(), m) != c_.methods.end();
  };
  if (want("central"))
    fit_and_record(t, "-", "central", vstack(sp.X), concat(sp.y), vstack(sp.Y), concat(sp.yY),
                   unit);
  const Split mine = data_.user_view(sp);  // what each user holds (its block, when vertical)
  if (want("local")) {
    // The whole test set as user 1 holds it (its block, when vertical).
    const bool own = c_.holder() == "own";
    const Matrix<double> first =
        own ? Matrix<double>() : data_.block(vstack(sp.Y), data_.block_of(0));
    const std::vector<double> labels = own ? std::vector<double>() : concat(sp.yY);
    local(t, mine, unit, own ? nullptr : &first, own ? nullptr : &labels);
  }
  if (data_.fedavg()) {
    // One task per configuration, on its own copy of the split.
    const auto shared = std::make_shared<const Split>(sp);
    for (const auto& configuration : c_.fedavg_configurations)
      unit.defer([this, t, shared, configuration](TrialOut::Slot& slot) {
        FedAvgRun(c_, data_.train().num_classes)
            .run(t, data_.data_trial(t), *shared, configuration, slot.records, slot.rounds);
      });
  }
  if (data_.nri()) return nri_trial(t, sp, unit);

  const Matrix<double> A = data_.anchor(t);
  std::vector<Matrix<double>> anchor_blocks;  // the anchor's columns of each feature block
  for (const auto& b : data_.blocks()) anchor_blocks.push_back(data::take_columns(A, b));
  // User 1 and the analyst hold A^+ once per trial (the anchor is the same for every condition).
  std::optional<CollusionAttacker> attacker;
  if (c_.measures("collusion")) attacker.emplace(A);
  const Uplink uplink = parse_uplink(c_.uplink);
  // Every user's l_i (all l unless dim_per_user); ragged: they differ, and align_ragged aligns.
  const std::vector<index_t> dims = user_dims(t);
  const bool ragged = !c_.dim_per_user.empty();
  for (SpanCondition cond : c_.conditions) {
    std::vector<User<double>> users;
    const Mixing mixing = orthonormal_mixing(cond) ? Mixing::haar : Mixing::uniform;
    // SameSpan: the span of the first user's data (of the first user of each feature block);
    // with different l_i, user i's is that of user 1's top l_i vectors (nested spans).
    std::vector<Matrix<double>> v1(data_.vertical() ? 2 : 1);
    if (shares_span(cond))
      for (size_t b = 0; b < v1.size(); ++b)
        v1[b] = top_right_singular_vectors(mine.X[static_cast<index_t>(b) * (c_.users / 2)],
                                           data_.l_user_max(), c_.centered());
    std::vector<Matrix<double>> released, projected_test, anchors;
    // privacy_defence: the rows each user releases and their labels (else every row, sp.y).
    std::vector<std::vector<index_t>> kept(static_cast<size_t>(c_.users));
    std::vector<std::vector<double>> kept_labels;
    if (c_.privacy_defence) kept_labels = sp.y;
    double sigma_sum = 0;
    for (index_t i = 0; i < c_.users; ++i) {
      users.emplace_back(mine.X[i], "user " + std::to_string(i));
      const std::uint64_t s =
          derive(c_.seed, 19, static_cast<std::uint64_t>(data_.data_trial(t)) * 4096 + i);
      const index_t li = dims[static_cast<size_t>(i)];
      if (shares_span(cond))
        users.back().choose_secret_basis_in(
            leading_columns(v1[static_cast<size_t>(std::max(data_.block_of(i), 0))], li), mixing,
            s);
      else
        users.back().choose_secret_basis(li, mixing, s, c_.centered());
      released.push_back(users.back().release_data());
      if (c_.privacy_defence) {  // before any noise: the user decides on its own rows
        try {
          kept[i] =
              defended_rows(mine.X[i], users.back().reveal_secret_basis(), c_.privacy_dr_epsilon);
        } catch (const InvalidInput& e) {  // a user left with no row is an error, not skipped
          key_error(c_, "privacy_defence",
                    "= true drops every row of user " + std::to_string(i + 1) + " of " +
                        std::to_string(c_.users) + " in trial " + std::to_string(t + 1) + ": " +
                        e.what() + "; a smaller dim or privacy_dr_epsilon keeps rows");
        }
        released.back() = data::take_rows(released.back(), kept[i]);
        kept_labels[static_cast<size_t>(i)] =
            data::take(kept_labels[static_cast<size_t>(i)], kept[i]);
      }
      if (c_.dp_target == "released") {  // paper 000, eq. 3; the anchor stays noise-free (eq. 6)
        const double sigma =
            PrivacyEvaluator(c_, data_.nri(), data_.dp_sigma()).released_sigma(users.back(), cond);
        add_gaussian_noise(
            released.back(), sigma,
            derive(c_.seed, 41, static_cast<std::uint64_t>(data_.data_trial(t)) * 4096 + i));
        sigma_sum += sigma;
      }
      anchors.push_back(users.back().release_anchor(
          data_.vertical() ? anchor_blocks[static_cast<size_t>(data_.block_of(i))] : A));
      if (uplink != Uplink::fp64) {  // what the analyst receives: the dequantised values
        const std::string who = "user " + std::to_string(i + 1) + " of " +
                                std::to_string(c_.users) + ", uplink " + c_.uplink + ": ";
        released.back() = through_uplink(released.back(), uplink, who + "X~_i");
        anchors.back() = through_uplink(anchors.back(), uplink, who + "A_i");
      }
      // "own": each user maps its test share (paper eq. 9); "first": user 1 holds the whole
      // test set and maps it with F_1 G_1 (its pair partner, when joined, maps its block of it).
      if (c_.holder() == "own")
        projected_test.push_back(users.back().project(mine.Y[i]));
      else if (data_.rows_of(i) == 0)
        projected_test.push_back(
            users.back().project(data_.block(vstack(sp.Y), data_.block_of(i))));
    }
    // "vertical-joined": pair (k, k + c/2) becomes one unit of 2l columns, aligned as a user.
    if (data_.joined()) {
      released = join_pairs(released);
      anchors = join_pairs(anchors);
      projected_test = join_pairs(projected_test);
    }
    const index_t units = static_cast<index_t>(anchors.size()),
                  dim = data_.joined() ? 2 * data_.l() : data_.l();
    if (c_.dp_target == "released")
      unit.out().now().push_back({t, to_string(cond), "dp", "-", "dp_sigma",
                                  sigma_sum / static_cast<double>(c_.users), 0});
    if (ragged) {  // the trial's l_i: their mean, smallest and largest
      double sum = 0;
      for (index_t li : dims) sum += static_cast<double>(li);
      std::vector<Record>& out = unit.out().now();
      const auto [lo, hi] = std::minmax_element(dims.begin(), dims.end());
      out.push_back({t, to_string(cond), "dims", "-", "user_dim_mean",
                     sum / static_cast<double>(c_.users), 0});
      out.push_back({t, to_string(cond), "dims", "-", "user_dim_min", static_cast<double>(*lo), 0});
      out.push_back({t, to_string(cond), "dims", "-", "user_dim_max", static_cast<double>(*hi), 0});
    }
    if (!c_.privacy.empty()) {  // never with vertical partitions: one unit per user
      std::vector<ReleaseView> views;
      for (index_t i = 0; i < c_.users; ++i)
        views.push_back({&released[i], &anchors[i], &users[i].reveal_secret_basis(), kept[i]});
      PrivacyEvaluator(c_, data_.nri(), data_.dp_sigma())
          .measure(t, to_string(cond), clean, views, attacker ? &*attacker : nullptr,
                   unit.out().now());
    }
    const std::vector<std::vector<double>>& y_train = c_.privacy_defence ? kept_labels : sp.y;
    // One stack for align(); users of different l_i are aligned from the list (align_ragged).
    const Stack<double> stack = ragged ? Stack<double>() : Stack<double>::from_matrices(anchors);
    DcTraffic traffic;
    traffic.model.users = units;
    traffic.model.samples.clear();
    for (index_t i = 0; i < units; ++i) {
      traffic.uplink += uplink_bytes(released[i].rows(), released[i].cols(), uplink) +
                        uplink_bytes(anchors[i].rows(), anchors[i].cols(), uplink) +
                        static_cast<double>(y_train[i].size()) * sizeof(double);
      traffic.downlink_G += static_cast<double>(released[i].cols() * dim) * sizeof(double);
      traffic.model.samples.push_back(static_cast<double>(released[i].rows()));
    }
    traffic.model.anchor_rows = c_.anchor_rows;
    traffic.model.features = data_.train().features();
    traffic.model.dim = dim;
    traffic.model.bits = uplink_bits(uplink);
    traffic.model.gamma = 0;  // the anchor is regenerated from the seed, never sent
    for (const auto& method : c_.methods) {
      if (!is_align_method(method)) continue;
      std::vector<Matrix<double>> G;  // G_i: l_i x dim
      AlignReport report;
      if (ragged) {
        auto al = align_ragged(anchors, dim, align_options(method, t), backend());
        G = std::move(al.G);
        report = al.report;
      } else {
        const auto al = align(stack, align_options(method, t), backend());
        for (index_t i = 0; i < units; ++i) G.push_back(al.G.matrix(i));
        report = al.report;
      }
      // The analyst's step alone, from the released anchors to all G_i (no evaluation).
      if (c_.align_timing)
        unit.out().now().push_back(
            {t, to_string(cond), method, "-", "align_seconds", report.total_seconds, 0});
      if (uplink != Uplink::fp64) {  // how the reduced precision moved the G_i
        std::vector<Record>& out = unit.out().now();
        out.push_back({t, to_string(cond), method, "-", "orthogonality_error",
                       report.orthogonality_error, 0});
        out.push_back({t, to_string(cond), method, "-", "objective", report.objective, 0});
      }
      std::vector<Matrix<double>> Xh, Yh;
      for (index_t i = 0; i < units; ++i) {
        Xh.push_back(apply_change_of_basis(released[i], G[static_cast<size_t>(i)]));
        if (i < static_cast<index_t>(projected_test.size()))
          Yh.push_back(apply_change_of_basis(projected_test[i], G[static_cast<size_t>(i)]));
      }
      Matrix<double> X_train = vstack(Xh), X_test = vstack(Yh);
      if (c_.standardize_aligned) standardize_aligned(X_train, X_test);
      fit_and_record(t, to_string(cond), method, std::move(X_train), concat(y_train),
                     std::move(X_test), concat(sp.yY), unit,
                     data_.fedavg() || uplink != Uplink::fp64 ? &traffic : nullptr);
    }
  }
}

// Each user alone on its own data, evaluated on its test data: its own share ("own"), the
// whole test set ("shared", NRI-DC), or only user 1 on the whole test set ("first"); mean over
// the users scored. A user whose training data hold a single class cannot fit a classifier
// and is left out.
// `whole_Y` and `whole_y`: the whole test set as user 1 holds it, where a vertical partition
// gives the users other features than the split's rows (default: sp's test shares stacked).
void Runner::local(index_t t, const Split& sp_in, UnitRun& unit, const Matrix<double>* whole_Y,
                   const std::vector<double>* whole_y) {
  const std::string holder = c_.holder();
  const index_t scored = holder == "first" ? 1 : c_.users;
  // The tasks' own copies: the users' rows, and the whole test set unless each scores its own.
  const auto sp = std::make_shared<const Split>(sp_in);
  const auto Y_all = std::make_shared<const Matrix<double>>(holder == "own" ? Matrix<double>()
                                                            : whole_Y       ? *whole_Y
                                                                            : vstack(sp->Y));
  const auto y_all =
      std::make_shared<const std::vector<double>>(holder == "own" ? std::vector<double>()
                                                  : whole_y       ? *whole_y
                                                                  : concat(sp->yY));
  for (const auto& kind : c_.models)
    unit.defer([this, t, kind, holder, scored, sp, Y_all, y_all](TrialOut::Slot& slot) {
      const auto t0 = Clock::now();
      std::map<std::string, std::vector<double>> per_metric;
      for (index_t i = 0; i < scored; ++i) {
        if (data_.train().num_classes > 0) {
          const std::set<double> classes(sp->y[i].begin(), sp->y[i].end());
          if (classes.size() < 2) continue;
        }
        auto h = model(
            kind, derive(c_.seed, 29, static_cast<std::uint64_t>(data_.data_trial(t)) * 4096 + i));
        h->fit(sp->X[i], sp->y[i], static_cast<int>(data_.train().num_classes));
        // A user's test share may hold a single class, where ROC-AUC and PR-AUC are undefined
        // (the metrics refuse it); such users are left out of that metric's mean.
        for (const auto& metric : c_.metrics) {
          try {
            const double v = holder == "own" ? evaluate_one(*h, sp->Y[i], sp->yY[i], metric)
                                             : evaluate_one(*h, *Y_all, *y_all, metric);
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
        slot.records.push_back(
            {t, "-", "local", kind, metric, mean / static_cast<double>(vals.size()), secs});
      }
      if (per_metric.empty() && progress_)
        progress_("local baseline skipped for " + kind + ": no user holds two classes");
    });
}

// NRI-DC (paper 004, Algorithm 1): every worker releases once per trial; then per method and
// model the master returns anchor labels and every worker scores its own t_i. Recorded: the
// metric's mean over the workers scored, and how many of them had a constant t_i. With
// privacy, the measurements on what the workers release (before the master runs); with
// privacy_defence, each worker drops its rows below privacy_dr_epsilon before it releases.
void Runner::nri_trial(index_t t, const Split& sp, UnitRun& unit) {
  const Matrix<double> A = data_.anchor(t);
  nri::WorkerOptions wo;
  wo.dim = data_.l();
  wo.delta = c_.nri_delta;
  wo.center = c_.centered();
  wo.permute = c_.nri_permute;
  wo.defence_epsilon = c_.privacy_defence ? c_.privacy_dr_epsilon : 0;
  // The workers' secrets, for the privacy measurements' evaluator alone.
  const bool measure = !c_.privacy.empty();
  std::vector<nri::Secrets> secrets(measure ? static_cast<size_t>(c_.users) : 0);
  std::vector<nri::Release> releases;
  for (index_t i = 0; i < c_.users; ++i) {
    try {
      releases.push_back(nri::worker_release(
          sp.X[i], sp.y[i], A, wo,
          derive(c_.seed, 31, static_cast<std::uint64_t>(data_.data_trial(t)) * 4096 + i),
          measure ? &secrets[static_cast<size_t>(i)] : nullptr));
    } catch (const InvalidInput& e) {
      if (!c_.privacy_defence) throw;
      // The one input error a validated run can meet here: the defence drops every row.
      key_error(c_, "privacy_defence",
                "= true stops worker " + std::to_string(i + 1) + " of " + std::to_string(c_.users) +
                    " in trial " + std::to_string(t + 1) + ": " + e.what());
    }
  }
  if (measure) {
    // Worker 1 and the master: the affine attack on the centred PCA releases (the linear one
    // when the worker does not centre).
    std::optional<CollusionAttacker> attacker;
    if (c_.measures("collusion"))
      attacker.emplace(A, wo.center ? ReleaseMap::affine : ReleaseMap::linear);
    std::vector<ReleaseView> views;
    for (index_t i = 0; i < c_.users; ++i) {
      const auto& r = releases[static_cast<size_t>(i)];
      const auto& z = secrets[static_cast<size_t>(i)];
      views.push_back({&r.data, &r.anchor, &z.basis, z.origin});
    }
    PrivacyEvaluator(c_, data_.nri(), data_.dp_sigma())
        .measure(t, "-", sp.X, views, attacker ? &*attacker : nullptr, unit.out().now());
  }
  const std::string holder = c_.holder();
  const index_t scored = holder == "first" ? 1 : c_.users;
  const Matrix<double> Y_all = holder == "own" ? Matrix<double>() : vstack(sp.Y);
  const std::vector<double> y_all = holder == "own" ? std::vector<double>() : concat(sp.yY);
  const index_t K = data_.train().num_classes;
  for (const auto& method : c_.methods) {
    if (!is_align_method(method)) continue;
    for (const auto& kind : c_.models) {
      const auto t0 = Clock::now();
      nri::MasterOptions mo;
      mo.align = align_options(method, t);
      mo.model = kind;
      mo.model_options =
          model_options(derive(c_.seed, 13, static_cast<std::uint64_t>(data_.data_trial(t))));
      mo.num_classes = K;
      AlignReport alignment;
      const auto anchor_labels = nri::master(releases, mo, backend(), &alignment);
      std::map<std::string, std::vector<double>> per_metric;
      index_t constant = 0;
      for (index_t i = 0; i < scored; ++i) {
        const Matrix<double>& Y = holder == "own" ? sp.Y[i] : Y_all;
        const std::vector<double>& y = holder == "own" ? sp.yY[i] : y_all;
        // AUCs need every class in the test labels; a worker whose share lacks one is left out
        // of those metrics' means (only possible with test_holder = "own").
        std::vector<std::string> metrics;
        for (const auto& m : c_.metrics)
          if ((m != "roc_auc" && m != "pr_auc") || all_classes(y, K)) metrics.push_back(m);
        const auto res = nri::worker_finish(
            A, anchor_labels[static_cast<size_t>(i)], Y, y, kind,
            model_options(
                derive(c_.seed, 37, static_cast<std::uint64_t>(data_.data_trial(t)) * 4096 + i)),
            K, metrics);
        if (res.constant) ++constant;
        for (const auto& [m, v] : res.scores) per_metric[m].push_back(v);
      }
      const double secs = since(t0);
      std::vector<Record>& out = unit.out().now();
      for (const auto& [metric, vals] : per_metric) {
        double mean = 0;
        for (double v : vals) mean += v;
        out.push_back(
            {t, "-", method, kind, metric, mean / static_cast<double>(vals.size()), secs});
      }
      out.push_back({t, "-", method, kind, "constant_workers", static_cast<double>(constant), 0});
      // Step 9 alone, from the released anchors to all G_i (no evaluation is asked for).
      out.push_back({t, "-", method, kind, "align_seconds", alignment.total_seconds, 0});
    }
  }
}

// [M_1 ... M_c] -> [M_k | M_{k + c/2}] for k = 1..c/2: the pairs of "vertical-joined",
// side by side (the same rows, each partner's columns).
std::vector<Matrix<double>> Runner::join_pairs(const std::vector<Matrix<double>>& m) const {
  const index_t half = static_cast<index_t>(m.size()) / 2;
  std::vector<Matrix<double>> out;
  for (index_t k = 0; k < half; ++k) {
    const Matrix<double>& left = m[k];
    const Matrix<double>& right = m[k + half];
    Matrix<double> both(left.rows(), left.cols() + right.cols());
    std::copy(left.data(), left.data() + left.size(), both.data());
    std::copy(right.data(), right.data() + right.size(), both.data() + left.size());
    out.push_back(std::move(both));
  }
  return out;
}

std::unique_ptr<learn::Model> Runner::model(const std::string& kind, std::uint64_t seed) const {
  return learn::make_model(kind, model_options(seed));
}

std::vector<index_t> Runner::user_dims(index_t t) const {
  if (c_.dim_per_user.empty())
    return std::vector<index_t>(static_cast<size_t>(c_.users), data_.l());
  if (c_.dim_assignment == "in-order") return c_.dim_per_user;
  // "draw": uniform over the listed values, per user, from the trial's data seed (so that
  // redraw = "alignment" keeps trial 1's, as it keeps its bases).
  std::vector<index_t> dims;
  for (index_t i = 0; i < c_.users; ++i) {
    Rng rng(derive(c_.seed, 47, static_cast<std::uint64_t>(data_.data_trial(t)) * 4096 + i));
    dims.push_back(c_.dim_per_user[static_cast<size_t>(rng.below(c_.dim_per_user.size()))]);
  }
  return dims;
}

AlignOptions Runner::align_options(const std::string& method, index_t t) const {
  AlignOptions ao;
  const MethodName name = split_method(method);
  ao.method = parse_method(name.base);
  ao.seed = derive(c_.seed, 23, static_cast<std::uint64_t>(t));
  ao.evaluate = c_.uplink != "fp64";  // the report's measures of the G_i, recorded then
  // A variant in the name ("odc:identity", "imakura:uniform") overrides the config's factor.
  ao.rotation = parse_target_rotation(
      name.base == "odc" && !name.variant.empty() ? name.variant : c_.odc_rotation);
  ao.right = parse_right_factor(name.base == "imakura" && !name.variant.empty() ? name.variant
                                                                                : c_.imakura_right);
  ao.kawakami_form = data_.kawakami_form();
  if (c_.rdp_eta) ao.rdp.eta = *c_.rdp_eta;
  if (c_.gopp_tolerance) ao.gopp.tolerance = *c_.gopp_tolerance;
  return ao;
}

double Runner::evaluate_one(const learn::Model& h, const Matrix<double>& Y,
                            const std::vector<double>& y, const std::string& metric) const {
  return score(h, Y, y, {metric}, data_.train().num_classes).at(metric);
}

void Runner::fit_and_record(index_t t, const std::string& cond, const std::string& method,
                            Matrix<double> X_in, std::vector<double> y_in, Matrix<double> Y_in,
                            std::vector<double> yY_in, UnitRun& unit, const DcTraffic* traffic) {
  // The tasks share one copy of the data; each model kind is a task of its own.
  struct Data {
    Matrix<double> X, Y;
    std::vector<double> y, yY;
    std::optional<DcTraffic> traffic;
  };
  auto d = std::make_shared<Data>();
  d->X = std::move(X_in);
  d->Y = std::move(Y_in);
  d->y = std::move(y_in);
  d->yY = std::move(yY_in);
  if (traffic) d->traffic = *traffic;
  const std::shared_ptr<const Data> data = d;
  for (const auto& kind : c_.models)
    unit.defer([this, t, cond, method, kind, data](TrialOut::Slot& slot) {
      std::vector<Record>& out = slot.records;
      const auto t0 = Clock::now();
      auto h = model(kind, derive(c_.seed, 13, static_cast<std::uint64_t>(data_.data_trial(t))));
      h->fit(data->X, data->y, static_cast<int>(data_.train().num_classes));
      const auto values = score(*h, data->Y, data->yY, c_.metrics, data_.train().num_classes);
      const double secs = since(t0);
      for (const auto& [metric, v] : values)
        out.push_back({t, cond, method, kind, metric, v, secs});
      // Parametric models only (mlp, logreg): the comparison with FedAvg's model updates.
      const double N = static_cast<double>(h->parameters().size());
      const DcTraffic* traffic = data->traffic ? &*data->traffic : nullptr;
      if (traffic && N == 0 && c_.uplink != "fp64")  // what the reduced uplink sends, any model
        out.push_back({t, cond, method, kind, "uplink_bytes", traffic->uplink, 0});
      if (traffic && N > 0) {
        CommModel cm = traffic->model;
        cm.dc_model_parameters = N;  // h on the aligned features: eqs. 11 and 14's N_DC
        const double users = static_cast<double>(c_.users);
        out.push_back({t, cond, method, kind, "uplink_bytes", traffic->uplink, 0});
        out.push_back({t, cond, method, kind, "downlink_bytes",
                       traffic->downlink_G + users * N * sizeof(double), 0});
        out.push_back(
            {t, cond, method, kind, "predicted_bytes", estimate_communication(cm).dc_bytes, 0});
      }
    });
}

void prepare_point(const Config& config, const Progress& progress) {
  Runner(config, progress).prepare();
}

}  // namespace dcalign::experiment::detail
