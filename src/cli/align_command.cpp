#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "core/methods.hpp"
#include "dcalign/align.hpp"
#include "dcalign/aligner.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/options.hpp"
#include "io/staged_outputs.hpp"
#ifdef DCALIGN_HAVE_MPI
#include "dcalign/distributed.hpp"
#endif

namespace dcalign::cli {
namespace {

// Rejects, before any work, a command line that cannot mean what it says: an option the chosen
// method would ignore. Values have been checked as they were parsed (the option schema). Only
// options the user gave count (cmd.count), so the defaults of other methods' options never trip
// it.
void check_align_args(const AlignArgs& a, const CLI::App& cmd) {
  const Method m = parse_method(a.method);
  const std::string name = to_string(m);
  const AlignOptions& o = a.request.align;
  // The schema's rule: an option belongs to the methods its row lists.
  for (const auto& row : option_schema())
    if (cmd.count(row.cli) > 0) as_usage_error([&] { check_option_used(row, m, row.cli); });
  // The rules for options that depend on other options than --method.
  const bool randomized = o.svd.algorithm == SvdAlgorithm::randomized;
  const bool svd_used =
      core::method_info(m).uses_svd && !(m == Method::gopp && o.gopp.init == GoppInit::odc);
  if (m == Method::gopp)
    refuse_unused(cmd, "--svd", svd_used,
                  "by method gopp with --gopp-init odc (its start needs "
                  "no SVD)");
  for (const char* opt : {"--oversampling", "--power-iterations"})
    refuse_unused(cmd, opt, svd_used && randomized, "without --svd randomized");
  refuse_unused(cmd, "--rotation", cmd.count("--target") == 0,
                "with --target (the target is given, so there is no rotation O)");
  refuse_unused(cmd, "--target-rotation", cmd.count("--target") + cmd.count("--rotation") == 0,
                "with --target or --rotation (they give the target or O themselves)");
  refuse_unused(cmd, "--reference-user", cmd.count("--target") == 0,
                "with --target (the target is given, not A_r O)");
  refuse_unused(cmd, "--consensus", o.evaluate,
                "with --no-evaluate (it is part of the evaluation)");
  // The method-specific files: each is used only by the methods whose table entry lists it
  // (src/core/methods.cpp).
  const core::MethodInfo& info = core::method_info(m);
  std::set<std::string> specific;
  for (const auto& entry : core::method_table())
    specific.insert(entry.cli_options.begin(), entry.cli_options.end());
  for (const auto& opt : specific) {
    if (cmd.count(opt) == 0) continue;
    if (std::find(info.cli_options.begin(), info.cli_options.end(), opt) != info.cli_options.end())
      continue;
    throw UsageError(opt + " is not used by method " + name + " (only by " +
                     core::methods_using(opt) + "); remove it or choose that method");
  }
}

AlignOptions make_options(const AlignArgs& a) {
  AlignOptions o = a.request.align;
  o.method = parse_method(a.method);
  if (!a.rotation_in.empty()) {
    o.rotation = TargetRotation::supplied;
    o.rotation_matrix = read_npy_matrix<double>(a.rotation_in);
  }
  if (!a.target_in.empty()) o.target = read_npy_matrix<double>(a.target_in);
  return o;
}

// The files align reads, which no output may replace.
void protect_inputs(const AlignArgs& a, io::StagedOutputs& outputs) {
  outputs.protect(a.anchors, "--anchors");
  outputs.protect(a.target_in, "--target");
  outputs.protect(a.rotation_in, "--rotation");
}

// The target (--target-out) and the report (--report) into their staged files.
template <typename T>
void write_target_and_report(const AlignArgs& a, const Matrix<T>& target, const AlignReport& report,
                             const std::string& target_tmp, const std::string& report_tmp) {
  if (!a.target_out.empty()) {
    if (target.size() == 0)
      throw InvalidInput("--target-out: method " + a.method + " has no target matrix");
    write_npy<T>(target_tmp, target.view());
  }
  if (!a.report.empty()) write_report(report_tmp, a.report, report);
}

// An objective that overflowed (a NaN consensus objective means "not computed"; an infinite
// one overflowed) stops the command before any output is written.
void check_objective_finite(const AlignReport& r, const std::string& precision) {
  if (!std::isfinite(r.objective) || std::isinf(r.consensus_objective))
    throw NumericalError("the objective of " + r.method + " is not finite (" +
                         std::to_string(r.objective) + ", consensus " +
                         std::to_string(r.consensus_objective) +
                         "), so no output was written; anchors this large overflow " + precision +
                         ": scale them down (or use float64)");
}

template <typename T>
void run(const AlignArgs& a) {
  // Every output goes to a temporary beside it and is renamed into place only once the whole
  // run has succeeded; a failure changes no existing file (--model-out: Aligner::save is atomic).
  // All output paths are checked first, before any input is read.
  io::StagedOutputs outputs;
  protect_inputs(a, outputs);
  if (!a.model_out.empty()) {
    outputs.reserve_directory(a.model_out, "--model-out");
    check_model_destination(a.model_out);
  }
  const std::string out_tmp = outputs.stage(a.out, "--out");
  const std::string target_tmp =
      a.target_out.empty() ? std::string() : outputs.stage(a.target_out, "--target-out");
  const std::string report_tmp =
      a.report.empty() ? std::string() : outputs.stage(a.report, "--report");
  const AlignOptions opts = make_options(a);
  BackendOptions bo;
  bo.threads = a.request.threads;
  auto backend = make_backend(a.request.device, bo);
  const auto t0 = std::chrono::steady_clock::now();
  Stack<T> anchors = read_npy_stack<T>(a.anchors);
  const double read_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // With --model-out the same alignment goes through an Aligner, which keeps its target.
  Aligner<T> model;
  Alignment<T> res =
      a.model_out.empty() ? align(anchors, opts, *backend) : model.fit(anchors, opts, *backend);
  check_objective_finite(res.report, a.request.float32 ? "float32" : "float64");
  write_npy<T>(out_tmp, res.G.view());
  write_target_and_report(a, res.target, res.report, target_tmp, report_tmp);
  if (!a.model_out.empty()) model.save(a.model_out);
  outputs.commit();
  std::cerr << "dcalign: " << res.report.method << " aligned " << res.report.users
            << " users (a = " << res.report.anchor_rows << ", l = " << res.report.dim << ") in "
            << res.report.total_seconds << " s (read " << read_s << " s); objective "
            << res.report.objective << ", orthogonality error " << res.report.orthogonality_error;
  if (res.report.promoted_users > 0)
    std::cerr << "; " << res.report.promoted_users
              << " user(s) recomputed in float64 (float32 could not resolve their rank)";
  std::cerr << "\n";
}

#ifdef DCALIGN_HAVE_MPI
// `mpirun -np N dcalign align --distributed ...`: every rank reads its users (a slice of one
// (c, a, l) file by offset, or its own file when --anchors contains "{rank}"), the ranks align
// together (dcalign/distributed.hpp), each writes its G_i at its offset into one temporary file
// that rank 0 renames after all have written. Every step that can fail on one rank is agreed
// between the ranks, so an error is printed once, by rank 0, and every rank exits non-zero.

std::string broadcast_string(dist::Communicator& comm, std::string s, int root) {
  std::int64_t n = static_cast<std::int64_t>(s.size());
  comm.broadcast(&n, sizeof n, root);
  s.resize(static_cast<size_t>(n));
  comm.broadcast(s.data(), n, root);
  return s;
}

template <typename T>
void run_distributed(const AlignArgs& a, const CLI::App& cmd, dist::Communicator& comm) {
  check_align_args(a, cmd);
  if (!a.model_out.empty())
    throw UsageError(
        "--model-out is not available with --distributed (the model would need "
        "every user's data in one process)");
  const int me = comm.rank(), ranks = comm.size();
  AlignOptions opts;
  dist::collective(comm, [&] { opts = make_options(a); });
  io::StagedOutputs outputs;  // rank 0's: the temporaries and their renaming
  std::string out_tmp, target_tmp, report_tmp;
  dist::collective(comm, [&] {
    if (me != 0) return;
    protect_inputs(a, outputs);
    out_tmp = outputs.stage(a.out, "--out");
    if (!a.target_out.empty()) target_tmp = outputs.stage(a.target_out, "--target-out");
    if (!a.report.empty()) report_tmp = outputs.stage(a.report, "--report");
  });
  out_tmp = broadcast_string(comm, out_tmp, 0);
  BackendOptions bo;
  bo.threads = a.request.threads;
  std::shared_ptr<Backend> backend;
  dist::collective(comm, [&] { backend = make_backend(a.request.device, bo); });

  const auto t0 = std::chrono::steady_clock::now();
  Stack<T> anchors;
  dist::UserRange mine;
  index_t users = 0;
  const std::string key = "{rank}";
  const std::size_t at = a.anchors.find(key);
  if (at != std::string::npos) {
    std::string path = a.anchors;
    path.replace(at, key.size(), std::to_string(me));
    dist::collective(comm, [&] { anchors = read_npy_stack<T>(path); });
    std::vector<std::int64_t> counts(static_cast<size_t>(ranks), 0);
    counts[static_cast<size_t>(me)] = anchors.count();
    comm.allreduce_sum(counts.data(), ranks);
    for (int k = 0; k < ranks; ++k) {
      if (k < me) mine.first += counts[static_cast<size_t>(k)];
      users += counts[static_cast<size_t>(k)];
    }
    mine.count = anchors.count();
  } else {
    dist::collective(comm, [&] {
      const NpyHeader h = read_npy_header(a.anchors);
      if (h.shape.size() != 3)
        throw IoError("npy file '" + a.anchors + "': expected a 3-D array of shape (c, a, l)");
      users = h.shape[0];
      mine = dist::even_split(users, me, ranks);
      if (mine.count < 1)
        throw InvalidInput("there are " + std::to_string(users) + " users for " +
                           std::to_string(ranks) + " ranks; every rank needs at least one");
      anchors = read_npy_stack_slice<T>(a.anchors, mine.first, mine.count);
    });
  }
  double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  comm.allreduce_max(&read_s, 1);

  const auto res = dist::align_distributed(comm, anchors, mine.first, users, opts, *backend);
  // The report is the same on every rank: every rank throws alike.
  check_objective_finite(res.report, a.request.float32 ? "float32" : "float64");
  dist::write_npy_distributed<T>(comm, out_tmp, res.G.view(), mine.first, users);
  dist::collective(comm, [&] {
    if (me != 0) return;
    write_target_and_report(a, res.target, res.report, target_tmp, report_tmp);
    outputs.commit();
  });
  if (me == 0)
    std::cerr << "dcalign: " << res.report.method << " aligned " << res.report.users
              << " users (a = " << res.report.anchor_rows << ", l = " << res.report.dim << ") over "
              << ranks << " ranks in " << res.report.total_seconds << " s (read " << read_s
              << " s); objective " << res.report.objective << ", orthogonality error "
              << res.report.orthogonality_error << "\n";
}

/// Starts MPI, runs, finalises. An error (the same, agreed, on every rank) is printed once, by
/// rank 0, in run_app's format; the other ranks wait at a barrier until it has been printed,
/// because mpirun kills the remaining processes as soon as one exits non-zero. Then every rank
/// exits with run_app's status (2 for a usage error, else 1).
void run_distributed_command(const AlignArgs& a, const CLI::App& cmd) {
  int status = 0;
  {
    dist::MpiSession mpi(nullptr, nullptr);
    auto comm = dist::make_mpi_communicator();
    std::string message;
    try {
      if (a.request.float32)
        run_distributed<float>(a, cmd, *comm);
      else
        run_distributed<double>(a, cmd, *comm);
    } catch (const UsageError& e) {
      status = 2;
      message = e.what();
    } catch (const std::bad_alloc&) {
      status = 1;
      message = "out of memory (a memory allocation failed; more ranks or smaller inputs may fit)";
    } catch (const std::exception& e) {
      status = 1;
      message = e.what();
    }
    if (status != 0) {
      if (comm->rank() == 0) std::cerr << "dcalign: error: " << message << std::endl;
      comm->barrier();
    }
  }
  if (status != 0) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(status);
  }
}
#endif

}  // namespace

void add_align_command(CLI::App& app, AlignArgs& args) {
  auto* cmd = app.add_subcommand("align", "Compute change-of-basis matrices G_i from anchors");
  std::string names;
  for (const auto& n : method_names()) names += (names.empty() ? "" : " | ") + n;
  add_choice(cmd, "--method", args.method, names,
             [](const std::string& v) { (void)parse_method(v); });
  add_path(cmd, "--anchors", args.anchors, "NPY array of shape (c, a, l); slice i is A_i")
      ->required();
  add_path(cmd, "--out", args.out, "output NPY array of shape (c, l, l); slice i is G_i")
      ->required();
  add_path(cmd, "--report", args.report, "write the JSON report here");
  add_path(cmd, "--target-out", args.target_out, "write the target Z (a x l) here");
  add_path(cmd, "--model-out", args.model_out,
           "save the fitted model to this directory, for dcalign enroll");
  add_path(cmd, "--target", args.target_in, "ODC: align to this a x l target (NPY)");
  add_path(cmd, "--rotation", args.rotation_in, "ODC: use this l x l orthogonal O (NPY)");
  // Every option of the schema (dcalign/options.hpp), with its help, default and check.
  for (const auto& row : option_schema()) add_schema_option(cmd, row, args.request);
  // (Kept here rather than in AlignArgs: only this command has it.)
  static bool distributed = false;
  cmd->add_flag("--distributed", distributed,
                "run under mpirun: the users are split over the ranks (--anchors is one (c, a, l) "
                "file read by offset, or one file per rank when it contains {rank})");
  cmd->callback([&args, cmd] {
    if (distributed) {
#ifdef DCALIGN_HAVE_MPI
      run_distributed_command(args, *cmd);
      return;
#else
      throw BackendError(
          "--distributed: dcalign was built without MPI (CMake found no MPI when it was "
          "configured); install libopenmpi-dev and openmpi-bin and rebuild");
#endif
    }
    check_align_args(args, *cmd);
    if (args.request.float32)
      run<float>(args);
    else
      run<double>(args);
  });
}

}  // namespace dcalign::cli
