// Users with different latent dimensions l_i (include/dcalign/align.hpp, align_ragged): the
// methods whose G_i need not be square, Imakura-DC and Kawakami-DC, on the backend primitives.
// The concatenation W = [A_1 ... A_c] is one a x sum(l_i) matrix in backend memory (user i's
// columns from offset_i = l_1 + ... + l_{i-1}), so the spectral step is the uniform one's; the
// per-user steps (least squares, QR, back substitution) run on one-matrix stacks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/common.hpp"
#include "dcalign/error.hpp"

namespace dcalign {
namespace {

std::string dimensions(const std::vector<index_t>& l) {
  std::string out;
  for (std::size_t i = 0; i < l.size() && i < 8; ++i) out += (i ? ", " : "") + std::to_string(l[i]);
  return out + (l.size() > 8 ? ", ..." : "");
}

template <typename T>
void check_ragged(const std::vector<Matrix<T>>& A, index_t dim, const AlignOptions& opts) {
  if (A.empty()) throw InvalidInput("align_ragged: no users");
  std::vector<index_t> l;
  for (const auto& m : A) l.push_back(m.cols());
  if (opts.method != Method::imakura && opts.method != Method::kawakami)
    throw InvalidInput("method " + to_string(opts.method) +
                       " needs one latent dimension for every user (its G_i are l x l), but "
                       "the users have l_i = " +
                       dimensions(l) + ": use imakura or kawakami, or give every user one l");
  const index_t a = A[0].rows();
  for (std::size_t i = 0; i < A.size(); ++i) {
    const auto& m = A[i];
    const std::string who = "user " + std::to_string(i);
    if (m.rows() != a)
      throw InvalidInput(who + "'s anchor has " + std::to_string(m.rows()) +
                         " rows: expected user 0's " + std::to_string(a) + " (one anchor A)");
    if (m.cols() < 1 || m.cols() > a)
      throw InvalidInput(who + "'s anchor is " + std::to_string(a) + " x " +
                         std::to_string(m.cols()) + ": expected 1 <= l_i <= a");
    for (index_t j = 0; j < m.cols(); ++j)
      for (index_t r = 0; r < a; ++r)
        if (!std::isfinite(m(r, j)))
          throw InvalidInput(who + "'s anchor has a non-finite entry (NaN or Inf) at row " +
                             std::to_string(r) + ", column " + std::to_string(j));
  }
  const index_t total = std::accumulate(l.begin(), l.end(), index_t{0});
  if (dim < 1 || dim > std::min(a, total))
    throw InvalidInput("dim " + std::to_string(dim) + " is out of range: expected 1 to min(a, " +
                       "sum of l_i) = " + std::to_string(std::min(a, total)));
}

// sum_i ||A_i G_i - Z||_F^2 in double on the host; with Z empty, against Zbar = mean A_i G_i.
template <typename T>
double host_objective(const std::vector<Matrix<T>>& A, const std::vector<Matrix<T>>& G,
                      const Matrix<T>& Z) {
  const index_t a = A[0].rows(), k = G[0].cols();
  std::vector<std::vector<double>> AG;
  for (std::size_t i = 0; i < A.size(); ++i) {
    std::vector<double> m(static_cast<std::size_t>(a * k), 0.0);
    for (index_t c = 0; c < k; ++c)
      for (index_t j = 0; j < A[i].cols(); ++j) {
        const double g = G[i](j, c);
        for (index_t r = 0; r < a; ++r) m[static_cast<std::size_t>(c * a + r)] += A[i](r, j) * g;
      }
    AG.push_back(std::move(m));
  }
  std::vector<double> ref(static_cast<std::size_t>(a * k), 0.0);
  if (Z.size() > 0) {
    std::copy(Z.data(), Z.data() + Z.size(), ref.begin());
  } else {
    for (const auto& m : AG)
      for (std::size_t e = 0; e < ref.size(); ++e) ref[e] += m[e] / static_cast<double>(AG.size());
  }
  double sum = 0;
  for (const auto& m : AG)
    for (std::size_t e = 0; e < ref.size(); ++e) sum += (m[e] - ref[e]) * (m[e] - ref[e]);
  return sum;
}

// Kawakami's constraint: max_k |sum_i ||A_i g_ik||^2 - 1|.
template <typename T>
double kawakami_constraint(const std::vector<Matrix<T>>& A, const std::vector<Matrix<T>>& G) {
  const index_t a = A[0].rows(), k = G[0].cols();
  double worst = 0;
  for (index_t c = 0; c < k; ++c) {
    double s = 0;
    for (std::size_t i = 0; i < A.size(); ++i)
      for (index_t r = 0; r < a; ++r) {
        double v = 0;
        for (index_t j = 0; j < A[i].cols(); ++j) v += A[i](r, j) * double(G[i](j, c));
        s += v * v;
      }
    worst = std::max(worst, std::abs(s - 1.0));
  }
  return worst;
}

}  // namespace

template <typename T>
RaggedAlignment<T> align_ragged(const std::vector<Matrix<T>>& anchors, index_t dim,
                                const AlignOptions& opts, Backend& backend) {
  check_ragged(anchors, dim, opts);
  auto& p = backend.primitives<T>();
  const index_t c = static_cast<index_t>(anchors.size()), a = anchors[0].rows();
  std::vector<index_t> offset(static_cast<std::size_t>(c) + 1, 0);
  for (index_t i = 0; i < c; ++i)
    offset[static_cast<std::size_t>(i) + 1] =
        offset[static_cast<std::size_t>(i)] + anchors[i].cols();
  const index_t total = offset.back();

  RaggedAlignment<T> out;
  AlignReport& r = out.report;
  r.method = to_string(opts.method);
  r.device = to_string(p.device());
  r.precision = sizeof(T) == 4 ? "float32" : "float64";
  r.users = c;
  r.anchor_rows = a;
  r.dim = dim;
  core::PhaseTimer<T> timer(p, r);

  Buffer<T> w = p.allocate(a * total);
  for (index_t i = 0; i < c; ++i)
    p.to_device(anchors[i].data(), w.data() + a * offset[i], anchors[i].size());
  const MatrixView<T> W(w.data(), a, total);
  const auto user = [&](index_t i) { return W.cols_range(offset[i], anchors[i].cols()); };
  std::vector<Buffer<T>> g;
  for (index_t i = 0; i < c; ++i) g.push_back(p.allocate(anchors[i].cols() * dim));
  const auto G = [&](index_t i) {
    return StackView<T>(g[static_cast<std::size_t>(i)].data(), 1, anchors[i].cols(), dim);
  };
  timer.lap("upload");
  std::vector<T> s(static_cast<std::size_t>(dim));
  std::vector<T> ratio(static_cast<std::size_t>(c));

  if (opts.method == Method::imakura) {
    Buffer<T> u = p.allocate(a * dim), z = p.allocate(a * dim);
    MatrixView<T> U(u.data(), a, dim), Z(z.data(), a, dim);
    r.svd = core::topk_svd(p, MatrixView<const T>(W), dim, opts.svd, s.data(), U, MatrixView<T>())
                .describe();
    timer.lap("svd");
    if (opts.right == RightFactor::identity) {
      p.copy(u.data(), z.data(), a * dim);
    } else {
      Buffer<T> rf = core::upload(p, core::right_factor(opts, dim));
      p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(U),
             MatrixView<const T>(rf.data(), dim, dim), T(0), Z);
    }
    for (index_t i = 0; i < c; ++i) {
      const MatrixView<T> Ai = user(i);
      const auto one = p.lstsq_batched(StackView<const T>(Ai.data(), 1, a, Ai.cols()),
                                       MatrixView<const T>(Z), G(i));
      ratio[static_cast<std::size_t>(i)] = one.front();
    }
    timer.lap("least_squares");
    out.target = Matrix<T>(a, dim);
    p.to_host(z.data(), out.target.data(), a * dim);
  } else {
    // QR of every user in place in W (W becomes [Q_1 ... Q_c]).
    std::vector<Buffer<T>> R;
    for (index_t i = 0; i < c; ++i) {
      const index_t li = anchors[i].cols();
      R.push_back(p.allocate(li * li));
      const auto one = p.qr_batched(StackView<T>(user(i).data(), 1, a, li),
                                    StackView<T>(R.back().data(), 1, li, li));
      ratio[static_cast<std::size_t>(i)] = one.front();
    }
    timer.lap("qr");
    Buffer<T> v = p.allocate(total * dim);
    MatrixView<T> V(v.data(), total, dim);
    r.svd = core::topk_svd(p, MatrixView<const T>(W), dim, opts.svd, s.data(), MatrixView<T>(), V)
                .describe();
    if (opts.kawakami_form == KawakamiForm::eigen)
      r.svd += "; eigen form solved through its equivalent QR-SVD form";
    timer.lap("svd");
    for (index_t i = 0; i < c; ++i) {
      const index_t li = anchors[i].cols();
      const MatrixView<const T> Vi(V.rows_range(offset[i], li));
      p.geam(T(1), Vi, T(0), Vi, G(i)[0]);
      p.trsm_upper_batched(StackView<const T>(R[static_cast<std::size_t>(i)].data(), 1, li, li),
                           G(i));
    }
    timer.lap("back_substitution");
  }
  r.min_rank_ratio = *std::min_element(ratio.begin(), ratio.end());
  // The threshold of align(): l eps(T) by default, here with the largest l_i.
  const index_t lmax =
      std::max_element(anchors.begin(), anchors.end(), [](const auto& x, const auto& y) {
        return x.cols() < y.cols();
      })->cols();
  const double tolerance = opts.rank_tolerance >= 0
                               ? opts.rank_tolerance
                               : double(lmax) * double(std::numeric_limits<T>::epsilon());
  core::check_rank(ratio, tolerance, "A_i");

  for (index_t i = 0; i < c; ++i) {
    Matrix<T> Gi(anchors[i].cols(), dim);
    p.to_host(g[static_cast<std::size_t>(i)].data(), Gi.data(), Gi.size());
    out.G.push_back(std::move(Gi));
  }
  p.synchronize();
  timer.lap("download");
  if (opts.evaluate) {
    r.objective = host_objective(anchors, out.G, out.target);
    if (opts.method == Method::kawakami) {
      r.consensus_objective = r.objective;
      r.constraint_error = kawakami_constraint(anchors, out.G);
    }
    r.evaluated = true;
    timer.lap("evaluate");
  }
  return out;
}

template <typename T>
RaggedAlignment<T> align_ragged(const std::vector<Matrix<T>>& anchors, index_t dim,
                                const AlignOptions& opts) {
  auto backend = make_backend(Device::cpu);
  return align_ragged(anchors, dim, opts, *backend);
}

template RaggedAlignment<float> align_ragged<float>(const std::vector<Matrix<float>>&, index_t,
                                                    const AlignOptions&, Backend&);
template RaggedAlignment<double> align_ragged<double>(const std::vector<Matrix<double>>&, index_t,
                                                      const AlignOptions&, Backend&);
template RaggedAlignment<float> align_ragged<float>(const std::vector<Matrix<float>>&, index_t,
                                                    const AlignOptions&);
template RaggedAlignment<double> align_ragged<double>(const std::vector<Matrix<double>>&, index_t,
                                                      const AlignOptions&);

}  // namespace dcalign
