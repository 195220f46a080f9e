// Deterministic partitions of samples among users, and the Gamma / Dirichlet samplers they
// need. Every random draw comes from dcalign::Rng, whose output is fixed by the seed on every
// platform (std::shuffle and std::gamma_distribution are implementation-defined).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dcalign/checked.hpp"
#include "dcalign/data.hpp"

namespace dcalign::data {

namespace {

// Fisher-Yates on the first `count` positions: afterwards v[0..count) is a uniform random
// sample without replacement, in random order.
void partial_shuffle(std::vector<index_t>& v, size_t count, Rng& rng) {
  const size_t n = v.size();
  for (size_t i = 0; i < count && i + 1 < n; ++i) {
    const size_t j = i + static_cast<size_t>(rng.below(n - i));
    std::swap(v[i], v[j]);
  }
}

std::vector<index_t> iota(index_t n) {
  std::vector<index_t> v(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// a * b as text, without overflowing when the arguments are absurd.
std::string product_text(index_t a, index_t b) {
  index_t p = 0;
  if (__builtin_mul_overflow(a, b, &p))
    return "more than " + std::to_string(std::numeric_limits<index_t>::max());
  return std::to_string(p);
}

void require_positive(index_t v, const char* fn, const char* what) {
  if (v <= 0)
    throw InvalidInput(std::string(fn) + ": " + what + " must be positive, got " +
                       std::to_string(v));
}

// Checks that users * per_user samples exist among `available`.
void require_enough(const char* fn, index_t users, index_t per_user, index_t available) {
  if (per_user > available / users)
    throw InvalidInput(std::string(fn) + ": " + std::to_string(users) + " users x " +
                       std::to_string(per_user) +
                       " samples per user = " + product_text(users, per_user) +
                       " samples needed, but only " + std::to_string(available) + " are available");
}

// Sample indices grouped by class; labels must be integers in [0, num_classes).
std::vector<std::vector<index_t>> class_pools(const std::vector<double>& y, index_t num_classes,
                                              const char* fn) {
  require_positive(num_classes, fn, "num_classes");
  std::vector<std::vector<index_t>> pools(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < y.size(); ++i) {
    const double v = y[i];
    if (!(v >= 0 && v < static_cast<double>(num_classes)) || v != std::floor(v))
      throw InvalidInput(std::string(fn) + ": label " + std::to_string(v) + " of sample " +
                         std::to_string(i) + " is not a class index in 0.." +
                         std::to_string(num_classes - 1));
    pools[static_cast<size_t>(v)].push_back(static_cast<index_t>(i));
  }
  return pools;
}

void sort_users(Partition& p) {
  for (auto& u : p) std::sort(u.begin(), u.end());
}

// Marsaglia & Tsang (2000), "A simple method for generating gamma variables", for shape >= 1.
double gamma_mt(double shape, Rng& rng) {
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0.0, v = 0.0;
    do {
      x = rng.normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = rng.uniform();
    // Squeeze first: it accepts ~98% of draws without a logarithm.
    if (u < 1.0 - 0.0331 * (x * x) * (x * x)) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

// Uniform on (0, 1): excludes 0 so that its logarithm is finite.
double open_uniform(Rng& rng) {
  double u = 0.0;
  do u = rng.uniform();
  while (u <= 0.0);
  return u;
}

void check_shape_param(double shape, const char* fn) {
  if (!(shape > 0.0) || !std::isfinite(shape))
    throw InvalidInput(std::string(fn) + ": shape must be positive and finite, got " +
                       std::to_string(shape));
}

// log of a Gamma(shape, 1) variate; for shape < 1 the boost U^(1/shape) is applied in log
// space, where it cannot underflow (for shape 0.01 the variate itself is often below 1e-300).
double log_gamma_variate(double shape, Rng& rng) {
  if (shape >= 1.0) return std::log(gamma_mt(shape, rng));
  const double g = gamma_mt(shape + 1.0, rng);
  return std::log(g) + std::log(open_uniform(rng)) / shape;
}

}  // namespace

double sample_gamma(double shape, Rng& rng) {
  check_shape_param(shape, "sample_gamma");
  if (shape >= 1.0) return gamma_mt(shape, rng);
  const double g = gamma_mt(shape + 1.0, rng);
  return g * std::pow(open_uniform(rng), 1.0 / shape);
}

std::vector<double> sample_dirichlet(index_t k, double alpha, Rng& rng) {
  require_positive(k, "sample_dirichlet", "k");
  check_shape_param(alpha, "sample_dirichlet");
  std::vector<double> p(static_cast<size_t>(k));
  double top = -std::numeric_limits<double>::infinity();
  for (auto& v : p) {
    v = log_gamma_variate(alpha, rng);
    top = std::max(top, v);
  }
  // Normalise relative to the largest component (log-sum-exp), so the largest is exp(0) = 1.
  double sum = 0.0;
  for (auto& v : p) {
    v = std::exp(v - top);
    sum += v;
  }
  for (auto& v : p) v /= sum;
  return p;
}

Partition partition_iid(index_t num_samples, index_t num_users, index_t per_user,
                        std::uint64_t seed) {
  require_positive(num_users, "partition_iid", "num_users");
  require_positive(per_user, "partition_iid", "per_user");
  require_enough("partition_iid", num_users, per_user, num_samples);
  Rng rng(seed);
  std::vector<index_t> perm = iota(num_samples);
  const index_t need = checked_mul(num_users, per_user, "partition_iid: users x samples per user");
  partial_shuffle(perm, static_cast<size_t>(need), rng);
  Partition p(static_cast<size_t>(num_users));
  for (index_t u = 0; u < num_users; ++u)
    p[static_cast<size_t>(u)].assign(perm.begin() + u * per_user,
                                     perm.begin() + (u + 1) * per_user);
  sort_users(p);
  return p;
}

Partition partition_even(index_t num_samples, index_t num_users, std::uint64_t seed) {
  require_positive(num_users, "partition_even", "num_users");
  if (num_samples < 0)
    throw InvalidInput("partition_even: num_samples must be >= 0, got " +
                       std::to_string(num_samples));
  Rng rng(seed);
  std::vector<index_t> perm = iota(num_samples);
  partial_shuffle(perm, perm.size(), rng);
  Partition p(static_cast<size_t>(num_users));
  const index_t base = num_samples / num_users, extra = num_samples % num_users;
  index_t next = 0;
  for (index_t u = 0; u < num_users; ++u) {
    const index_t size = base + (u < extra ? 1 : 0);
    p[static_cast<size_t>(u)].assign(perm.begin() + next, perm.begin() + next + size);
    next += size;
  }
  sort_users(p);
  return p;
}

Partition partition_label_skew(const std::vector<double>& y, index_t num_classes, index_t num_users,
                               index_t per_user, std::uint64_t seed) {
  const char* fn = "partition_label_skew";
  require_positive(num_users, fn, "num_users");
  if (per_user < 0)
    throw InvalidInput(std::string(fn) + ": per_user must be >= 0 (0 = all samples), got " +
                       std::to_string(per_user));
  auto pools = class_pools(y, num_classes, fn);
  Rng rng(seed);
  Partition p(static_cast<size_t>(num_users));
  for (index_t k = 0; k < num_classes; ++k) {
    // Users k, k + K, k + 2K, ... hold class k.
    std::vector<index_t> users;
    for (index_t u = k; u < num_users; u += num_classes) users.push_back(u);
    auto& pool = pools[static_cast<size_t>(k)];
    const index_t have = static_cast<index_t>(pool.size());
    const index_t m = static_cast<index_t>(users.size());
    if (m == 0) continue;
    if (per_user > 0) {
      if (per_user > have / m)
        throw InvalidInput(std::string(fn) + ": class " + std::to_string(k) + " has " +
                           std::to_string(have) + " samples, but its " + std::to_string(m) +
                           " user(s) need " + std::to_string(m) + " x " + std::to_string(per_user) +
                           " = " + product_text(m, per_user));
      partial_shuffle(
          pool,
          static_cast<size_t>(checked_mul(m, per_user, std::string(fn) + ": users x per_user")),
          rng);
      for (index_t j = 0; j < m; ++j)
        p[static_cast<size_t>(users[static_cast<size_t>(j)])].assign(
            pool.begin() + j * per_user, pool.begin() + (j + 1) * per_user);
    } else {
      if (have < m)
        throw InvalidInput(std::string(fn) + ": class " + std::to_string(k) + " has " +
                           std::to_string(have) + " samples, fewer than the " + std::to_string(m) +
                           " users holding it");
      partial_shuffle(pool, pool.size(), rng);
      const index_t base = have / m, extra = have % m;
      index_t next = 0;
      for (index_t j = 0; j < m; ++j) {
        const index_t size = base + (j < extra ? 1 : 0);
        p[static_cast<size_t>(users[static_cast<size_t>(j)])].assign(pool.begin() + next,
                                                                     pool.begin() + next + size);
        next += size;
      }
    }
  }
  sort_users(p);
  return p;
}

Partition partition_dirichlet(const std::vector<double>& y, index_t num_classes, index_t num_users,
                              index_t per_user, double alpha, std::uint64_t seed) {
  const char* fn = "partition_dirichlet";
  require_positive(num_users, fn, "num_users");
  require_positive(per_user, fn, "per_user");
  if (!(alpha > 0.0) || !std::isfinite(alpha))
    throw InvalidInput(std::string(fn) + ": alpha must be positive and finite, got " +
                       std::to_string(alpha));
  auto pools = class_pools(y, num_classes, fn);
  require_enough(fn, num_users, per_user, static_cast<index_t>(y.size()));

  Rng rng(seed);
  std::vector<std::vector<double>> props;
  for (index_t u = 0; u < num_users; ++u)
    props.push_back(sample_dirichlet(num_classes, alpha, rng));
  for (auto& pool : pools) partial_shuffle(pool, pool.size(), rng);

  Partition p(static_cast<size_t>(num_users));
  for (auto& u : p) u.reserve(static_cast<size_t>(per_user));
  std::vector<double> w(static_cast<size_t>(num_classes));
  for (index_t round = 0; round < per_user; ++round) {
    for (index_t u = 0; u < num_users; ++u) {
      const auto& pu = props[static_cast<size_t>(u)];
      double total = 0.0;
      for (size_t k = 0; k < w.size(); ++k) {
        w[k] = pools[k].empty() ? 0.0 : pu[k];
        total += w[k];
      }
      if (!(total > 0.0)) {
        // The user's proportions vanish on every class left: fall back to the samples left.
        total = 0.0;
        for (size_t k = 0; k < w.size(); ++k) {
          w[k] = static_cast<double>(pools[k].size());
          total += w[k];
        }
      }
      const double r = rng.uniform() * total;
      double acc = 0.0;
      size_t pick = w.size();
      for (size_t k = 0; k < w.size(); ++k) {
        if (w[k] <= 0.0) continue;
        pick = k;  // the last class with weight also catches r == total after rounding
        acc += w[k];
        if (r < acc) break;
      }
      p[static_cast<size_t>(u)].push_back(pools[pick].back());
      pools[pick].pop_back();
    }
  }
  sort_users(p);
  return p;
}

std::vector<double> quantile_bins(const std::vector<double>& y, index_t bins) {
  const index_t n = static_cast<index_t>(y.size());
  if (bins < 1 || bins > n)
    throw InvalidInput("quantile_bins: " + std::to_string(bins) + " bins for " + std::to_string(n) +
                       " values; expected 1 to " + std::to_string(n));
  for (index_t i = 0; i < n; ++i)
    if (!std::isfinite(y[static_cast<size_t>(i)]))
      throw InvalidInput("quantile_bins: value " + std::to_string(i) +
                         " is not finite; expected finite regression targets");
  std::vector<index_t> order(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) {
    return y[static_cast<size_t>(a)] < y[static_cast<size_t>(b)];
  });
  std::vector<double> out(static_cast<size_t>(n));
  double bin = 0;
  for (index_t r = 0; r < n; ++r) {
    const index_t i = order[static_cast<size_t>(r)];
    const bool tie = r > 0 && y[static_cast<size_t>(i)] ==
                                  y[static_cast<size_t>(order[static_cast<size_t>(r - 1)])];
    if (!tie) bin = static_cast<double>(r * bins / n);
    out[static_cast<size_t>(i)] = bin;
  }
  return out;
}

TrainTest random_split(const Dataset& d, index_t test_size, std::uint64_t seed) {
  const index_t n = d.samples();
  if (test_size < 0 || test_size > n)
    throw InvalidInput("random_split: test_size " + std::to_string(test_size) + " is outside 0.." +
                       std::to_string(n) + " (the dataset's samples)");
  Rng rng(seed);
  std::vector<index_t> perm = iota(n);
  partial_shuffle(perm, static_cast<size_t>(test_size), rng);
  std::vector<index_t> test(perm.begin(), perm.begin() + test_size);
  std::vector<index_t> train(perm.begin() + test_size, perm.end());
  std::sort(test.begin(), test.end());
  std::sort(train.begin(), train.end());
  return {take(d, train), take(d, test)};
}

std::vector<index_t> stratified_allocation(const std::vector<index_t>& class_sizes, index_t n) {
  index_t total = 0;
  for (size_t k = 0; k < class_sizes.size(); ++k) {
    if (class_sizes[k] < 0)
      throw InvalidInput("stratified_allocation: class " + std::to_string(k) + " has size " +
                         std::to_string(class_sizes[k]) + "; expected a size >= 0");
    total = checked_add(total, class_sizes[k], "stratified_allocation: total size");
  }
  if (n < 0 || n > total)
    throw InvalidInput("stratified_allocation: " + std::to_string(n) +
                       " rows requested, expected 0.." + std::to_string(total) +
                       " (the rows of all classes)");
  std::vector<index_t> counts(class_sizes.size(), 0), remainder(class_sizes.size(), 0);
  if (n == 0) return counts;
  index_t given = 0;
  for (size_t k = 0; k < class_sizes.size(); ++k) {
    // quota = n * size / total exactly: floor and remainder of the integer division.
    const index_t prod = checked_mul(n, class_sizes[k], "stratified_allocation: n x class size");
    counts[k] = prod / total;
    remainder[k] = prod % total;
    given += counts[k];
  }
  std::vector<size_t> order(class_sizes.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  // Largest remainder first; stable, so equal remainders keep the smaller class index first.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  // n - given < number of classes, and every class with a non-zero remainder has
  // floor(quota) < size, so the extra row always exists.
  for (size_t q = 0; given < n; ++q, ++given) ++counts[order[q]];
  return counts;
}

std::vector<index_t> subsample(const std::vector<double>& y, index_t num_classes, index_t n,
                               bool stratified, std::uint64_t seed) {
  const index_t total = static_cast<index_t>(y.size());
  if (n < 0 || n > total)
    throw InvalidInput("subsample: " + std::to_string(n) + " samples requested, expected 0.." +
                       std::to_string(total) + " (the samples available)");
  Rng rng(seed);
  std::vector<index_t> out;
  if (!stratified || num_classes == 0) {
    std::vector<index_t> perm = iota(total);
    partial_shuffle(perm, static_cast<size_t>(n), rng);
    out.assign(perm.begin(), perm.begin() + n);
  } else {
    auto pools = class_pools(y, num_classes, "subsample");
    std::vector<index_t> sizes;
    for (const auto& p : pools) sizes.push_back(static_cast<index_t>(p.size()));
    const auto counts = stratified_allocation(sizes, n);
    for (size_t k = 0; k < pools.size(); ++k) {
      partial_shuffle(pools[k], static_cast<size_t>(counts[k]), rng);
      out.insert(out.end(), pools[k].begin(), pools[k].begin() + counts[k]);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Dataset repeat_rows(const Dataset& d, index_t n) {
  const index_t rows = d.samples();
  if (rows < 1)
    throw InvalidInput("repeat_rows: the dataset '" + d.name + "' has no rows to repeat");
  if (n < rows)
    throw InvalidInput("repeat_rows: " + std::to_string(n) + " rows requested, expected at least " +
                       "the " + std::to_string(rows) + " rows of '" + d.name +
                       "' (every row appears at least once)");
  std::vector<index_t> idx(static_cast<size_t>(n));
  for (index_t k = 0; k < n; ++k) idx[static_cast<size_t>(k)] = k % rows;
  return take(d, idx);
}

TrainTest pool_splits(const TrainTest& tt) {
  const Dataset &a = tt.train, &b = tt.test;
  if (b.samples() < 1)
    throw InvalidInput("pool_splits: '" + a.name +
                       "' has no official test rows to pool with its training rows");
  if (b.features() != a.features() || b.num_classes != a.num_classes)
    throw InvalidInput("pool_splits: the test rows of '" + a.name + "' have " +
                       std::to_string(b.features()) + " features and " +
                       std::to_string(b.num_classes) + " classes, expected the training rows' " +
                       std::to_string(a.features()) + " and " + std::to_string(a.num_classes));
  if (static_cast<index_t>(a.y.size()) != a.samples() ||
      static_cast<index_t>(b.y.size()) != b.samples())
    throw InvalidInput("pool_splits: '" + a.name + "' has a label count unlike its row count");
  TrainTest out;
  out.train = take(a, {});  // the metadata
  out.train.X = vstack(std::vector<const Matrix<double>*>{&a.X, &b.X});
  out.train.y = a.y;
  out.train.y.insert(out.train.y.end(), b.y.begin(), b.y.end());
  if (!a.sample_ids.empty() && !b.sample_ids.empty()) {
    out.train.sample_ids = a.sample_ids;
    out.train.sample_ids.insert(out.train.sample_ids.end(), b.sample_ids.begin(),
                                b.sample_ids.end());
  }
  out.test = take(a, {});
  return out;
}

Dataset take(const Dataset& d, const std::vector<index_t>& idx) {
  Dataset out;
  out.name = d.name;
  out.X = take_rows(d.X, idx);
  out.y = take(d.y, idx);
  out.num_classes = d.num_classes;
  out.feature_names = d.feature_names;
  out.class_names = d.class_names;
  out.continuous_columns = d.continuous_columns;
  if (!d.sample_ids.empty()) out.sample_ids = take(d.sample_ids, idx);
  out.note = d.note;
  return out;
}

std::vector<std::vector<index_t>> attribute_blocks(const std::vector<std::string>& feature_names,
                                                   index_t blocks) {
  if (blocks < 1)
    throw InvalidInput("attribute_blocks: " + std::to_string(blocks) +
                       " blocks; expected at least one");
  // Attributes in column order: a column "attr=level" joins the attribute "attr" (one-hot
  // columns of one attribute are adjacent in the loaders' output, but need not be here).
  std::vector<std::string> attributes;
  std::vector<std::vector<index_t>> columns;
  for (size_t j = 0; j < feature_names.size(); ++j) {
    const std::string& name = feature_names[j];
    const std::string attr = name.substr(0, name.find('='));
    const auto it = std::find(attributes.begin(), attributes.end(), attr);
    if (it == attributes.end()) {
      attributes.push_back(attr);
      columns.push_back({static_cast<index_t>(j)});
    } else {
      columns[static_cast<size_t>(it - attributes.begin())].push_back(static_cast<index_t>(j));
    }
  }
  const index_t k = static_cast<index_t>(attributes.size());
  if (k < blocks)
    throw InvalidInput("attribute_blocks: " + std::to_string(k) + " attribute(s) cannot fill " +
                       std::to_string(blocks) + " blocks; every block needs at least one");
  std::vector<std::vector<index_t>> out(static_cast<size_t>(blocks));
  index_t next = 0;
  for (index_t b = 0; b < blocks; ++b) {
    const index_t count = k / blocks + (b < k % blocks ? 1 : 0);
    for (index_t a = next; a < next + count; ++a)
      for (index_t col : columns[static_cast<size_t>(a)])
        out[static_cast<size_t>(b)].push_back(col);
    next += count;
    std::sort(out[static_cast<size_t>(b)].begin(), out[static_cast<size_t>(b)].end());
  }
  return out;
}

}  // namespace dcalign::data
