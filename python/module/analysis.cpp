// The analyses around an alignment: the communication model, statistics and privacy measurements.
#include "module/module.hpp"

#include "dcalign/comm.hpp"
#include "dcalign/privacy.hpp"
#include "dcalign/privacy_attacks.hpp"
#include "dcalign/stats.hpp"

using namespace dcalign;

namespace dcalign::pymodule {
namespace {

// ---------------------------------------------------------------- communication model

// dcalign comm's options as keyword arguments (CommModel's names), and its JSON document.
std::string communication_impl(const py::dict& options) {
  static const std::set<std::string> known = {
      "users", "mean_samples",  "samples",          "anchor_rows",         "features",
      "dim",   "bits",          "model_parameters", "dc_model_parameters", "fl_model_parameters",
      "gamma", "participation", "rounds",           "bandwidth",           "rtt"};
  CommModel m;
  bool users_given = false, timed = false;
  double bandwidth = 0, rtt = 0;
  for (const auto& item : options) {
    const std::string key = py::str(item.first);
    if (!known.count(key)) throw py::type_error("communication: unknown option '" + key + "'");
    const py::handle v = item.second;
    try {
      if (key == "users") m.users = v.cast<std::int64_t>(), users_given = true;
      if (key == "mean_samples") m.mean_samples = v.cast<double>();
      if (key == "samples") m.samples = v.cast<std::vector<double>>();
      if (key == "anchor_rows") m.anchor_rows = v.cast<std::int64_t>();
      if (key == "features") m.features = v.cast<std::int64_t>();
      if (key == "dim") m.dim = v.cast<std::int64_t>();
      if (key == "model_parameters") m.model_parameters = v.cast<double>();
      // None leaves a per-protocol size unset (N applies), as gamma = None means c.
      if (key == "dc_model_parameters" && !v.is_none()) m.dc_model_parameters = v.cast<double>();
      if (key == "fl_model_parameters" && !v.is_none()) m.fl_model_parameters = v.cast<double>();
      if (key == "bits") m.bits = v.cast<double>();
      if (key == "gamma" && !v.is_none()) m.gamma = v.cast<double>();
      if (key == "participation") m.participation = v.cast<double>();
      if (key == "rounds") m.rounds = v.cast<double>();
      if (key == "bandwidth") bandwidth = v.cast<double>(), timed = true;
      if (key == "rtt") rtt = v.cast<double>();
    } catch (const py::cast_error&) {
      throw py::type_error("communication: option '" + key + "' has the wrong type (" +
                           std::string(py::str(py::type::of(v))) + ")");
    }
  }
  // As the command: model_parameters is N for both protocols, dc_/fl_model_parameters override
  // it for one each, and all three at once leave model_parameters unused (refused).
  if (options.contains("model_parameters") && m.dc_model_parameters && m.fl_model_parameters)
    throw InvalidInput(
        "communication: model_parameters sets no protocol's model when dc_model_parameters and "
        "fl_model_parameters are both given: drop it, or one of the two");
  // As the command: the list of n_i gives c unless users says otherwise.
  if (!m.samples.empty() && !users_given) m.users = static_cast<std::int64_t>(m.samples.size());
  const CommEstimate e = estimate_communication(m);
  std::optional<TransferTimes> t;
  if (timed) t = estimate_transfer_times(m, bandwidth, rtt);
  return communication_json(m, e, t, bandwidth, rtt, -1);
}
// ---------------------------------------------------------------- statistics

py::dict paired_t_impl(const std::vector<double>& x, const std::vector<double>& y,
                       const std::string& alternative, double confidence) {
  const stats::PairedTTest r =
      stats::paired_t_test(x, y, stats::parse_alternative(alternative), confidence);
  py::dict d;
  d["n"] = r.n;
  d["mean_diff"] = r.mean_diff;
  d["sd_diff"] = r.sd_diff;
  d["t"] = r.t;
  d["df"] = r.df;
  d["p"] = r.p;
  d["cohens_dz"] = r.cohens_dz;
  d["confidence"] = r.confidence;
  d["ci_lower"] = r.ci_lower;
  d["ci_upper"] = r.ci_upper;
  d["alternative"] = alternative;
  return d;
}

py::dict one_way_impl(const std::vector<std::vector<double>>& groups) {
  const stats::OneWayAnova r = stats::one_way_anova(groups);
  py::dict d;
  d["ss_between"] = r.ss_between;
  d["ss_within"] = r.ss_within;
  d["ss_total"] = r.ss_total;
  d["df_between"] = r.df_between;
  d["df_within"] = r.df_within;
  d["F"] = r.F;
  d["p"] = r.p;
  d["eta_squared"] = r.eta_squared;
  d["cohens_f"] = r.cohens_f;
  return d;
}

py::dict anova_term(const stats::AnovaTerm& t) {
  py::dict d;
  d["ss"] = t.ss;
  d["df"] = t.df;
  d["F"] = t.F;
  d["p"] = t.p;
  d["partial_eta_squared"] = t.partial_eta_squared;
  d["cohens_f"] = t.cohens_f;
  return d;
}

py::dict two_way_impl(const std::vector<double>& y, const std::vector<std::string>& a,
                      const std::vector<std::string>& b, const std::string& type) {
  const stats::TwoWayAnova r = stats::two_way_anova(y, a, b, stats::parse_sum_of_squares(type));
  py::dict d;
  d["type"] = type;
  d["levels_a"] = r.levels_a;
  d["levels_b"] = r.levels_b;
  d["n"] = r.n;
  d["A"] = anova_term(r.a);
  d["B"] = anova_term(r.b);
  d["A:B"] = anova_term(r.interaction);
  d["ss_residual"] = r.ss_residual;
  d["df_residual"] = r.df_residual;
  return d;
}
// ---------------------------------------------------------------- privacy measurements

// A 2-D float64 array as a column-major Matrix<double> (one copy, any layout).
Matrix<double> matrix_from(const py::array_t<double, py::array::forcecast>& a, const char* what) {
  if (a.ndim() != 2)
    throw InvalidInput(std::string(what) + " must be a 2-D array, got " + std::to_string(a.ndim()) +
                       " dimensions");
  const auto r = a.unchecked<2>();
  Matrix<double> m(static_cast<index_t>(a.shape(0)), static_cast<index_t>(a.shape(1)));
  for (py::ssize_t j = 0; j < a.shape(1); ++j)
    for (py::ssize_t i = 0; i < a.shape(0); ++i)
      m(static_cast<index_t>(i), static_cast<index_t>(j)) = r(i, j);
  return m;
}

py::dict analytic_gaussian_impl(double epsilon, double delta, double sensitivity) {
  const AnalyticGaussian g = analytic_gaussian(epsilon, delta, sensitivity);
  py::dict d;
  d["sigma"] = g.sigma;
  d["alpha"] = g.alpha;
  d["delta0"] = g.delta0;
  d["upper_branch"] = g.upper_branch;
  d["boundary"] = g.boundary;
  d["classical_sigma"] = classical_gaussian_sigma(epsilon, delta, sensitivity);
  return d;
}

py::dict dr_privacy_impl(const py::array_t<double, py::array::forcecast>& X,
                         const py::array_t<double, py::array::forcecast>& basis, double epsilon) {
  const DrSummary s = dr_privacy(matrix_from(X, "X"), matrix_from(basis, "basis"), epsilon);
  py::dict d;
  d["ratios"] = s.ratios;
  d["min"] = s.min;
  d["median"] = s.median;
  d["below"] = s.below;
  d["fraction_below"] = s.fraction_below;
  d["kept"] = s.kept;
  return d;
}

py::dict reconstruction_error_impl(const py::array_t<double, py::array::forcecast>& truth,
                                   const py::array_t<double, py::array::forcecast>& rec) {
  const ReconstructionError e =
      reconstruction_error(matrix_from(truth, "truth"), matrix_from(rec, "reconstruction"));
  py::dict d;
  d["relative"] = e.relative;
  d["per_row"] = e.per_row;
  d["median_row"] = e.median_row;
  return d;
}

}  // namespace

void bind_analysis(py::module_& m) {
  m.def("_communication", &communication_impl);
  m.def("_paired_t_test", &paired_t_impl);
  m.def("_one_way_anova", &one_way_impl);
  m.def("_two_way_anova", &two_way_impl);
  m.def("_analytic_gaussian", &analytic_gaussian_impl);
  m.def("_dr_privacy", &dr_privacy_impl);
  m.def("_reconstruction_error", &reconstruction_error_impl);
}

}  // namespace dcalign::pymodule
