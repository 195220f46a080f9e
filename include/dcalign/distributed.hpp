#pragma once
// Alignment sharded over users across processes. Each process (rank) holds a
// contiguous slice of the users, A_first .. A_{first+count-1}, and runs the single-process
// methods on it; the methods couple users only through small quantities, which are reduced
// between the ranks (src/core/team.hpp):
//
//   ODC        Z = A_r O is formed by the rank that owns the reference user r and broadcast
//              (a x l); every G_i = polar(A_i^T Z) is then local.
//   Imakura,   the top-l left singular vectors U of W = [A_1 ... A_c] (Kawakami: of
//   Kawakami,  [Q_1 ... Q_c]). Gram route (svd gram, the default, while a <= 8192): the a x a
//   OPP        Gram matrix sum_i A_i A_i^T summed over the ranks (one allreduce of a^2 values),
//              its l largest eigenpairs taken on rank 0 and broadcast (a x l). Sketch route (svd
//              randomized, or a > 8192): Y = sum_i A_i Omega_i with Omega_i drawn from the seed
//              and the user's index (independent of the number of ranks), power steps
//              sum_i A_i A_i^T Q, one allreduce of a x (l + oversampling) each. Exact route (svd
//              exact): W gathered on every rank (a c l values), the single process's SVD on rank
//              0. Kawakami's blocks g^_i = Q_i^T U S^-1 and G_i = R_i^{-1} g^_i are local; its
//              eigen form is solved through this QR-SVD form.
//   GOPP       one allreduce of the a x l matrix sum_i A_i G_i / c per iteration; the stopping
//              rule and the history are the single-process ones.
//   RDP        its start as above; per evaluation of f, the sums of Ybar (a x l), f and the
//              zero-padded gradient (c l^2); every rank runs the same L-BFGS.
//
// G_i stays with the rank that owns user i; the report is the same on every rank. For a fixed
// seed the G_i agree with the single-process dcalign::align to rounding (tests/dist), whatever
// the number of ranks; RDP's to its stopping tolerance.
//
// Errors are collective: every phase ends with an agreement between the ranks, and when any
// rank failed every rank throws the error of the lowest failing rank ("rank R of P: ..."), of
// the same class (InvalidInput, IoError, NumericalError, BackendError), with users named by
// their global index. No rank is left waiting in a collective.
//
// The transport is MPI (make_mpi_communicator); this header does not include mpi.h. It exists
// only when dcalign was built with MPI (the CMake target dcalign::dist, macro
// DCALIGN_HAVE_MPI for the command line).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dcalign/align.hpp"

namespace dcalign::dist {

/// The collective operations the distributed alignment needs, on host memory unless a
/// function says otherwise. Every rank must call the same operations in the same order.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// In-place element-wise sum (max, min) over all ranks; every rank receives the same values.
  virtual void allreduce_sum(double* x, index_t n) = 0;
  virtual void allreduce_sum(float* x, index_t n) = 0;
  virtual void allreduce_sum(std::int64_t* x, index_t n) = 0;
  virtual void allreduce_max(double* x, index_t n) = 0;
  virtual void allreduce_min(double* x, index_t n) = 0;
  /// Copies n bytes from `root` to every rank.
  virtual void broadcast(void* bytes, index_t n, int root) = 0;
  virtual void barrier() = 0;
  /// Whether allreduce_sum_device can sum buffers in the memory of a backend on `device`
  /// (NCCL for CUDA device memory). Otherwise device buffers are staged through the host.
  virtual bool reduces_device_memory(Device device) const {
    (void)device;
    return false;
  }
  virtual void allreduce_sum_device(double* x, index_t n);
  virtual void allreduce_sum_device(float* x, index_t n);
};

/// Starts MPI (MPI_Init_thread with MPI_THREAD_FUNNELED) unless it is already running, and
/// finalises it on destruction if it started it. One per process.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool started_ = false;
};

/// A communicator over MPI_COMM_WORLD (mpi_comm == nullptr) or over the MPI_Comm that
/// `mpi_comm` points to (pass the address of yours; the handle is duplicated, so the caller's stays
/// untouched). MPI must be initialised. With `use_nccl` and a CUDA build, sums of device buffers go
/// through NCCL (one GPU per rank).
std::unique_ptr<Communicator> make_mpi_communicator(const void* mpi_comm = nullptr,
                                                    bool use_nccl = false);

/// Contiguous users [first, first + count) of one rank.
struct UserRange {
  index_t first = 0;
  index_t count = 0;
};
/// The even split of `users` over `ranks`: rank k gets [users k / ranks, users (k+1) / ranks).
UserRange even_split(index_t users, int rank, int ranks);

/// Runs `fn` on every rank and agrees on the outcome: if it threw on any rank, every rank
/// throws the lowest failing rank's error (same class, message prefixed "rank R of P: ").
/// `fn` must not itself communicate.
void collective(Communicator& comm, const std::function<void()>& fn);

template <typename T>
struct LocalAlignment {
  Stack<T> G;          ///< this rank's G_i, users first .. first + count - 1 (count x l x l)
  Matrix<T> target;    ///< the target Z (a x l), the same on every rank; empty for Kawakami
  AlignReport report;  ///< global: sums and extremes over all users; phases: slowest rank
  UserRange users;     ///< which users G holds
};

/// Aligns the users [first_user, first_user + anchors.count()) of `total_users` held by this
/// rank; every rank calls it with its own slice (contiguous, in rank order, at least one user
/// each) and the same options. Every method and svd route (see the top of this header).
template <typename T>
LocalAlignment<T> align_distributed(Communicator& comm, const Stack<T>& anchors, index_t first_user,
                                    index_t total_users, const AlignOptions& opts,
                                    Backend& backend);

/// Writes the whole (total, l, l) stack G into one C-order NPY file at `path`, each rank its
/// slice at its offset (no gather): rank 0 creates the file, then every rank writes its
/// matrices. Collective. `path` is written in place: for an atomic replacement pass a temporary
/// name and rename it after this returns (it returns on every rank once all slices are written).
template <typename T>
void write_npy_distributed(Communicator& comm, const std::string& path, StackView<const T> local,
                           index_t first_user, index_t total_users);

}  // namespace dcalign::dist
