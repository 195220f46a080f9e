// One-way and two-way ANOVA (001 section 9, eqs. (93)-(94), Tables 17-19).
#include "base/host_blas.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "dcalign/error.hpp"
#include "dcalign/stats.hpp"
#include "stats/detail.hpp"

namespace dcalign::stats {

OneWayAnova one_way_anova(const std::vector<std::vector<double>>& groups) {
  const std::size_t k = groups.size();
  if (k < 2)
    throw InvalidInput("one_way_anova: " + std::to_string(k) +
                       " groups; expected at least 2 groups to compare");
  std::size_t n = 0;
  for (std::size_t g = 0; g < k; ++g) {
    if (groups[g].empty())
      throw InvalidInput("one_way_anova: group " + std::to_string(g) +
                         " has no observations; expected at least one in every group");
    for (std::size_t i = 0; i < groups[g].size(); ++i)
      detail::require_finite(groups[g][i], "one_way_anova: group " + std::to_string(g) + " value",
                             i);
    n += groups[g].size();
  }
  if (n <= k)
    throw InvalidInput("one_way_anova: " + std::to_string(n) + " observations in " +
                       std::to_string(k) +
                       " groups leave no error degrees of freedom; expected more observations "
                       "than groups");

  // Group means; a constant group's mean is its value exactly, so that the 0/0 rule (stats.hpp)
  // sees exact zeros rather than rounding residue.
  std::vector<double> mean(k);
  bool all_equal = true;  // every observation identical
  double grand_sum = 0;
  OneWayAnova r;
  for (std::size_t g = 0; g < k; ++g) {
    const auto& v = groups[g];
    bool constant = true;
    double sum = 0;
    for (double x : v) {
      constant = constant && x == v[0];
      sum += x;
    }
    all_equal = all_equal && constant && v[0] == groups[0][0];
    grand_sum += sum;
    mean[g] = constant ? v[0] : sum / static_cast<double>(v.size());
    if (!constant)
      for (double x : v) r.ss_within += (x - mean[g]) * (x - mean[g]);
  }
  const double grand = grand_sum / static_cast<double>(n);
  if (!all_equal)
    for (std::size_t g = 0; g < k; ++g)
      r.ss_between += static_cast<double>(groups[g].size()) * (mean[g] - grand) * (mean[g] - grand);
  if (!std::isfinite(r.ss_within) || !std::isfinite(r.ss_between))
    throw InvalidInput(
        "one_way_anova: the sums of squares overflow; expected observations below "
        "about 1e150 in magnitude");
  r.ss_total = r.ss_between + r.ss_within;
  r.df_between = static_cast<double>(k - 1);
  r.df_within = static_cast<double>(n - k);
  const detail::FTest f = detail::f_test(r.ss_between, r.df_between, r.ss_within, r.df_within);
  r.F = f.F;
  r.p = f.p;
  r.eta_squared = f.eta_squared;
  r.cohens_f = f.cohens_f;
  return r;
}

namespace {

// Level index of each observation, levels numbered by first appearance.
std::vector<std::size_t> level_index(const std::vector<std::string>& labels, std::size_t& levels) {
  std::map<std::string, std::size_t> index;
  std::vector<std::size_t> out(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i)
    out[i] = index.emplace(labels[i], index.size()).first->second;
  levels = index.size();
  return out;
}

// Sum-to-zero (effect) coding: column j < levels - 1 is +1 at level j, -1 at the last level.
double effect_code(std::size_t level, std::size_t j, std::size_t levels) {
  if (level == j) return 1;
  return level + 1 == levels ? -1 : 0;
}

struct Fit {
  std::vector<double> fitted;  // X beta, the projection of y onto the span of X
  lapack_int rank = 0;
};

// Least squares by Householder QR with column pivoting (dgelsy). QR works on X itself, so the
// error grows with cond(X) rather than cond(X)^2 as with the normal equations, and the pivoting
// reveals the rank that empty cells or confounded factors take from a design. Dummy designs have
// condition numbers of the order of n, so a relative singular value below 1e-10 is an exact
// dependence.
Fit least_squares(const std::vector<double>& X, std::size_t n, std::size_t p,
                  const std::vector<double>& y) {
  Fit fit;
  fit.fitted.assign(n, 0.0);
  if (p == 0) return fit;
  std::vector<double> A = X;
  std::vector<double> b = y;  // n >= p: the solution is returned in b[0..p)
  std::vector<lapack_int> jpvt(p, 0);
  const auto ln = static_cast<lapack_int>(n);
  const auto lp = static_cast<lapack_int>(p);
  const lapack_int info =
      base::gelsy(ln, lp, 1, A.data(), ln, b.data(), ln, jpvt.data(), 1e-10, &fit.rank);
  if (info != 0)
    throw NumericalError("two_way_anova: LAPACK dgelsy failed (info = " + std::to_string(info) +
                         ")");
  for (std::size_t j = 0; j < p; ++j)
    for (std::size_t i = 0; i < n; ++i) fit.fitted[i] += X[j * n + i] * b[j];
  return fit;
}

// Column blocks of the design: intercept, A, B, A:B (sum-to-zero coded).
enum Block { kIntercept = 1, kA = 2, kB = 4, kAB = 8 };

class Design {
 public:
  Design(const std::vector<std::size_t>& ia, std::size_t la, const std::vector<std::size_t>& ib,
         std::size_t lb)
      : ia_(ia), ib_(ib), la_(la), lb_(lb) {}

  // The n x p column-major design with the blocks in `mask`.
  std::vector<double> matrix(int mask, std::size_t& p) const {
    const std::size_t n = ia_.size();
    std::vector<double> X;
    auto column = [&](auto value) {
      for (std::size_t i = 0; i < n; ++i) X.push_back(value(i));
    };
    if (mask & kIntercept) column([](std::size_t) { return 1.0; });
    if (mask & kA)
      for (std::size_t j = 0; j + 1 < la_; ++j)
        column([&](std::size_t i) { return effect_code(ia_[i], j, la_); });
    if (mask & kB)
      for (std::size_t j = 0; j + 1 < lb_; ++j)
        column([&](std::size_t i) { return effect_code(ib_[i], j, lb_); });
    if (mask & kAB)
      for (std::size_t j = 0; j + 1 < la_; ++j)
        for (std::size_t h = 0; h + 1 < lb_; ++h)
          column([&](std::size_t i) {
            return effect_code(ia_[i], j, la_) * effect_code(ib_[i], h, lb_);
          });
    p = X.size() / n;
    return X;
  }

 private:
  const std::vector<std::size_t>& ia_;
  const std::vector<std::size_t>& ib_;
  std::size_t la_, lb_;
};

}  // namespace

TwoWayAnova two_way_anova(const std::vector<double>& y, const std::vector<std::string>& a_labels,
                          const std::vector<std::string>& b_labels, SumOfSquares type) {
  const std::size_t n = y.size();
  if (a_labels.size() != n || b_labels.size() != n)
    throw InvalidInput("two_way_anova: " + std::to_string(n) + " observations but " +
                       std::to_string(a_labels.size()) + " labels of A and " +
                       std::to_string(b_labels.size()) +
                       " of B; expected one label of each factor per observation");
  for (std::size_t i = 0; i < n; ++i) detail::require_finite(y[i], "two_way_anova: y", i);
  TwoWayAnova r;
  r.type = type;
  r.n = n;
  const std::vector<std::size_t> ia = level_index(a_labels, r.levels_a);
  const std::vector<std::size_t> ib = level_index(b_labels, r.levels_b);
  if (r.levels_a < 2 || r.levels_b < 2)
    throw InvalidInput("two_way_anova: factor " + std::string(r.levels_a < 2 ? "A" : "B") +
                       " has " + std::to_string(r.levels_a < 2 ? r.levels_a : r.levels_b) +
                       " level(s); expected at least 2 levels in each factor");

  // Cells: is every cell filled, and is every cell constant (then the residual is exactly 0)?
  const std::size_t cells = r.levels_a * r.levels_b;
  std::vector<std::size_t> count(cells, 0);
  std::vector<double> first(cells, 0);
  bool cells_constant = true;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = ia[i] * r.levels_b + ib[i];
    if (count[c]++ == 0)
      first[c] = y[i];
    else
      cells_constant = cells_constant && y[i] == first[c];
  }
  if (type == SumOfSquares::type3)
    for (std::size_t c = 0; c < cells; ++c)
      if (count[c] == 0) {
        std::size_t ja = c / r.levels_b, jb = c % r.levels_b;
        std::string la, lb;
        for (std::size_t i = 0; i < n; ++i) {
          if (ia[i] == ja) la = a_labels[i];
          if (ib[i] == jb) lb = b_labels[i];
        }
        throw InvalidInput("two_way_anova: cell (A = \"" + la + "\", B = \"" + lb +
                           "\") has no observations; type III sums of squares need every "
                           "combination of levels observed (use type II)");
      }

  const Design design(ia, r.levels_a, ib, r.levels_b);
  std::map<int, Fit> fits;
  auto fit = [&](int mask) -> const Fit& {
    auto it = fits.find(mask);
    if (it != fits.end()) return it->second;
    std::size_t p = 0;
    const std::vector<double> X = design.matrix(mask, p);
    return fits.emplace(mask, least_squares(X, n, p, y)).first->second;
  };
  const int full = kIntercept | kA | kB | kAB;
  const Fit& f_full = fit(full);
  if (static_cast<std::size_t>(f_full.rank) >= n)
    throw InvalidInput("two_way_anova: " + std::to_string(n) + " observations fill " +
                       std::to_string(f_full.rank) +
                       " estimable cells, leaving no residual degrees of freedom; expected at "
                       "least one cell with two or more observations");
  r.df_residual = static_cast<double>(n - static_cast<std::size_t>(f_full.rank));
  if (!cells_constant)
    for (std::size_t i = 0; i < n; ++i)
      r.ss_residual += (y[i] - f_full.fitted[i]) * (y[i] - f_full.fitted[i]);

  // The scale of rounding in a fit, under which an effect's SS is taken as exactly zero when the
  // residual is exactly zero (so that the 0/0 rule applies to all-constant data).
  double yy = 0;
  for (double v : y) yy += v * v;
  const double eps = std::numeric_limits<double>::epsilon();
  const double zero_tol = std::pow(64.0 * static_cast<double>(n) * eps, 2) * yy;

  // SS of a term: the squared norm of the difference of the nested fits (bigger minus smaller),
  // equal to RSS(smaller) - RSS(bigger) without the cancellation of that difference.
  auto term = [&](const char* name, int bigger, int smaller) {
    const Fit& fb = fit(bigger);
    const Fit& fs = fit(smaller);
    AnovaTerm t;
    t.name = name;
    for (std::size_t i = 0; i < n; ++i)
      t.ss += (fb.fitted[i] - fs.fitted[i]) * (fb.fitted[i] - fs.fitted[i]);
    t.df = static_cast<double>(fb.rank - fs.rank);
    if (fb.rank <= fs.rank)
      throw InvalidInput(std::string("two_way_anova: the design cannot estimate term ") + name +
                         " (no degrees of freedom left for it" +
                         (std::string(name) == "A:B" ? ": empty cells leave no interaction"
                                                     : ": the factors are confounded") +
                         "); expected a design in which each term is estimable");
    if (r.ss_residual == 0 && t.ss <= zero_tol) t.ss = 0;
    if (!std::isfinite(t.ss))
      throw InvalidInput(
          "two_way_anova: sums of squares overflow; expected observations below "
          "about 1e150 in magnitude");
    const detail::FTest f = detail::f_test(t.ss, t.df, r.ss_residual, r.df_residual);
    t.F = f.F;
    t.p = f.p;
    t.partial_eta_squared = f.eta_squared;
    t.cohens_f = f.cohens_f;
    return t;
  };
  if (type == SumOfSquares::type2) {
    r.a = term("A", kIntercept | kA | kB, kIntercept | kB);
    r.b = term("B", kIntercept | kA | kB, kIntercept | kA);
    r.interaction = term("A:B", full, kIntercept | kA | kB);
  } else {
    r.a = term("A", full, full & ~kA);
    r.b = term("B", full, full & ~kB);
    r.interaction = term("A:B", full, full & ~kAB);
  }
  return r;
}

SumOfSquares parse_sum_of_squares(const std::string& name) {
  if (name == "type2") return SumOfSquares::type2;
  if (name == "type3") return SumOfSquares::type3;
  throw InvalidInput("unknown sum of squares '" + name + "'; expected type2 or type3");
}

}  // namespace dcalign::stats
