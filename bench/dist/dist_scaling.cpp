// Weak and strong scaling of the distributed alignment. Run under mpirun:
//
//   mpirun -np P dcalign_dist_scaling --users C --a 1000 --l 50 --method odc --precision float64
//
// Every rank generates its own users (A_i = X E_i + 0.01 N_i, X a x l shared, E_i orthogonal
// and N_i Gaussian from the seed and the user index, so the data do not depend on P), aligns
// them with dist::align_distributed and rank 0 prints one JSON line: the shape, the ranks, the
// wall time, the slowest rank's seconds per phase (named as in the report) and the largest
// per-rank CPU time (one BLAS thread per rank: the CPU time is the rank's compute plus its MPI
// polling, and unlike the wall time it does not grow when other processes share the cores).
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "dcalign/align.hpp"
#include "dcalign/distributed.hpp"
#include "dcalign/random.hpp"

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <typename T>
dcalign::Stack<T> make_users(dcalign::index_t first, dcalign::index_t count, dcalign::index_t a,
                             dcalign::index_t l, std::uint64_t seed) {
  using namespace dcalign;
  Rng rx = Rng::stream(seed, 0);
  const Matrix<double> X = random_normal<double>(a, l, rx);
  Stack<T> A(count, a, l);
  for (index_t k = 0; k < count; ++k) {
    Rng r = Rng::stream(seed, 1000 + static_cast<std::uint64_t>(first + k));
    const Matrix<double> E = random_orthogonal<double>(l, r);  // well conditioned in float
    const Matrix<double> N = random_normal<double>(a, l, r);
    for (index_t j = 0; j < l; ++j)
      for (index_t i = 0; i < a; ++i) {
        double v = 0.01 * N(i, j);
        for (index_t q = 0; q < l; ++q) v += X(i, q) * E(q, j);
        A(k, i, j) = static_cast<T>(v);
      }
  }
  return A;
}

template <typename T>
int run(dcalign::dist::Communicator& comm, dcalign::index_t users, dcalign::index_t a,
        dcalign::index_t l, const dcalign::AlignOptions& opts, int repeat) {
  using namespace dcalign;
  const auto range = dist::even_split(users, comm.rank(), comm.size());
  const Stack<T> A = make_users<T>(range.first, range.count, a, l, 5);
  auto backend = make_backend(Device::cpu);
  for (int rep = 0; rep < repeat; ++rep) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    const auto res = dist::align_distributed(comm, A, range.first, users, opts, *backend);
    double cpu = cpu_seconds() - c0;
    comm.barrier();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    comm.allreduce_max(&cpu, 1);
    if (comm.rank() != 0) continue;
    std::printf(
        "{\"method\": \"%s\", \"precision\": \"%s\", \"ranks\": %d, \"users\": %lld, "
        "\"a\": %lld, \"l\": %lld, \"iterations\": %lld, \"repeat\": %d, \"wall\": %.6f, "
        "\"cpu_max\": %.6f, "
        "\"seconds\": {",
        res.report.method.c_str(), res.report.precision.c_str(), comm.size(),
        static_cast<long long>(users), static_cast<long long>(a), static_cast<long long>(l),
        static_cast<long long>(res.report.iterations), rep, wall, cpu);
    for (size_t k = 0; k < res.report.seconds.size(); ++k)
      std::printf("%s\"%s\": %.6f", k ? ", " : "", res.report.seconds[k].first.c_str(),
                  res.report.seconds[k].second);
    std::printf("}}\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dcalign;
  dist::MpiSession mpi(&argc, &argv);
  auto comm = dist::make_mpi_communicator();
  index_t users = 1000, a = 1000, l = 50;
  int repeat = 2;
  std::string precision = "float64";
  AlignOptions opts;
  opts.evaluate = false;
  opts.gopp.init = GoppInit::odc;
  opts.gopp.max_iterations = 10;
  opts.gopp.tolerance = 0;  // a fixed number of iterations: time per iteration
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--users")
      users = std::atoll(v.c_str());
    else if (k == "--a")
      a = std::atoll(v.c_str());
    else if (k == "--l")
      l = std::atoll(v.c_str());
    else if (k == "--method")
      opts.method = parse_method(v);
    else if (k == "--precision")
      precision = v;
    else if (k == "--repeat")
      repeat = std::atoi(v.c_str());
    else if (k == "--gopp-iterations")
      opts.gopp.max_iterations = std::atoll(v.c_str());
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  try {
    return precision == "float32" ? run<float>(*comm, users, a, l, opts, repeat)
                                  : run<double>(*comm, users, a, l, opts, repeat);
  } catch (const std::exception& e) {
    if (comm->rank() == 0) std::cerr << "dcalign_dist_scaling: " << e.what() << "\n";
    return 1;
  }
}
