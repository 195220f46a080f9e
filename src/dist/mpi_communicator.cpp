// The MPI transport of dcalign::dist::Communicator (Open MPI from Debian here), and NCCL for
// sums of CUDA device buffers when the CUDA backend is built (DCALIGN_DIST_NCCL).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "dcalign/distributed.hpp"

#ifdef DCALIGN_DIST_NCCL
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#endif

namespace dcalign::dist {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw BackendError(std::string("MPI ") + what + " failed: " + std::string(text, len));
}

// MPI counts are int: long buffers go in pieces of at most 2^30 elements.
constexpr index_t kChunk = index_t{1} << 30;

template <typename T>
void allreduce(MPI_Comm comm, T* x, index_t n, MPI_Datatype type, MPI_Op op) {
  for (index_t at = 0; at < n; at += kChunk) {
    const int m = static_cast<int>(std::min(kChunk, n - at));
    check(MPI_Allreduce(MPI_IN_PLACE, x + at, m, type, op, comm), "Allreduce");
  }
}

#ifdef DCALIGN_DIST_NCCL
// NCCL is opened with dlopen when a communicator first asks for it, as src/cuda opens cuBLAS
// and cuSOLVER: linking it would map it into every start of `dcalign`, GPU or not.
struct Nccl {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

const Nccl& nccl() {
  static const Nccl lib = [] {
    void* h = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = ::dlopen(DCALIGN_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!h)
      throw BackendError(std::string("cannot load NCCL (libnccl.so.2, ") + DCALIGN_NCCL_LIBRARY +
                         "): " + ::dlerror());
    Nccl n;
    auto load = [h](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (!fn) throw BackendError(std::string("NCCL has no symbol ") + name);
    };
    load(n.get_unique_id, "ncclGetUniqueId");
    load(n.comm_init_rank, "ncclCommInitRank");
    load(n.all_reduce, "ncclAllReduce");
    load(n.comm_destroy, "ncclCommDestroy");
    load(n.error_string, "ncclGetErrorString");
    return n;
  }();
  return lib;
}

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess)
    throw BackendError(std::string("NCCL ") + what + " failed: " + nccl().error_string(rc));
}
void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw BackendError(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(rc));
}
#endif

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm parent, bool use_nccl) {
    check(MPI_Comm_dup(parent, &comm_), "Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
#ifdef DCALIGN_DIST_NCCL
    if (use_nccl) {
      // One NCCL communicator over the same ranks, its id broadcast over MPI.
      ncclUniqueId id;
      if (rank_ == 0) check_nccl(nccl().get_unique_id(&id), "GetUniqueId");
      check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm_), "Bcast");
      check_nccl(nccl().comm_init_rank(&nccl_, size_, id, rank_), "CommInitRank");
      nccl_ready_ = true;
    }
#else
    if (use_nccl)
      throw BackendError("NCCL reductions were requested, but dcalign was built without CUDA");
#endif
  }
  ~MpiCommunicator() override {
#ifdef DCALIGN_DIST_NCCL
    if (nccl_ready_) nccl().comm_destroy(nccl_);
#endif
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(double* x, index_t n) override { allreduce(comm_, x, n, MPI_DOUBLE, MPI_SUM); }
  void allreduce_sum(float* x, index_t n) override { allreduce(comm_, x, n, MPI_FLOAT, MPI_SUM); }
  void allreduce_sum(std::int64_t* x, index_t n) override {
    allreduce(comm_, x, n, MPI_INT64_T, MPI_SUM);
  }
  void allreduce_max(double* x, index_t n) override { allreduce(comm_, x, n, MPI_DOUBLE, MPI_MAX); }
  void allreduce_min(double* x, index_t n) override { allreduce(comm_, x, n, MPI_DOUBLE, MPI_MIN); }
  void broadcast(void* bytes, index_t n, int root) override {
    auto* p = static_cast<char*>(bytes);
    for (index_t at = 0; at < n; at += kChunk) {
      const int m = static_cast<int>(std::min(kChunk, n - at));
      check(MPI_Bcast(p + at, m, MPI_BYTE, root, comm_), "Bcast");
    }
  }
  void barrier() override { check(MPI_Barrier(comm_), "Barrier"); }
  bool reduces_device_memory(Device device) const override {
#ifdef DCALIGN_DIST_NCCL
    return nccl_ready_ && device == Device::cuda;
#else
    (void)device;
    return false;
#endif
  }
  void allreduce_sum_device(double* x, index_t n) override { device_sum(x, n, true); }
  void allreduce_sum_device(float* x, index_t n) override { device_sum(x, n, false); }

 private:
  void device_sum(void* x, index_t n, bool is_double) {
#ifdef DCALIGN_DIST_NCCL
    if (!nccl_ready_) throw BackendError("this communicator was made without NCCL");
    // In place on the default stream; the backend's queued work on its own stream is finished
    // by the caller (Primitives::synchronize) before the reduction.
    check_nccl(nccl().all_reduce(x, x, static_cast<size_t>(n), is_double ? ncclDouble : ncclFloat,
                                 ncclSum, nccl_, nullptr),
               "AllReduce");
    check_cuda(cudaStreamSynchronize(nullptr), "StreamSynchronize");
#else
    (void)x;
    (void)n;
    (void)is_double;
    throw BackendError("device reductions need dcalign built with CUDA and NCCL");
#endif
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
#ifdef DCALIGN_DIST_NCCL
  ncclComm_t nccl_{};
  bool nccl_ready_ = false;
#endif
};

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "Init_thread");
  // Errors come back as codes (turned into exceptions by check), not as aborts.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  started_ = true;
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (started_ && !finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> make_mpi_communicator(const void* mpi_comm, bool use_nccl) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    throw BackendError("make_mpi_communicator: MPI is not initialised (create an MpiSession)");
  const MPI_Comm parent = mpi_comm ? *static_cast<const MPI_Comm*>(mpi_comm) : MPI_COMM_WORLD;
  return std::make_unique<MpiCommunicator>(parent, use_nccl);
}

}  // namespace dcalign::dist
