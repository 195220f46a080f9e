// Alignment sharded over users (issue 16): the methods of src/core with their couplings between
// users turned into reductions (see dcalign/distributed.hpp for the plan of each method).
//
// Every phase that can fail on one rank ends in an agreement (collective(), or a flag folded
// into the phase's own allreduce, as in GOPP's iterations), so that no rank waits in a
// collective that a failed rank never enters.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "core/common.hpp"
#include "core/gopp_stop.hpp"
#include "core/methods.hpp"
#include "dcalign/distributed.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/random.hpp"

namespace dcalign::dist {

void Communicator::allreduce_sum_device(double*, index_t) {
  throw BackendError("this communicator cannot reduce device memory");
}
void Communicator::allreduce_sum_device(float*, index_t) {
  throw BackendError("this communicator cannot reduce device memory");
}

UserRange even_split(index_t users, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks || users < 0)
    throw InvalidInput("even_split: rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                       " ranks, " + std::to_string(users) + " users");
  UserRange r;
  r.first = users * rank / ranks;
  r.count = users * (rank + 1) / ranks - r.first;
  return r;
}

namespace {

enum Kind : std::int64_t { kNone = 0, kError, kInvalid, kIo, kNumerical, kBackend };

struct Failure {
  std::int64_t kind = kNone;
  std::string message;
};

Failure capture(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidInput& e) {
    return {kInvalid, e.what()};
  } catch (const IoError& e) {
    return {kIo, e.what()};
  } catch (const NumericalError& e) {
    return {kNumerical, e.what()};
  } catch (const BackendError& e) {
    return {kBackend, e.what()};
  } catch (const std::bad_alloc&) {
    return {kError, "out of memory (a memory allocation failed)"};
  } catch (const std::exception& e) {
    return {kError, e.what()};
  }
  return {};
}

[[noreturn]] void throw_kind(std::int64_t kind, const std::string& message) {
  switch (kind) {
    case kInvalid:
      throw InvalidInput(message);
    case kIo:
      throw IoError(message);
    case kNumerical:
      throw NumericalError(message);
    case kBackend:
      throw BackendError(message);
    default:
      throw Error(message);
  }
}

/// Called by every rank once the ranks know that some rank failed: the lowest failing rank's
/// error, broadcast, is thrown everywhere.
[[noreturn]] void resolve(Communicator& comm, const Failure& local) {
  double lowest = local.kind != kNone ? comm.rank() : comm.size();
  comm.allreduce_min(&lowest, 1);
  const int root = static_cast<int>(lowest);
  std::int64_t head[2] = {local.kind, static_cast<std::int64_t>(local.message.size())};
  comm.broadcast(head, sizeof head, root);
  std::string message = comm.rank() == root ? local.message : std::string(head[1], ' ');
  comm.broadcast(message.data(), head[1], root);
  throw_kind(head[0], "rank " + std::to_string(root) + " of " + std::to_string(comm.size()) + ": " +
                          message);
}

/// core's messages name users by their index in the stack they were given ("user 3: ...
/// A_3 ..."); this rank's users start at `first`.
std::string global_users(const std::string& message, index_t first) {
  if (first == 0 || message.compare(0, 5, "user ") != 0) return message;
  std::size_t end = 5;
  while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
  if (end == 5) return message;
  const std::string local = message.substr(5, end - 5);
  const std::string global = std::to_string(std::stoll(local) + first);
  std::string out = "user " + global + message.substr(end);
  const std::string from = "A_" + local, to = "A_" + global;
  for (std::size_t at = out.find(from); at != std::string::npos; at = out.find(from, at)) {
    const std::size_t after = at + from.size();
    if (after < out.size() && std::isdigit(static_cast<unsigned char>(out[after]))) {
      at = after;
      continue;
    }
    out.replace(at, from.size(), to);
    at += to.size();
  }
  return out;
}

template <typename T>
struct Shard {
  Communicator& comm;
  Primitives<T>& p;
  StackView<const T> A;  ///< this rank's anchors (backend memory)
  StackView<T> G;        ///< this rank's G_i (backend memory)
  index_t first, total;
  const AlignOptions& opts;
  AlignReport& report;
  core::PhaseTimer<T>& timer;
  double rank_tolerance;
  index_t rows() const { return A.rows(); }
  index_t dim() const { return A.cols(); }

  /// Local work that may fail, with users named globally, agreed between the ranks.
  void local(const std::function<void()>& fn) {
    const index_t f = first;
    collective(comm, [&] {
      try {
        fn();
      } catch (const InvalidInput& e) {
        throw InvalidInput(global_users(e.what(), f));
      }
    });
  }
  /// In-place sum over the ranks of n values in backend memory.
  void sum(T* x, index_t n) {
    p.synchronize();
    if (p.device() == Device::cpu) {
      comm.allreduce_sum(x, n);
    } else if (comm.reduces_device_memory(p.device())) {
      comm.allreduce_sum_device(x, n);
    } else {
      std::vector<T> h(static_cast<size_t>(n));
      p.to_host(x, h.data(), n);
      p.synchronize();
      comm.allreduce_sum(h.data(), n);
      p.to_device(h.data(), x, n);
    }
  }
  /// n values in backend memory from `root` to every rank.
  void broadcast(T* x, index_t n, int root) {
    p.synchronize();
    if (p.device() == Device::cpu) {
      comm.broadcast(x, n * index_t(sizeof(T)), root);
      return;
    }
    std::vector<T> h(static_cast<size_t>(n));
    if (comm.rank() == root) p.to_host(x, h.data(), n);
    p.synchronize();
    comm.broadcast(h.data(), n * index_t(sizeof(T)), root);
    p.to_device(h.data(), x, n);
  }
  /// The top-l basis U (a x l, backend memory) and singular values s computed on rank 0, to
  /// every rank; the same values everywhere, so every rank throws alike (none waits) when the
  /// concatenated anchor has rank below l.
  void share_basis(T* U, std::vector<T>& s, index_t a, index_t l) {
    timer.lap("eigensolver");
    broadcast(U, a * l, 0);
    comm.broadcast(s.data(), l * index_t(sizeof(T)), 0);
    timer.lap("broadcast");
    if (!(s.back() > T(0)))
      throw InvalidInput("the concatenated anchor [A_1 ... A_c] has rank below l = " +
                         std::to_string(l) + "; no l-dimensional target exists");
  }
  int owner(index_t user) const {
    for (int k = 0; k < comm.size(); ++k) {
      const UserRange r = ranges[static_cast<size_t>(k)];
      if (user >= r.first && user < r.first + r.count) return k;
    }
    return 0;
  }
  std::vector<UserRange> ranges;
};

/// Top-l left singular vectors of [X_1 ... X_c] over all ranks into U (a x l, every rank) and
/// their singular values into s: the a x a Gram matrix sum_i X_i X_i^T (one allreduce of a^2
/// values), its l largest eigenpairs on rank 0, broadcast. Returns the report's svd text.
template <typename T>
std::string gram_left_vectors(Shard<T>& sh, StackView<const T> X, MatrixView<T> U,
                              std::vector<T>& s) {
  auto& p = sh.p;
  const index_t a = sh.rows(), l = sh.dim();
  Buffer<T> kb = p.allocate(a * a);
  MatrixView<T> K(kb.data(), a, a);
  sh.local([&] { p.syrk(Op::none, T(1), X.concatenated(), T(0), K); });
  sh.timer.lap("gram");
  sh.sum(kb.data(), a * a);
  sh.timer.lap("allreduce_gram");
  s.assign(static_cast<size_t>(l), T(0));
  sh.local([&] {
    if (sh.comm.rank() != 0) return;
    if (!p.all_finite(kb.data(), a * a))
      throw NumericalError(
          "the Gram matrix sum_i A_i A_i^T overflowed although the anchors are finite; rescale "
          "the anchors (or use float64)");
    std::vector<T> lambda(static_cast<size_t>(l));
    p.syev_largest(K, l, lambda.data(), U);
    for (index_t j = 0; j < l; ++j) s[j] = std::sqrt(std::max(lambda[j], T(0)));
    core::canonical_signs(p, U, MatrixView<T>());  // topk_svd's sign convention
  });
  sh.share_basis(U.data(), s, a, l);
  std::string what = "gram (distributed: sum over ranks of the a x a Gram matrix)";
  const double ratio = static_cast<double>(s.front()) / static_cast<double>(s.back());
  if (ratio > core::kGramMaxRatio) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "; sigma_1/sigma_l = %.3g > %g: subspace error up to eps (sigma_1/sigma_l)^2, "
                  "where a single process would take the exact SVD",
                  ratio, core::kGramMaxRatio);
    what += buf;
  }
  return what;
}

/// Above this many anchor rows the a x a Gram matrix (512 MiB in double at 8192) and its
/// allreduce outweigh the sketch, which the default (gram) then takes instead.
constexpr index_t kGramMaxRows = 8192;

/// Top-l left singular vectors by Halko, Martinsson and Tropp's range finder, sharded: the
/// sketch Y = sum_i A_i Omega_i (a x k, k = l + oversampling) with Omega_i drawn from the seed
/// and the user's global index (so Y does not depend on the number of ranks), q power steps
/// Y = sum_i A_i (A_i^T Q), each one allreduce of a k values, then the k x k matrix
/// sum_i (Q^T A_i)(A_i^T Q) (one allreduce) whose top-l eigenvectors V give U = Q V.
template <typename T>
std::string sketch_left_vectors(Shard<T>& sh, StackView<const T> X, MatrixView<T> U,
                                std::vector<T>& s) {
  auto& p = sh.p;
  const index_t a = sh.rows(), l = sh.dim(), n = X.count() * l;
  const index_t k = std::min(a, l + std::max<index_t>(0, sh.opts.svd.oversampling));
  const auto W = X.concatenated();
  Buffer<T> yb = p.allocate(a * k), bb = p.allocate(n * k), rb = p.allocate(k * k);
  MatrixView<T> Y(yb.data(), a, k), B(bb.data(), n, k);
  sh.local([&] {
    Matrix<double> omega(n, k);  // [Omega_1; ...; Omega_c] of this rank's users
    for (index_t i = 0; i < X.count(); ++i) {
      Rng rng = Rng::stream(sh.opts.svd.seed,
                            0x5CE7C40000000000ULL + static_cast<std::uint64_t>(sh.first + i));
      const Matrix<double> o = random_normal<double>(l, k, rng);
      for (index_t j = 0; j < k; ++j)
        for (index_t r = 0; r < l; ++r) omega(i * l + r, j) = o(r, j);
    }
    Buffer<T> om = core::upload(p, omega);
    p.gemm(Op::none, Op::none, T(1), W, MatrixView<const T>(om.data(), n, k), T(0), Y);
  });
  // Y <- orth(sum over ranks of Y), on rank 0, broadcast.
  auto orthonormalise = [&] {
    sh.sum(yb.data(), a * k);
    sh.local([&] {
      if (sh.comm.rank() != 0) return;
      if (!p.all_finite(yb.data(), a * k))
        throw NumericalError("the randomized sketch of [A_1 ... A_c] is not finite");
      p.qr_batched(StackView<T>(yb.data(), 1, a, k), StackView<T>(rb.data(), 1, k, k));
    });
    sh.broadcast(yb.data(), a * k, 0);
  };
  orthonormalise();
  for (int q = 0; q < sh.opts.svd.power_iterations; ++q) {
    sh.local([&] {
      p.gemm(Op::trans, Op::none, T(1), W, MatrixView<const T>(Y), T(0), B);
      p.gemm(Op::none, Op::none, T(1), W, MatrixView<const T>(B), T(0), Y);
    });
    orthonormalise();
  }
  sh.timer.lap("sketch");
  Buffer<T> cb = p.allocate(k * k), vb = p.allocate(k * l);
  sh.local([&] {
    p.gemm(Op::trans, Op::none, T(1), W, MatrixView<const T>(Y), T(0), B);
    p.syrk(Op::trans, T(1), MatrixView<const T>(B), T(0), MatrixView<T>(cb.data(), k, k));
  });
  sh.timer.lap("projection");
  sh.sum(cb.data(), k * k);
  s.assign(static_cast<size_t>(l), T(0));
  sh.local([&] {
    if (sh.comm.rank() != 0) return;
    std::vector<T> lambda(static_cast<size_t>(l));
    MatrixView<T> V(vb.data(), k, l);
    p.syev_largest(MatrixView<T>(cb.data(), k, k), l, lambda.data(), V);
    for (index_t j = 0; j < l; ++j) s[j] = std::sqrt(std::max(lambda[j], T(0)));
    p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(Y), MatrixView<const T>(V), T(0), U);
    core::canonical_signs(p, U, MatrixView<T>());  // topk_svd's sign convention
  });
  sh.share_basis(U.data(), s, a, l);
  return "randomized (distributed sketch: oversampling " + std::to_string(k - l) + ", " +
         std::to_string(sh.opts.svd.power_iterations) + " power iterations)";
}

/// The top-l left singular vectors by the route the options and the size choose.
template <typename T>
std::string left_vectors(Shard<T>& sh, StackView<const T> X, MatrixView<T> U, std::vector<T>& s) {
  if (sh.opts.svd.algorithm == SvdAlgorithm::randomized) return sketch_left_vectors(sh, X, U, s);
  if (sh.rows() > kGramMaxRows)
    return sketch_left_vectors(sh, X, U, s) + "; gram asked, but a = " + std::to_string(sh.rows()) +
           " > " + std::to_string(kGramMaxRows) + " makes the a x a Gram matrix too large";
  return gram_left_vectors(sh, X, U, s);
}

/// Z = A_r O on the rank that owns r (as run_odc forms it), broadcast; or the explicit target.
template <typename T>
void odc_target(Shard<T>& sh, MatrixView<T> Z) {
  auto& p = sh.p;
  const index_t a = sh.rows(), l = sh.dim();
  if (sh.opts.target.size() > 0) {
    sh.local([&] {
      const auto& given = sh.opts.target;
      if (given.rows() != a || given.cols() != l)
        throw InvalidInput("explicit ODC target Z is " + std::to_string(given.rows()) + " x " +
                           std::to_string(given.cols()) +
                           ", expected a x l = " + std::to_string(a) + " x " + std::to_string(l));
      core::require_finite(given, "explicit ODC target Z");
      Buffer<T> up = core::upload(p, given);
      p.copy(up.data(), Z.data(), a * l);
    });
    return;
  }
  const int owner = sh.owner(sh.opts.reference_user);
  sh.local([&] {
    // Every rank draws O (cheap, l x l): a bad supplied O fails everywhere alike.
    Buffer<T> o = core::upload(p, core::target_rotation(sh.opts, l));
    if (sh.comm.rank() != owner) return;
    const index_t r = sh.opts.reference_user - sh.first;
    p.gemm(Op::none, Op::none, T(1), sh.A[r], MatrixView<const T>(o.data(), l, l), T(0), Z);
  });
  sh.broadcast(Z.data(), a * l, owner);
}

template <typename T>
Matrix<double> host_double(Primitives<T>& p, MatrixView<const T> X) {
  std::vector<T> h(static_cast<size_t>(X.rows() * X.cols()));
  p.to_host(X.data(), h.data(), X.rows() * X.cols());
  p.synchronize();
  Matrix<double> m(X.rows(), X.cols());
  for (size_t k = 0; k < h.size(); ++k) m.data()[k] = static_cast<double>(h[k]);
  return m;
}

/// What the methods hand to the evaluation, besides G and Z.
struct Partial {
  double objective = 0;  ///< this rank's share of a summed objective
  bool objective_summed = false;
  double min_ratio = std::numeric_limits<double>::infinity();
  std::int64_t promoted = 0;  ///< float32 users this rank recomputed in float64
};

/// ODC and OPP: every G_i = polar(A_i^T Z) is local, through the single-process code with Z as
/// its explicit target (align_resident also derives this rank's share of the objective).
template <typename T>
Partial procrustes_local(Shard<T>& sh, MatrixView<const T> Z) {
  AlignOptions lo = sh.opts;
  lo.method = Method::odc;
  lo.target = host_double(sh.p, Z);
  lo.reference_user = 0;
  lo.evaluate_consensus = false;
  AlignReport rep;
  sh.local([&] { rep = align_resident(sh.p, sh.A, sh.G, MatrixView<T>(), lo); });
  sh.timer.lap("procrustes");
  sh.report.iterations = rep.iterations;
  Partial part;
  part.objective = rep.objective;
  part.objective_summed = true;
  part.min_ratio = rep.min_rank_ratio;
  part.promoted = rep.promoted_users;
  return part;
}

template <typename T>
Partial run_imakura(Shard<T>& sh, MatrixView<T> Z) {
  auto& p = sh.p;
  const index_t a = sh.rows(), l = sh.dim();
  sh.local([&] { validate_anchor_values(p, sh.A); });
  std::vector<T> s;
  Buffer<T> u = p.allocate(a * l);
  MatrixView<T> U(u.data(), a, l);
  sh.report.svd = left_vectors(sh, sh.A, U, s);
  sh.local([&] {
    Buffer<T> r = core::upload(p, core::right_factor(sh.opts, l));
    p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(U), MatrixView<const T>(r.data(), l, l),
           T(0), Z);
  });
  sh.timer.lap("target");
  Partial part;
  sh.local([&] {
    const auto ratio = p.lstsq_batched(sh.A, MatrixView<const T>(Z), sh.G);
    part.min_ratio = static_cast<double>(*std::min_element(ratio.begin(), ratio.end()));
    core::check_rank(ratio, sh.rank_tolerance, "A_i");
  });
  sh.timer.lap("least_squares");
  return part;
}

/// Kawakami-DC, QR-SVD form: U and S of [Q_1 ... Q_c] from the summed Gram matrix; the right
/// singular vectors' blocks are g^_i = Q_i^T U S^-1 (W_Q^T U = V S), G_i = R_i^{-1} g^_i.
template <typename T>
Partial run_kawakami(Shard<T>& sh) {
  auto& p = sh.p;
  const index_t a = sh.rows(), l = sh.dim(), n = sh.A.count();
  sh.local([&] { validate_anchor_values(p, sh.A); });
  Buffer<T> q = p.allocate(a * l * n), r = p.allocate(l * l * n);
  StackView<T> Q(q.data(), n, a, l), R(r.data(), n, l, l);
  Partial part;
  sh.local([&] {
    p.copy(sh.A.data(), q.data(), a * l * n);
    const auto ratio = p.qr_batched(Q, R);
    part.min_ratio = static_cast<double>(*std::min_element(ratio.begin(), ratio.end()));
    core::check_rank(ratio, sh.rank_tolerance, "A_i (min |R_jj| / max |R_jj| of its QR factor)");
  });
  sh.timer.lap("qr");
  std::vector<T> s;
  Buffer<T> u = p.allocate(a * l);
  MatrixView<T> U(u.data(), a, l);
  sh.report.svd = left_vectors(sh, StackView<const T>(Q), U, s);
  if (sh.opts.kawakami_form == KawakamiForm::eigen)
    sh.report.svd += "; eigen form solved through its equivalent QR-SVD form";
  sh.local([&] {
    std::vector<T> d(static_cast<size_t>(l * l), T(0));
    for (index_t j = 0; j < l; ++j) d[static_cast<size_t>(j * l + j)] = T(1) / s[j];
    Buffer<T> dd = p.allocate(l * l), v = p.allocate(n * l * l), w = p.allocate(n * l * l);
    p.to_device(d.data(), dd.data(), l * l);
    p.gemm(Op::trans, Op::none, T(1), StackView<const T>(Q).concatenated(), MatrixView<const T>(U),
           T(0), MatrixView<T>(v.data(), n * l, l));
    p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(v.data(), n * l, l),
           MatrixView<const T>(dd.data(), l, l), T(0), MatrixView<T>(w.data(), n * l, l));
    p.unvstack(MatrixView<const T>(w.data(), n * l, l), sh.G);
    p.trsm_upper_batched(StackView<const T>(R), sh.G);
  });
  sh.timer.lap("back_substitution");
  return part;
}

/// GOPP: G_i = polar(A_i^T Z) locally, then Z = sum over ranks of (1/c) sum_i A_i G_i: one
/// allreduce of a x l values per iteration, which also carries the iteration's failure flag and
/// the number of users whose step was more than rounding (the single process's stopping rule,
/// src/core/gopp_stop.hpp).
template <typename T>
Partial run_gopp(Shard<T>& sh, MatrixView<T> Z) {
  auto& p = sh.p;
  const index_t a = sh.rows(), l = sh.dim(), c = sh.total, n = sh.A.count() * l;
  bool checked = false;
  if (sh.opts.gopp_init == GoppInit::spectral) {
    sh.local([&] { validate_anchor_values(p, sh.A); });
    checked = true;
    std::vector<T> s;
    sh.report.svd = left_vectors(sh, sh.A, Z, s);
  } else {
    odc_target(sh, Z);
  }
  sh.timer.lap("init");
  double total = 0;
  sh.local([&] { total = p.sum_squares(sh.A.data(), sh.A.size()); });
  sh.comm.allreduce_sum(&total, 1);
  const core::GoppStop stop = core::GoppStop::make<T>(sh.opts, total, l);

  Buffer<T> gv = p.allocate(n * l), scratch = p.allocate(n * l), zp = p.allocate(a * l + 2);
  Buffer<T> step = p.allocate(n * l);
  MatrixView<T> Gv(gv.data(), n, l), D(step.data(), n, l);
  const StackView<const T> Dblocks(step.data(), sh.A.count(), l, l, n, l);
  AlignReport local_report;
  core::Context<T> ctx{
      p,       sh.A,        sh.G, sh.opts, local_report, sh.timer, sh.rank_tolerance,
      checked, Buffer<T>(), {},   {}};
  Partial part;
  sh.report.converged = false;
  sh.report.stop_reason = core::kStopCap;
  for (index_t it = 0; it < sh.opts.gopp_max_iterations; ++it) {
    T moving = 0;  // local users whose step was more than rounding
    Failure failure = capture([&] {
      try {
        PolarInfo<T> info = core::procrustes_step(ctx, MatrixView<const T>(Z), scratch.data());
        // As in core/gopp.cpp: the rank decision, float32 users promoted to float64.
        const std::vector<double> ratio = core::decide_ranks<T>(
            ctx, info, [&] { return MatrixView<const T>(Z); }, nullptr, "A_i^T Z (GOPP start)",
            it == 0);
        if (it == 0) part.min_ratio = *std::min_element(ratio.begin(), ratio.end());
        part.promoted = local_report.promoted_users;
        p.vstack(StackView<const T>(sh.G), Gv);
        if (it > 0) {
          p.geam(T(1), MatrixView<const T>(Gv), T(-1), MatrixView<const T>(D), D);
          for (double s2 : p.inner_products(Dblocks, Dblocks))
            if (!stop.step_is_rounding(s2)) moving += T(1);
        }
        p.copy(Gv.data(), D.data(), n * l);
        p.gemm(Op::none, Op::none, T(1) / T(c), sh.A.concatenated(), MatrixView<const T>(Gv), T(0),
               MatrixView<T>(zp.data(), a, l));
      } catch (const InvalidInput& e) {
        throw InvalidInput(global_users(e.what(), sh.first));
      }
    });
    p.fill(zp.data() + a * l, 1, failure.kind != kNone ? T(1) : T(0));
    p.fill(zp.data() + a * l + 1, 1, moving);
    sh.sum(zp.data(), a * l + 2);
    T flags[2] = {0, 0};
    p.to_host(zp.data() + a * l, flags, 2);
    p.synchronize();
    if (flags[0] > T(0)) resolve(sh.comm, failure);
    p.copy(zp.data(), Z.data(), a * l);
    const double czz = static_cast<double>(c) * p.sum_squares(Z.data(), a * l);
    const double f = std::max(0.0, total - czz);
    sh.report.objective_history.push_back(f);
    sh.report.iterations = it + 1;
    if (!std::isfinite(f)) throw NumericalError("GOPP: the objective became non-finite");
    if (const char* why = stop.reason(sh.report.objective_history, it > 0 && flags[1] == T(0))) {
      sh.report.converged = true;
      sh.report.stop_reason = why;
      break;
    }
  }
  sh.timer.lap("iterations");
  return part;
}

/// The report's evaluation (src/core/align.cpp's evaluate), its sums and extremes reduced over
/// the ranks: one allreduce of a few values, plus a x l for the consensus objective.
template <typename T>
void evaluate(Shard<T>& sh, MatrixView<const T> Z, Partial part) {
  auto& p = sh.p;
  auto& r = sh.report;
  const index_t a = sh.rows(), l = sh.dim(), c = sh.total, n = sh.A.count() * l;
  const core::MethodInfo& info = core::method_info(sh.opts.method);
  const bool orthogonal = info.orthogonal;
  const bool kawakami = info.objective == core::ObjectiveKind::consensus;
  const bool tracked_consensus =
      info.objective == core::ObjectiveKind::tracked && info.tracked_is_consensus;
  const bool consensus = (sh.opts.evaluate_consensus || kawakami) && !tracked_consensus;
  // sums: objective, ||A||^2, consensus residuals, then (Kawakami) the l column sums.
  std::vector<double> sums(static_cast<size_t>(3 + l), 0.0);
  double orth = 0;
  Buffer<T> zbar = p.allocate(consensus ? a * l : 0);
  auto add = [](const auto& v) {
    return std::accumulate(v.begin(), v.end(), 0.0,
                           [](double s, auto x) { return s + static_cast<double>(x); });
  };
  sh.local([&] {
    const auto e = p.orthogonality_errors(StackView<const T>(sh.G));
    orth = static_cast<double>(*std::max_element(e.begin(), e.end()));
    if (part.objective_summed)
      sums[0] = part.objective;
    else if (info.objective == core::ObjectiveKind::to_target && !orthogonal)
      sums[0] = add(p.residuals(sh.A, StackView<const T>(sh.G), Z));
    if (consensus) {
      sums[1] = add(p.inner_products(sh.A, sh.A));
      Buffer<T> gv = p.allocate(n * l);
      p.vstack(StackView<const T>(sh.G), MatrixView<T>(gv.data(), n, l));
      p.gemm(Op::none, Op::none, T(1) / T(c), sh.A.concatenated(),
             MatrixView<const T>(gv.data(), n, l), T(0), MatrixView<T>(zbar.data(), a, l));
    }
    if (info.column_constraint) {
      const auto norms = p.product_column_norms(sh.A, StackView<const T>(sh.G));
      const index_t k = sh.A.count();
      for (index_t j = 0; j < l; ++j)
        for (index_t i = 0; i < k; ++i) sums[3 + j] += static_cast<double>(norms[i + j * k]);
    }
  });
  if (consensus) {
    sh.sum(zbar.data(), a * l);
    if (!orthogonal)
      sums[2] =
          add(p.residuals(sh.A, StackView<const T>(sh.G), MatrixView<const T>(zbar.data(), a, l)));
  }
  sh.comm.allreduce_sum(sums.data(), static_cast<index_t>(sums.size()));
  sh.comm.allreduce_max(&orth, 1);
  r.orthogonality_error = orth;
  r.consensus_objective = std::numeric_limits<double>::quiet_NaN();
  if (tracked_consensus) {
    r.objective = r.objective_history.empty() ? 0.0 : r.objective_history.back();
    r.consensus_objective = r.objective;
  } else {
    r.objective = std::max(0.0, sums[0]);
  }
  if (consensus) {
    r.consensus_objective =
        orthogonal
            ? std::max(0.0, sums[1] - static_cast<double>(c) * p.sum_squares(zbar.data(), a * l))
            : sums[2];
    if (kawakami) r.objective = r.consensus_objective;
  }
  if (info.column_constraint) {
    double worst = 0;
    for (index_t j = 0; j < l; ++j) worst = std::max(worst, std::abs(sums[3 + j] - 1.0));
    r.constraint_error = worst;
  }
  r.evaluated = true;
}

}  // namespace

void collective(Communicator& comm, const std::function<void()>& fn) {
  const Failure failure = capture(fn);
  double failed = failure.kind != kNone ? 1.0 : 0.0;
  comm.allreduce_max(&failed, 1);
  if (failed > 0) resolve(comm, failure);
}

template <typename T>
LocalAlignment<T> align_distributed(Communicator& comm, const Stack<T>& anchors, index_t first_user,
                                    index_t total_users, const AlignOptions& opts,
                                    Backend& backend) {
  auto& p = backend.primitives<T>();
  const int P = comm.size(), me = comm.rank();
  // The slices: contiguous, in rank order, of one shape, covering all users.
  std::vector<std::int64_t> shape(static_cast<size_t>(5 * P), 0);
  shape[5 * me + 0] = first_user;
  shape[5 * me + 1] = anchors.count();
  shape[5 * me + 2] = anchors.rows();
  shape[5 * me + 3] = anchors.cols();
  shape[5 * me + 4] = total_users;
  comm.allreduce_sum(shape.data(), static_cast<index_t>(shape.size()));
  std::vector<UserRange> ranges(static_cast<size_t>(P));
  index_t next = 0;
  for (int k = 0; k < P; ++k) {
    const std::int64_t* v = &shape[static_cast<size_t>(5 * k)];
    const std::string who = "rank " + std::to_string(k) + " of " + std::to_string(P);
    if (v[1] < 1)
      throw InvalidInput(who + " holds no users; every rank needs at least one (" +
                         std::to_string(total_users) + " users over " + std::to_string(P) +
                         " ranks)");
    if (v[0] != next)
      throw InvalidInput(who + " holds users from " + std::to_string(v[0]) + ", expected " +
                         std::to_string(next) + ": the slices must be contiguous, in rank order");
    if (v[2] != shape[2] || v[3] != shape[3])
      throw InvalidInput(who + " has anchors of " + std::to_string(v[2]) + " x " +
                         std::to_string(v[3]) + ", rank 0 of " + std::to_string(shape[2]) + " x " +
                         std::to_string(shape[3]) + ": every A_i must have the same shape");
    if (v[4] != shape[4])
      throw InvalidInput(who + " was told of " + std::to_string(v[4]) + " users, rank 0 of " +
                         std::to_string(shape[4]));
    ranges[static_cast<size_t>(k)] = {v[0], v[1]};
    next += v[1];
  }
  if (next != total_users)
    throw InvalidInput("the ranks hold " + std::to_string(next) + " users, but total_users is " +
                       std::to_string(total_users));
  const Method m = opts.method;
  if (m == Method::rdp_ls || m == Method::rdp_opp)
    throw InvalidInput("method " + to_string(m) +
                       " is not available distributed: its objective couples every pair of "
                       "users; run it in one process");
  if (m != Method::odc && opts.svd.algorithm == SvdAlgorithm::exact &&
      !(m == Method::gopp && opts.gopp_init == GoppInit::odc))
    throw InvalidInput("distributed " + to_string(m) +
                       ": svd exact is not available distributed (it would factorise all of "
                       "[A_1 ... A_c] in one process); use gram (the default) or randomized");
  if (opts.reference_user < 0 || opts.reference_user >= total_users)
    throw InvalidInput("reference user " + std::to_string(opts.reference_user) +
                       " out of range: there are " + std::to_string(total_users) +
                       " users (0-based)");

  LocalAlignment<T> out;
  out.users = ranges[static_cast<size_t>(me)];
  AlignReport& report = out.report;
  report.method = to_string(m);
  report.device = to_string(p.device());
  report.blas = blas_info();
  report.precision = std::is_same_v<T, float> ? "float32" : "float64";
  report.users = total_users;
  report.anchor_rows = anchors.rows();
  report.dim = anchors.cols();
  core::PhaseTimer<T> timer(p, report);
  const index_t a = anchors.rows(), l = anchors.cols(), n = anchors.count();
  AlignOptions local_opts = opts;
  local_opts.reference_user = 0;

  out.G = Stack<T>(n, l, l);
  const bool has_target = core::method_info(m).has_target;
  if (has_target) out.target = Matrix<T>(a, l);
  // Backend memory: the host arrays themselves on the CPU, copies on a device.
  Buffer<T> dA, dG, dZ;
  StackView<const T> A = anchors.view();
  StackView<T> G = out.G.view();
  MatrixView<T> Z = has_target ? out.target.view() : MatrixView<T>();
  collective(comm, [&] {
    validate_anchors(p, anchors.view(), local_opts);
    if (p.device() != Device::cpu) {
      dA = p.allocate(anchors.size());
      dG = p.allocate(out.G.size());
      p.to_device(anchors.data(), dA.data(), anchors.size());
      A = StackView<const T>(dA.data(), n, a, l);
      G = StackView<T>(dG.data(), n, l, l);
      if (has_target) {
        dZ = p.allocate(a * l);
        Z = MatrixView<T>(dZ.data(), a, l);
      }
    }
  });
  timer.lap("validate");
  const double tol = opts.rank_tolerance >= 0
                         ? opts.rank_tolerance
                         : static_cast<double>(l) * std::numeric_limits<T>::epsilon();
  Shard<T> sh{comm, p, A, G, first_user, total_users, opts, report, timer, tol, ranges};
  Partial part;
  switch (m) {
    case Method::odc:
      odc_target(sh, Z);
      timer.lap("target");
      part = procrustes_local(sh, MatrixView<const T>(Z));
      break;
    case Method::opp: {
      std::vector<T> s;
      sh.local([&] { validate_anchor_values(p, A); });
      report.svd = left_vectors(sh, A, Z, s);
      part = procrustes_local(sh, MatrixView<const T>(Z));
      break;
    }
    case Method::imakura:
      part = run_imakura(sh, Z);
      break;
    case Method::kawakami:
      part = run_kawakami(sh);
      break;
    case Method::gopp:
      part = run_gopp(sh, Z);
      break;
    default:
      break;
  }
  double extremes[2] = {part.min_ratio, static_cast<double>(report.iterations)};
  double lowest = extremes[0];
  comm.allreduce_min(&lowest, 1);
  comm.allreduce_max(&extremes[1], 1);
  report.min_rank_ratio = lowest;
  report.iterations = static_cast<index_t>(extremes[1]);
  std::int64_t promoted = part.promoted;
  comm.allreduce_sum(&promoted, 1);
  report.promoted_users = static_cast<index_t>(promoted);
  collective(comm, [&] {
    if (!p.all_finite(G.data(), G.size()))
      throw NumericalError(report.method +
                           ": the computed change-of-basis matrices contain NaN or Inf (input "
                           "passed validation; please report this)");
  });
  if (opts.evaluate) {
    evaluate(sh, MatrixView<const T>(Z), part);
    timer.lap("evaluate");
  }
  if (p.device() != Device::cpu) {
    p.to_host(G.data(), out.G.data(), out.G.size());
    if (has_target) p.to_host(Z.data(), out.target.data(), a * l);
    p.synchronize();
    timer.lap("download");
  }
  // Phases: the slowest rank's time for each (the ranks ran the same phases).
  std::vector<double> secs;
  for (const auto& ps : report.seconds) secs.push_back(ps.second);
  double range[2] = {-static_cast<double>(secs.size()), static_cast<double>(secs.size())};
  comm.allreduce_max(range, 2);
  if (-range[0] == range[1]) {
    comm.allreduce_max(secs.data(), static_cast<index_t>(secs.size()));
    report.total_seconds = 0;
    for (size_t k = 0; k < secs.size(); ++k) {
      report.seconds[k].second = secs[k];
      report.total_seconds += secs[k];
    }
  }
  return out;
}

template <typename T>
void write_npy_distributed(Communicator& comm, const std::string& path, StackView<const T> local,
                           index_t first_user, index_t total_users) {
  collective(comm, [&] {
    if (comm.rank() == 0) create_npy_stack<T>(path, total_users, local.rows(), local.cols());
  });
  collective(comm, [&] { write_npy_stack_slice<T>(path, first_user, local); });
}

#define DCALIGN_INSTANTIATE_DIST(T)                                                             \
  template LocalAlignment<T> align_distributed<T>(Communicator&, const Stack<T>&, index_t,      \
                                                  index_t, const AlignOptions&, Backend&);      \
  template void write_npy_distributed<T>(Communicator&, const std::string&, StackView<const T>, \
                                         index_t, index_t);
DCALIGN_INSTANTIATE_DIST(float)
DCALIGN_INSTANTIATE_DIST(double)

}  // namespace dcalign::dist
