// The distributed alignment against the single-process dcalign::align. Run under
// `mpirun -np N` for N = 1..4 (tests/dist/CMakeLists.txt): every rank computes the
// single-process result on the whole (small) stack and compares the G_i of its own users.
//
// Tolerances (relative, per user, Frobenius): ODC 1e-12 (the same target, the same local
// Procrustes step: only the batching of one product differs); GOPP 1e-12 from the ODC start
// and from the spectral start (up to column signs), although its U comes from the a x a Gram
// matrix here and from the c l x c l one (or gesdd) in one process and GOPP's fixed points form
// a family under rotations, so the start's rounding (eps times sigma_1/gap) is not contracted
// away: measured at most 2.8e-15 on these well-separated spectra; Imakura and
// Kawakami 1e-10 (their U: eps kappa^2 of the Gram route against the single process's path),
// up to one sign per column as in tests/core (singular vectors are defined up to sign).
// svd exact gathers [A_1 ... A_c] and runs the single process's SVD: 1e-12 (measured 0 to
// 2e-15). RDP's L-BFGS stops at ||grad f|| <= rdp_gradient_tolerance * E, and f is nearly flat
// along a common change of the G_i (only the log-det penalty pins it), so the rounding of the
// distributed sums (uncompressed A_i instead of one process's QR of W) moves the stopping point
// along that valley: f agrees to 1e-9 relative (measured at most 3e-11), the consensus objective
// to 1e-5 (5e-7) and the G_i to 1e-2 (3.1e-3 at 1-4 ranks); both runs must have converged.
#include <gtest/gtest.h>
#include <mpi.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dcalign/align.hpp"
#include "dcalign/distributed.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/random.hpp"

namespace dcalign {
namespace {

dist::Communicator* g_comm = nullptr;

/// c users A_i = X V_i E_i + noise: X (a x m) Gaussian, V_i orthonormal (m x l, different
/// subspaces, so the top singular values are distinct), E_i Unif[0,1) l x l (non-orthogonal).
template <typename T>
Stack<T> make_anchors(index_t c, index_t a, index_t m, index_t l, std::uint64_t seed) {
  Rng rng = Rng::stream(seed, 1);
  const Matrix<double> X = random_normal<double>(a, m, rng);
  Stack<T> A(c, a, l);
  for (index_t i = 0; i < c; ++i) {
    Rng ri = Rng::stream(seed, 100 + static_cast<std::uint64_t>(i));
    const Matrix<double> Q = random_orthogonal<double>(m, ri);
    const Matrix<double> E = random_uniform<double>(l, l, ri);
    const Matrix<double> N = random_normal<double>(a, l, ri);
    for (index_t j = 0; j < l; ++j)
      for (index_t r = 0; r < a; ++r) {
        double v = 0;
        for (index_t k = 0; k < l; ++k) {
          double xv = 0;
          for (index_t q = 0; q < m; ++q) xv += X(r, q) * Q(q, k);
          v += xv * E(k, j);
        }
        A(i, r, j) = static_cast<T>(v + 0.05 * N(r, j));
      }
  }
  return A;
}

template <typename T>
Stack<T> slice(const Stack<T>& s, dist::UserRange r) {
  Stack<T> out(r.count, s.rows(), s.cols());
  std::copy(s.data() + r.first * s.rows() * s.cols(),
            s.data() + (r.first + r.count) * s.rows() * s.cols(), out.data());
  return out;
}

/// max over this rank's users of ||G_i^dist - G_i^single D||_F / ||G_i^single||_F, with D the
/// column signs that match best (identity when `signs` is false).
template <typename T>
double max_relative_difference(const Stack<T>& local, const Stack<T>& whole, index_t first,
                               bool signs) {
  const index_t l = whole.cols();
  std::vector<double> d(static_cast<size_t>(l), 1.0);
  if (signs)
    for (index_t j = 0; j < l; ++j) {
      double dot = 0;
      for (index_t i = 0; i < local.count(); ++i)
        for (index_t r = 0; r < l; ++r)
          dot += static_cast<double>(local(i, r, j)) * static_cast<double>(whole(first + i, r, j));
      d[static_cast<size_t>(j)] = dot < 0 ? -1.0 : 1.0;
    }
  double worst = 0;
  for (index_t i = 0; i < local.count(); ++i) {
    double num = 0, den = 0;
    for (index_t j = 0; j < l; ++j)
      for (index_t r = 0; r < l; ++r) {
        const double s = static_cast<double>(whole(first + i, r, j)) * d[static_cast<size_t>(j)];
        const double e = static_cast<double>(local(i, r, j)) - s;
        num += e * e;
        den += s * s;
      }
    worst = std::max(worst, std::sqrt(num / den));
  }
  return worst;
}

struct Case {
  const char* name;
  Method method;
  double tol;
  bool signs;
  index_t c, a, l;
  GoppInit init = GoppInit::spectral;
  KawakamiForm form = KawakamiForm::qr_svd;
  SvdAlgorithm svd = SvdAlgorithm::gram;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DistAgreement : public ::testing::TestWithParam<Case> {};

// The G_i of every rank's users equal the single-process ones; the report's objective,
// orthogonality error and (GOPP) iteration history agree too.
TEST_P(DistAgreement, MatchesSingleProcess) {
  const Case cs = GetParam();
  auto& comm = *g_comm;
  const Stack<double> A = make_anchors<double>(cs.c, cs.a, 12, cs.l, 42);
  AlignOptions opts;
  opts.method = cs.method;
  opts.seed = 7;
  opts.reference_user = cs.c - 2;  // owned by the last rank or the one before
  opts.gopp.init = cs.init;
  opts.kawakami_form = cs.form;
  opts.svd.algorithm = cs.svd;
  opts.evaluate_consensus = true;
  auto backend = make_backend(Device::cpu, BackendOptions{1, 0, false});
  const Alignment<double> single = align(A, opts, *backend);
  const dist::UserRange r = dist::even_split(cs.c, comm.rank(), comm.size());
  const auto mine = dist::align_distributed(comm, slice(A, r), r.first, cs.c, opts, *backend);
  EXPECT_EQ(mine.G.count(), r.count);  // (no ASSERT before a collective: it would hang)
  double diff = max_relative_difference(mine.G, single.G, r.first, cs.signs);
  comm.allreduce_max(&diff, 1);
  if (comm.rank() == 0)
    std::printf("[dist] %s: %d ranks, c = %lld: max relative difference %.3g\n", cs.name,
                comm.size(), static_cast<long long>(cs.c), diff);
  EXPECT_LE(diff, cs.tol) << cs.name << " on " << comm.size() << " ranks";
  const auto& a = mine.report;
  const auto& b = single.report;
  EXPECT_EQ(a.users, b.users);
  // RDP: see the tolerances at the top.
  const bool rdp = cs.method == Method::rdp_ls || cs.method == Method::rdp_opp;
  EXPECT_NEAR(a.objective, b.objective, 1e-9 * std::max(1.0, b.objective));
  EXPECT_NEAR(a.consensus_objective, b.consensus_objective,
              (rdp ? 1e-5 : 1e-9) * std::max(1.0, b.consensus_objective));
  EXPECT_LE(a.orthogonality_error, std::max(10 * b.orthogonality_error, 1e-13));
  if (cs.form == KawakamiForm::qr_svd) {  // (the eigen form factorises no A_i: it reports 0)
    EXPECT_NEAR(a.min_rank_ratio, b.min_rank_ratio, (rdp ? 1e-2 : 1e-8) * b.min_rank_ratio);
  }
  if (rdp) {
    EXPECT_TRUE(a.converged);
    EXPECT_TRUE(b.converged);
  }
  if (cs.method == Method::kawakami) {
    EXPECT_LE(a.constraint_error, 1e-10);
  }
  if (cs.method == Method::gopp) {
    EXPECT_EQ(a.iterations, b.iterations);
    EXPECT_EQ(a.converged, b.converged);
    EXPECT_EQ(a.stop_reason, b.stop_reason);
    ASSERT_EQ(a.objective_history.size(), b.objective_history.size());
    double total = 0;
    for (index_t i = 0; i < A.size(); ++i) total += A.data()[i] * A.data()[i];
    for (size_t k = 0; k < a.objective_history.size(); ++k)
      EXPECT_NEAR(a.objective_history[k], b.objective_history[k], 1e-12 * total) << k;
  }
  if (cs.method != Method::kawakami) {
    // The target, on every rank (up to the columns' signs where G has them).
    ASSERT_EQ(mine.target.rows(), cs.a);
    double num = 0, den = 0;
    for (index_t j = 0; j < cs.l; ++j) {
      double dot = 0;
      for (index_t i = 0; i < cs.a; ++i) dot += mine.target(i, j) * single.target(i, j);
      const double s = cs.signs && dot < 0 ? -1.0 : 1.0;
      for (index_t i = 0; i < cs.a; ++i) {
        const double e = mine.target(i, j) - s * single.target(i, j);
        num += e * e;
        den += single.target(i, j) * single.target(i, j);
      }
    }
    EXPECT_LE(std::sqrt(num / den), cs.tol);
  }
}

// c l <= a (c = 7, l = 4, a = 60) takes the single process's Gram-form GOPP and the c l x c l
// Gram route; c l > a (c = 13, l = 5, a = 40) the direct form and the a x a route.
INSTANTIATE_TEST_SUITE_P(
    Methods, DistAgreement,
    ::testing::Values(
        Case{"odc_c7", Method::odc, 1e-12, false, 7, 60, 4},
        Case{"odc_c13", Method::odc, 1e-12, false, 13, 40, 5},
        Case{"gopp_odc_start_c7", Method::gopp, 1e-12, false, 7, 60, 4, GoppInit::odc},
        Case{"gopp_odc_start_c13", Method::gopp, 1e-12, false, 13, 40, 5, GoppInit::odc},
        Case{"gopp_spectral_c7", Method::gopp, 1e-12, true, 7, 60, 4},
        Case{"gopp_spectral_c13", Method::gopp, 1e-12, true, 13, 40, 5},
        Case{"opp_c13", Method::opp, 1e-10, true, 13, 40, 5},
        Case{"imakura_c7", Method::imakura, 1e-10, true, 7, 60, 4},
        Case{"imakura_c13", Method::imakura, 1e-10, true, 13, 40, 5},
        Case{"kawakami_c7", Method::kawakami, 1e-10, true, 7, 60, 4},
        Case{"kawakami_c13", Method::kawakami, 1e-10, true, 13, 40, 5},
        Case{"kawakami_eigen_c13", Method::kawakami, 1e-9, true, 13, 40, 5, GoppInit::spectral,
             KawakamiForm::eigen},
        // svd exact: [A_1 ... A_c] gathered, then the single process's own SVD.
        Case{"imakura_exact_c13", Method::imakura, 1e-12, false, 13, 40, 5, GoppInit::spectral,
             KawakamiForm::qr_svd, SvdAlgorithm::exact},
        Case{"opp_exact_c7", Method::opp, 1e-12, false, 7, 60, 4, GoppInit::spectral,
             KawakamiForm::qr_svd, SvdAlgorithm::exact},
        Case{"kawakami_exact_c13", Method::kawakami, 1e-10, true, 13, 40, 5, GoppInit::spectral,
             KawakamiForm::qr_svd, SvdAlgorithm::exact},
        Case{"gopp_exact_c13", Method::gopp, 1e-12, false, 13, 40, 5, GoppInit::spectral,
             KawakamiForm::qr_svd, SvdAlgorithm::exact},
        // RDP: every rank runs the same L-BFGS; f and its gradient are summed over the ranks
        // from the uncompressed A_i instead of one process's QR-compressed form.
        Case{"rdp_ls_c7", Method::rdp_ls, 1e-2, true, 7, 60, 4, GoppInit::spectral,
             KawakamiForm::qr_svd, SvdAlgorithm::gram},
        Case{"rdp_ls_c13", Method::rdp_ls, 1e-2, true, 13, 40, 5, GoppInit::spectral,
             KawakamiForm::qr_svd, SvdAlgorithm::gram},
        Case{"rdp_opp_c13", Method::rdp_opp, 1e-2, true, 13, 40, 5, GoppInit::spectral,
             KawakamiForm::qr_svd, SvdAlgorithm::gram}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// float32: the same code; agreement to a few units of float rounding.
TEST(DistFloat, OdcAndGoppMatchSingleProcess) {
  auto& comm = *g_comm;
  const index_t c = 13;
  const Stack<float> A = make_anchors<float>(c, 40, 12, 5, 3);
  auto backend = make_backend(Device::cpu, BackendOptions{1, 0, false});
  const dist::UserRange r = dist::even_split(c, comm.rank(), comm.size());
  for (Method m : {Method::odc, Method::gopp}) {
    AlignOptions opts;
    opts.method = m;
    opts.gopp.init = GoppInit::odc;
    opts.gopp.tolerance = 1e-5;
    const auto single = align(A, opts, *backend);
    const auto mine = dist::align_distributed(comm, slice(A, r), r.first, c, opts, *backend);
    double diff = max_relative_difference(mine.G, single.G, r.first, false);
    comm.allreduce_max(&diff, 1);
    EXPECT_LE(diff, 1e-4) << to_string(m);
  }
}

// The randomized sketch (--svd randomized): its Omega_i depend on the seed and the user only,
// so P ranks give the result of one rank (MPI_COMM_SELF) up to rounding and column signs; and
// on anchors of rank l (plus noise) it finds the single-process subspace.
TEST(DistSketch, IndependentOfRankCountAndAccurate) {
  auto& comm = *g_comm;
  const index_t c = 13, l = 4;
  const Stack<double> A = make_anchors<double>(c, 40, l, l, 23);
  auto backend = make_backend(Device::cpu, BackendOptions{1, 0, false});
  MPI_Comm self = MPI_COMM_SELF;
  auto one = dist::make_mpi_communicator(&self);
  const dist::UserRange r = dist::even_split(c, comm.rank(), comm.size());
  for (Method m : {Method::imakura, Method::kawakami, Method::gopp}) {
    AlignOptions opts;
    opts.method = m;
    opts.svd.algorithm = SvdAlgorithm::randomized;
    const auto whole = dist::align_distributed(*one, A, 0, c, opts, *backend);
    const auto mine = dist::align_distributed(comm, slice(A, r), r.first, c, opts, *backend);
    EXPECT_NE(mine.report.svd.find("distributed sketch"), std::string::npos) << mine.report.svd;
    double diff = max_relative_difference(mine.G, whole.G, r.first, true);
    AlignOptions gram = opts;
    gram.svd.algorithm = SvdAlgorithm::gram;
    const auto single = align(A, gram, *backend);
    double error = max_relative_difference(mine.G, single.G, r.first, true);
    double both[2] = {diff, error};
    comm.allreduce_max(both, 2);
    if (comm.rank() == 0)
      std::printf("[dist] sketch %s: %d ranks: against 1 rank %.3g, against gram %.3g\n",
                  to_string(m).c_str(), comm.size(), both[0], both[1]);
    EXPECT_LE(both[0], 1e-10) << to_string(m);
    EXPECT_LE(both[1], 1e-4) << to_string(m);
  }
}

// A NaN in one user: every rank throws the same InvalidInput, naming the user (globally) and
// the rank that holds it; nobody hangs.
TEST(DistErrors, NanIsReportedByEveryRankNamingUserAndRank) {
  auto& comm = *g_comm;
  const index_t c = 7, bad = 5;
  Stack<double> A = make_anchors<double>(c, 30, 10, 3, 5);
  A(bad, 4, 1) = std::nan("");
  const dist::UserRange r = dist::even_split(c, comm.rank(), comm.size());
  int owner = 0;
  for (int k = 0; k < comm.size(); ++k) {
    const auto q = dist::even_split(c, k, comm.size());
    if (bad >= q.first && bad < q.first + q.count) owner = k;
  }
  auto backend = make_backend(Device::cpu, BackendOptions{1, 0, false});
  for (Method m : {Method::odc, Method::imakura, Method::kawakami, Method::gopp}) {
    AlignOptions opts;
    opts.method = m;
    opts.gopp.init = GoppInit::odc;  // finiteness proven by the products, as in ODC
    try {
      dist::align_distributed(comm, slice(A, r), r.first, c, opts, *backend);
      ADD_FAILURE() << to_string(m) << ": no error";
    } catch (const InvalidInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("rank " + std::to_string(owner) + " of " + std::to_string(comm.size())),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("user 5"), std::string::npos) << msg;
      EXPECT_NE(msg.find("row 4, column 1"), std::string::npos) << msg;
    }
  }
}

// A rank-deficient user fails on its own rank in the middle of a method (after reductions the
// ranks shared): every rank throws the owner's error, naming the user globally; nobody hangs.
TEST(DistErrors, RankDeficiencyMidMethodIsReportedByEveryRank) {
  auto& comm = *g_comm;
  const index_t c = 7, bad = 5;
  Stack<double> A = make_anchors<double>(c, 30, 10, 3, 5);
  for (index_t r = 0; r < A.rows(); ++r) A(bad, r, 2) = A(bad, r, 0);  // a repeated column
  const dist::UserRange mine = dist::even_split(c, comm.rank(), comm.size());
  int owner = 0;
  for (int k = 0; k < comm.size(); ++k) {
    const auto q = dist::even_split(c, k, comm.size());
    if (bad >= q.first && bad < q.first + q.count) owner = k;
  }
  auto backend = make_backend(Device::cpu, BackendOptions{1, 0, false});
  for (Method m : {Method::odc, Method::imakura, Method::kawakami, Method::gopp, Method::rdp_ls}) {
    AlignOptions opts;
    opts.method = m;
    try {
      dist::align_distributed(comm, slice(A, mine), mine.first, c, opts, *backend);
      ADD_FAILURE() << to_string(m) << ": no error";
    } catch (const InvalidInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("rank " + std::to_string(owner) + " of " + std::to_string(comm.size())),
                std::string::npos)
          << to_string(m) << ": " << msg;
      EXPECT_NE(msg.find("user 5"), std::string::npos) << to_string(m) << ": " << msg;
      EXPECT_NE(msg.find("rank deficient"), std::string::npos) << to_string(m) << ": " << msg;
    }
  }
}

// The slices are checked against each other before any work.
TEST(DistErrors, InconsistentSlicesAreRejectedOnEveryRank) {
  auto& comm = *g_comm;
  const Stack<double> A = make_anchors<double>(4, 20, 8, 2, 9);
  auto backend = make_backend(Device::cpu, BackendOptions{1, 0, false});
  AlignOptions opts;
  // Every rank claims to start at user 0 of 4: with two or more ranks the slices overlap.
  if (comm.size() == 1) {
    EXPECT_THROW(dist::align_distributed(comm, A, 0, 5, opts, *backend), InvalidInput);
  } else {
    EXPECT_THROW(dist::align_distributed(comm, A, 0, 4, opts, *backend), InvalidInput);
  }
}

// One (c, a, l) NPY file read by offset on every rank; G written slice by slice into one file,
// which equals the single-process result.
TEST(DistNpy, SlicedReadAndWriteMatchSingleProcess) {
  auto& comm = *g_comm;
  const index_t c = 13;
  const Stack<double> A = make_anchors<double>(c, 40, 12, 5, 11);
  std::string dir(256, '\0');
  if (comm.rank() == 0) {
    const std::string d =
        (std::filesystem::temp_directory_path() / ("dcalign_dist_" + std::to_string(::getpid())))
            .string();
    std::filesystem::create_directories(d);
    write_npy(d + "/A.npy", A.view());
    dir.replace(0, d.size(), d);
  }
  comm.broadcast(dir.data(), static_cast<index_t>(dir.size()), 0);
  dir.resize(dir.find('\0'));
  comm.barrier();
  const dist::UserRange r = dist::even_split(c, comm.rank(), comm.size());
  const Stack<double> mine = read_npy_stack_slice<double>(dir + "/A.npy", r.first, r.count);
  AlignOptions opts;
  opts.method = Method::odc;
  auto backend = make_backend(Device::cpu, BackendOptions{1, 0, false});
  const auto res = dist::align_distributed(comm, mine, r.first, c, opts, *backend);
  dist::write_npy_distributed(comm, dir + "/G.npy", res.G.view(), r.first, c);
  if (comm.rank() == 0) {
    const Stack<double> G = read_npy_stack<double>(dir + "/G.npy");
    const auto single = align(A, opts, *backend);
    EXPECT_EQ(G.count(), c);
    if (G.count() == c) {
      EXPECT_LE(max_relative_difference(G, single.G, 0, false), 1e-12);
    }
  }
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dcalign

int main(int argc, char** argv) {
  dcalign::dist::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = dcalign::dist::make_mpi_communicator();
  dcalign::g_comm = comm.get();
  const int rc = RUN_ALL_TESTS();
  // Every rank's failures fail the run, whichever rank reports the exit status.
  double any = rc;
  comm->allreduce_max(&any, 1);
  comm.reset();
  return any > 0 ? 1 : 0;
}
