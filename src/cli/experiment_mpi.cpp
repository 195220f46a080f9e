// The MPI driver of `dcalign experiment --distributed` (cli/experiment_mpi.hpp). Point-to-point
// messages on MPI_COMM_WORLD, from rank 0's point of view:
//   kRequest  (rank r -> 0): r is ready for a trial;
//   kUnit     (0 -> r): two int64, the point and the trial, or -1 -1: no more;
//   kResult   (r -> 0): the finished trial's records (unit_json);
//   kError    (r -> 0): a letter for the error's class, then its message; r stops asking.
// Only the main thread of each rank calls MPI (MPI_THREAD_FUNNELED): a rank's worker threads run
// its trial and the main thread waits for it.
#include "cli/experiment_mpi.hpp"

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dcalign/distributed.hpp"
#include "dcalign/error.hpp"
#include "experiment/checkpoint.hpp"
#include "experiment/study.hpp"

namespace dcalign::cli {
namespace {

using experiment::detail::Study;
using experiment::detail::UnitKey;
using experiment::detail::UnitResult;

enum Tag : int { kRequest = 1, kUnit = 2, kResult = 3, kError = 4 };

void send_text(const std::string& text, int to, int tag) {
  MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

std::string receive_text(const MPI_Status& probed) {
  int n = 0;
  MPI_Get_count(&probed, MPI_CHAR, &n);
  std::string text(static_cast<size_t>(n), '\0');
  MPI_Recv(text.data(), n, MPI_CHAR, probed.MPI_SOURCE, probed.MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  return text;
}

// The error's class as a letter, and back (so rank 0 rethrows what the rank threw).
std::string encode(const std::exception& e) {
  const char kind = dynamic_cast<const InvalidInput*>(&e)     ? 'I'
                    : dynamic_cast<const IoError*>(&e)        ? 'O'
                    : dynamic_cast<const NumericalError*>(&e) ? 'N'
                                                              : 'E';
  return std::string(1, kind) + e.what();
}

[[noreturn]] void rethrow(const std::string& coded, int rank, int ranks) {
  const std::string m =
      "rank " + std::to_string(rank) + " of " + std::to_string(ranks) + ": " + coded.substr(1);
  switch (coded.empty() ? 'E' : coded[0]) {
    case 'I':
      throw InvalidInput(m);
    case 'O':
      throw IoError(m);
    case 'N':
      throw NumericalError(m);
    default:
      throw std::runtime_error(m);
  }
}

// A test hook: DCALIGN_EXPERIMENT_FAIL_TRIAL=N makes trial N (1-based) fail on the rank that runs
// it, as a trial that meets an error does (tests/dist/test_experiment_mpi.cpp).
void injected_failure(index_t trial) {
  const char* v = std::getenv("DCALIGN_EXPERIMENT_FAIL_TRIAL");
  if (v && std::to_string(trial + 1) == v)
    throw InvalidInput("trial " + std::string(v) + " failed (DCALIGN_EXPERIMENT_FAIL_TRIAL)");
}

// Rank 0: hands out the undone trials in order, keeps what comes back.
void coordinate(Study& study, std::vector<UnitKey> todo, int ranks) {
  std::size_t next = 0;
  int asking = ranks - 1;  // ranks that have not been told "no more"
  std::string error;
  int error_rank = 0;
  while (asking > 0) {
    MPI_Status st;
    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    if (st.MPI_TAG == kRequest) {
      MPI_Recv(nullptr, 0, MPI_CHAR, st.MPI_SOURCE, kRequest, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::int64_t unit[2] = {-1, -1};
      if (error.empty() && next < todo.size()) {
        unit[0] = static_cast<std::int64_t>(todo[next].first);
        unit[1] = static_cast<std::int64_t>(todo[next].second);
        ++next;
      } else {
        --asking;
      }
      MPI_Send(unit, 2, MPI_INT64_T, st.MPI_SOURCE, kUnit, MPI_COMM_WORLD);
    } else if (st.MPI_TAG == kResult) {
      const std::string text = receive_text(st);
      // A trial that finished beside a failure still goes into the checkpoint. A failure here
      // (the checkpoint cannot be written) ends the hand-out like a rank's, never the loop.
      try {
        study.accept(experiment::detail::parse_unit(
            text, "", "the records of rank " + std::to_string(st.MPI_SOURCE)));
      } catch (const std::exception& e) {
        if (error.empty()) {
          error = encode(e);
          error_rank = 0;
        }
      }
    } else {
      const std::string text = receive_text(st);
      if (error.empty()) {
        error = text;
        error_rank = st.MPI_SOURCE;
      }
      --asking;  // a failed rank asks no more
    }
  }
  if (!error.empty()) rethrow(error, error_rank, ranks);
}

// The other ranks: ask, run, send back, until told "no more" or a trial fails.
void compute(Study& study) {
  for (;;) {
    MPI_Send(nullptr, 0, MPI_CHAR, 0, kRequest, MPI_COMM_WORLD);
    std::int64_t unit[2];
    MPI_Recv(unit, 2, MPI_INT64_T, 0, kUnit, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (unit[0] < 0) return;
    const UnitKey key{static_cast<std::size_t>(unit[0]), static_cast<index_t>(unit[1])};
    try {
      injected_failure(key.second);
      send_text(experiment::detail::unit_json(study.run_unit(key), ""), 0, kResult);
    } catch (const std::exception& e) {
      send_text(encode(e), 0, kError);
      throw;
    }
  }
}

}  // namespace

bool run_experiment_distributed(const experiment::Config& config,
                                const experiment::RunOptions& options, experiment::Result& result) {
  bool writer = false, failed = false;
  std::exception_ptr error;  // rank 0's, reported before any rank leaves
  {
    dist::MpiSession mpi(nullptr, nullptr);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    try {
      if (ranks == 1) {  // nobody to hand trials to: the run of one process
        result = experiment::run(config, options);
        writer = true;
      } else if (rank == 0) {
        Study study(config, options);
        std::vector<UnitKey> todo;
        std::exception_ptr check;
        try {
          todo = study.open(true);
        } catch (...) {
          check = std::current_exception();  // the others still wait for an answer
        }
        coordinate(study, check ? std::vector<UnitKey>() : todo, ranks);
        if (check) std::rethrow_exception(check);
        result = study.result();
        writer = true;
      } else {
        // The computing ranks keep no checkpoint and report no progress; their messages
        // (loading a dataset) would repeat rank 0's. A check that fails here fails on rank 0
        // too, which reports it.
        const experiment::RunOptions quiet;
        Study study(config, quiet);
        try {
          study.open(false);
        } catch (const std::exception& e) {
          // Rank 0 counts on one request from every rank: answer its hand-out with the error
          // (another host may lack the data rank 0 has).
          MPI_Send(nullptr, 0, MPI_CHAR, 0, kRequest, MPI_COMM_WORLD);
          std::int64_t unit[2];
          MPI_Recv(unit, 2, MPI_INT64_T, 0, kUnit, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          if (unit[0] >= 0) send_text(encode(e), 0, kError);
          throw;
        }
        compute(study);
      }
    } catch (...) {
      failed = true;
      if (rank == 0) error = std::current_exception();
    }
    // Every rank gets here once the hand-out is over. mpirun ends the job when the first rank
    // exits non-zero, so rank 0 reports the run's error before any rank leaves.
    int any = failed ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          std::cerr << "dcalign: error: " << e.what() << std::endl;
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
      failed = true;
    }
  }
  if (failed) {
    std::fflush(nullptr);
    std::_Exit(1);
  }
  return writer;
}

}  // namespace dcalign::cli
