// LIBSVM's RBF predictions computed in blocks (see svm_rbf.hpp for why and how). This file is
// compiled with -ffp-contract=off: a fused multiply-add rounds once where LIBSVM rounds twice,
// and would change the last bit of a distance or a decision value.
#include "learn/svm_rbf.hpp"

#include <libsvm/svm.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dcalign::learn::detail {

namespace {

// GCC/Clang vector extension: 8 doubles, lowered to AVX-512, AVX2 or SSE2 registers by the
// target of the function it is used in. Element-wise operations only: nothing is reassociated.
typedef double V8 __attribute__((vector_size(64)));
constexpr index_t kLanes = 8;
constexpr index_t kSvBlock = 2 * kLanes;  // support vectors per register block
constexpr index_t kRowGroup = 4;          // test rows per register block

// Squared distances of kRowGroup test rows to kSvBlock support vectors. x[t] points at the
// row group's values of feature visit[t] (column-major X: the rows are adjacent; offsets
// `lane` pick each row), y[t] at the block's values of that feature in the support-vector
// matrix. Each distance is summed over t in order, as LIBSVM's k_function sums its terms in
// ascending feature order.
struct GroupArgs {
  const double* const* x;
  const double* const* y;
  index_t count;
  index_t lane[kRowGroup];
  double* out[kRowGroup];  // kSvBlock distances per row
};

__attribute__((always_inline)) inline void group_distances(const GroupArgs& a) {
  V8 acc[kRowGroup][2] = {};
  for (index_t t = 0; t < a.count; ++t) {
    V8 y0, y1;
    std::memcpy(&y0, a.y[t], sizeof(V8));
    std::memcpy(&y1, a.y[t] + kLanes, sizeof(V8));
    const double* x = a.x[t];
    for (index_t r = 0; r < kRowGroup; ++r) {
      const double xr = x[a.lane[r]];
      const V8 d0 = xr - y0;
      const V8 d1 = xr - y1;
      acc[r][0] += d0 * d0;
      acc[r][1] += d1 * d1;
    }
  }
  for (index_t r = 0; r < kRowGroup; ++r) {
    std::memcpy(a.out[r], &acc[r][0], sizeof(V8));
    std::memcpy(a.out[r] + kLanes, &acc[r][1], sizeof(V8));
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) void group_distances_avx512(const GroupArgs& a) {
  group_distances(a);
}
__attribute__((target("avx2"))) void group_distances_avx2(const GroupArgs& a) {
  group_distances(a);
}
#endif
void group_distances_generic(const GroupArgs& a) { group_distances(a); }

using GroupFn = void (*)(const GroupArgs&);

GroupFn pick_group_fn() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return &group_distances_avx512;
  if (__builtin_cpu_supports("avx2")) return &group_distances_avx2;
#endif
  return &group_distances_generic;
}

// svm_predict_values' C-SVC branch on precomputed kernel values: the same sums in the same
// order, the same votes and the same tie-break (the first class with the most votes).
// `start` holds each class's first support vector (svm_predict_values recomputes it per call).
double vote(const svm_model& m, const double* kvalue, const std::vector<int>& start,
            std::vector<int>& votes) {
  const int k = m.nr_class;
  votes.assign(static_cast<size_t>(k), 0);
  int p = 0;
  for (int i = 0; i < k; ++i)
    for (int j = i + 1; j < k; ++j) {
      double sum = 0;
      const int si = start[i], sj = start[j], ci = m.nSV[i], cj = m.nSV[j];
      const double* coef1 = m.sv_coef[j - 1];
      const double* coef2 = m.sv_coef[i];
      for (int t = 0; t < ci; ++t) sum += coef1[si + t] * kvalue[si + t];
      for (int t = 0; t < cj; ++t) sum += coef2[sj + t] * kvalue[sj + t];
      sum -= m.rho[p];
      if (sum > 0)
        ++votes[i];
      else
        ++votes[j];
      ++p;
    }
  int best = 0;
  for (int i = 1; i < k; ++i)
    if (votes[i] > votes[best]) best = i;
  return m.label[best];
}

// The epsilon-SVR branch: one sum over every support vector, less rho.
double regress(const svm_model& m, const double* kvalue) {
  double sum = 0;
  for (int i = 0; i < m.l; ++i) sum += m.sv_coef[0][i] * kvalue[i];
  return sum - m.rho[0];
}

}  // namespace

RbfPredictor::RbfPredictor(const svm_model& m, index_t features) {
  if (m.param.kernel_type != RBF || (m.param.svm_type != C_SVC && m.param.svm_type != EPSILON_SVR))
    return;
  if (m.param.svm_type == C_SVC) {
    if (m.nr_class < 2 || m.nSV == nullptr) return;
    start_.assign(static_cast<size_t>(m.nr_class), 0);
    for (int i = 1; i < m.nr_class; ++i) start_[i] = start_[i - 1] + m.nSV[i - 1];
  }
  features_ = features;
  svs_ = m.l;
  padded_ = (svs_ + kSvBlock - 1) / kSvBlock * kSvBlock;
  // Features that some support vector uses get a row; the others share the zero last row.
  std::vector<char> used(static_cast<size_t>(features), 0);
  for (index_t i = 0; i < svs_; ++i)
    for (const svm_node* p = m.SV[i]; p->index != -1; ++p) {
      if (p->index < 1 || p->index > features) return;  // not a model of `features` columns
      used[static_cast<size_t>(p->index - 1)] = 1;
    }
  index_t rows = 0;
  for (char u : used) rows += u;
  if (static_cast<double>(rows + 1) * static_cast<double>(padded_) * sizeof(double) >
      static_cast<double>(kMaxBytes))
    return;
  row_of_.assign(static_cast<size_t>(features), static_cast<int>(rows));
  index_t next = 0;
  for (index_t j = 0; j < features; ++j)
    if (used[static_cast<size_t>(j)]) row_of_[static_cast<size_t>(j)] = static_cast<int>(next++);
  sv_.assign(static_cast<size_t>((rows + 1) * padded_), 0.0);
  for (index_t i = 0; i < svs_; ++i)
    for (const svm_node* p = m.SV[i]; p->index != -1; ++p)
      sv_[static_cast<size_t>(row_of_[static_cast<size_t>(p->index - 1)] * padded_ + i)] = p->value;
  usable_ = true;
}

void RbfPredictor::predict(const svm_model& m, const Matrix<double>& X, index_t begin, index_t end,
                           double* out) const {
  static const GroupFn group_fn = pick_group_fn();
  const index_t ld = X.rows();
  const double* data = X.data();
  const int zero_row = static_cast<int>(sv_.size() / static_cast<size_t>(padded_)) - 1;
  std::vector<double> dist(static_cast<size_t>(kTileRows * padded_));
  std::vector<std::vector<int>> visit(static_cast<size_t>(kTileRows / kRowGroup));
  std::vector<const double*> xs, ys;
  std::vector<int> votes;
  for (index_t t0 = begin; t0 < end; t0 += kTileRows) {
    const index_t rows = std::min(kTileRows, end - t0);
    const index_t groups = (rows + kRowGroup - 1) / kRowGroup;
    // The features each row group visits: those of some support vector, and the group's own
    // nonzeros. Any other feature is zero in the row and in every support vector: LIBSVM's
    // merge skips it, and so may we.
    for (index_t g = 0; g < groups; ++g) {
      const index_t r0 = t0 + g * kRowGroup, r1 = std::min(r0 + kRowGroup, t0 + rows);
      std::vector<int>& v = visit[static_cast<size_t>(g)];
      v.clear();
      for (index_t j = 0; j < features_; ++j) {
        bool keep = row_of_[static_cast<size_t>(j)] != zero_row;
        for (index_t r = r0; r < r1 && !keep; ++r) keep = data[r + j * ld] != 0.0;
        if (keep) v.push_back(static_cast<int>(j));
      }
    }
    // Support-vector blocks outside, row groups inside: a block's values stay in cache while
    // every group of the tile passes over them.
    for (index_t s0 = 0; s0 < padded_; s0 += kSvBlock) {
      for (index_t g = 0; g < groups; ++g) {
        const index_t r0 = t0 + g * kRowGroup, n = std::min(kRowGroup, t0 + rows - r0);
        const std::vector<int>& v = visit[static_cast<size_t>(g)];
        xs.resize(v.size());
        ys.resize(v.size());
        for (size_t t = 0; t < v.size(); ++t) {
          xs[t] = data + r0 + static_cast<index_t>(v[t]) * ld;
          ys[t] = sv_.data() + row_of_[static_cast<size_t>(v[t])] * padded_ + s0;
        }
        GroupArgs a{xs.data(), ys.data(), static_cast<index_t>(v.size()), {}, {}};
        for (index_t r = 0; r < kRowGroup; ++r) {
          const index_t rr = std::min(r, n - 1);  // a short last group repeats its last row
          a.lane[r] = rr;
          a.out[r] = dist.data() + ((g * kRowGroup + rr) * padded_ + s0);
        }
        group_fn(a);
      }
    }
    for (index_t r = 0; r < rows; ++r) {
      double* k = dist.data() + r * padded_;
      for (index_t s = 0; s < svs_; ++s) k[s] = std::exp(-m.param.gamma * k[s]);
      out[t0 - begin + r] = m.param.svm_type == C_SVC ? vote(m, k, start_, votes) : regress(m, k);
    }
  }
}

}  // namespace dcalign::learn::detail
