// `dcalign demo`: synthetic users under each secret-basis condition of paper 001 eq. 92, every
// alignment method, and the concordance error max_i ||F_i G_i - F_1 G_1||_F / ||F_1 G_1||_F,
// which is zero exactly when the method aligned the secret bases (Definitions 4.2 and 5.2).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cli/commands.hpp"
#include "dcalign/align.hpp"
#include "dcalign/checked.hpp"
#include "dcalign/random.hpp"
#include "dcalign/user.hpp"

namespace dcalign::cli {
namespace {

Matrix<double> matmul(const Matrix<double>& A, const Matrix<double>& B) {
  Matrix<double> C(A.rows(), B.cols());
  for (index_t j = 0; j < B.cols(); ++j)
    for (index_t k = 0; k < A.cols(); ++k)
      for (index_t i = 0; i < A.rows(); ++i) C(i, j) += A(i, k) * B(k, j);
  return C;
}

double concordance_error(const std::vector<User<double>>& users, const Stack<double>& G) {
  const Matrix<double> ref = matmul(users[0].reveal_secret_basis(), G.matrix(0));
  double nref = 0;
  for (double v : ref.values()) nref += v * v;
  double worst = 0;
  for (size_t i = 1; i < users.size(); ++i) {
    const Matrix<double> fg = matmul(users[i].reveal_secret_basis(), G.matrix(index_t(i)));
    double s = 0;
    for (index_t k = 0; k < fg.size(); ++k) s += std::pow(fg.data()[k] - ref.data()[k], 2);
    worst = std::max(worst, std::sqrt(s / nref));
  }
  return worst;
}

void run_demo(const DemoArgs& d) {
  const index_t c = d.users, n = d.samples, m = d.features, l = d.dim, a = d.anchor_rows;
  auto backend = make_backend(parse_device(d.device));
  // Private data: a shared low-rank structure (rank l + 4) seen through user-specific mixtures,
  // plus noise, so the users' top-l subspaces are close but not identical.
  Rng rng(d.seed);
  const Matrix<double> basis = random_normal<double>(l + 4, m, rng);
  std::vector<Matrix<double>> data;
  for (index_t i = 0; i < c; ++i) {
    Matrix<double> x = matmul(random_normal<double>(n, l + 4, rng), basis);
    for (index_t k = 0; k < x.size(); ++k) x.data()[k] += 0.3 * rng.normal();
    data.push_back(std::move(x));
  }
  const Matrix<double> anchor = make_anchor<double>(a, m, AnchorKind::uniform, d.seed + 1);
  std::printf(
      "dcalign demo: c = %lld users, n = %lld samples, m = %lld features, l = %lld, "
      "a = %lld uniform anchor rows, seed %llu, device %s\n",
      d.users, d.samples, d.features, d.dim, d.anchor_rows, static_cast<unsigned long long>(d.seed),
      d.device.c_str());
  std::printf("concordance = max_i ||F_i G_i - F_1 G_1||_F / ||F_1 G_1||_F (0: bases aligned)\n\n");
  std::printf("%-14s %-9s %12s %12s %10s\n", "condition", "method", "concordance", "orth. err",
              "time ms");
  for (SpanCondition cond : {SpanCondition::same_span_orth, SpanCondition::same_span,
                             SpanCondition::diff_span_orth, SpanCondition::diff_span}) {
    std::vector<User<double>> users;
    const Mixing mixing = orthonormal_mixing(cond) ? Mixing::haar : Mixing::uniform;
    const Matrix<double> v1 = top_right_singular_vectors(data[0], l, false);
    for (index_t i = 0; i < c; ++i) {
      users.emplace_back(data[i], "user " + std::to_string(i));
      const std::uint64_t seed = d.seed * 1000 + 17 * static_cast<std::uint64_t>(i) + 3;
      if (shares_span(cond))
        users.back().choose_secret_basis_in(v1, mixing, seed);
      else
        users.back().choose_secret_basis(l, mixing, seed);
    }
    std::vector<Matrix<double>> released;
    for (const auto& u : users) released.push_back(u.release_anchor(anchor));
    const Stack<double> anchors = Stack<double>::from_matrices(released);
    for (Method method : {Method::imakura, Method::kawakami, Method::odc, Method::gopp}) {
      AlignOptions opts;
      opts.method = method;
      opts.seed = d.seed;
      auto res = align(anchors, opts, *backend);
      std::printf("%-14s %-9s %12.3e %12.3e %10.3f\n", to_string(cond).c_str(),
                  to_string(method).c_str(), concordance_error(users, res.G),
                  res.report.orthogonality_error, 1e3 * res.report.total_seconds);
    }
  }
}

}  // namespace

// The demo holds every user's data and the anchor in memory at once: bound each size and the
// total so that a typo fails at once with the option's name instead of in the allocator.
static void check_demo_args(const DemoArgs& d) {
  const auto in_range = [](const char* opt, long long v, long long lo, long long hi) {
    if (v < lo || v > hi)
      out_of_range(opt, std::to_string(v), std::to_string(lo) + " to " + std::to_string(hi));
  };
  in_range("--users", d.users, 1, 10000);
  in_range("--samples", d.samples, 1, 1000000);
  in_range("--features", d.features, 1, 100000);
  in_range("--anchor-rows", d.anchor_rows, 1, 1000000);
  // l <= min(samples, features): each user's secret basis spans l directions of its data.
  in_range("--dim", d.dim, 1, std::min(d.samples, d.features));
  constexpr long long kMaxValues = 1LL << 27;  // 1 GiB of doubles per array
  const long long data_values = checked_mul(d.users, d.samples, d.features, "demo data");
  const long long anchor_values = checked_mul(d.anchor_rows, d.features, "demo anchor");
  if (data_values > kMaxValues || anchor_values > kMaxValues)
    throw UsageError("demo: --users x --samples x --features = " + std::to_string(data_values) +
                     " and --anchor-rows x --features = " + std::to_string(anchor_values) +
                     " values; each must be at most " + std::to_string(kMaxValues));
}

void add_demo_command(CLI::App& app, DemoArgs& args) {
  auto* cmd = app.add_subcommand("demo", "Align synthetic users under the four conditions");
  // Bounds as check_demo_args' (--dim's depends on --samples and --features).
  add_unsigned(cmd, "--seed", args.seed, "seed of the synthetic users and the anchor");
  add_integer(cmd, "--users", args.users, 1, 10000, "users c");
  add_integer(cmd, "--samples", args.samples, 1, 1000000, "samples per user");
  add_integer(cmd, "--features", args.features, 1, 100000, "features m");
  add_integer(cmd, "--dim", args.dim, 1, 100000, "latent dimension l");
  add_integer(cmd, "--anchor-rows", args.anchor_rows, 1, 1000000, "anchor rows a");
  cmd->add_option("--device", args.device, "cpu | cuda")
      ->capture_default_str()
      ->check(device_names());
  cmd->callback([&args] {
    check_demo_args(args);
    run_demo(args);
  });
}

}  // namespace dcalign::cli
