#pragma once
// Backend primitives. Every alignment method is written once against Primitives<T>; each
// backend (CPU: BLAS/LAPACK, CUDA: cuBLAS/cuSOLVER/own kernels) implements this short list.
// Pointers inside the views handed to a Primitives object refer to that backend's memory
// (host memory for the CPU backend, device memory for CUDA). Results that the algorithms need
// to make decisions (ranks, singular value extremes, errors) come back on the host.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dcalign/detail/polar_iteration.hpp"
#include "dcalign/matrix.hpp"

namespace dcalign {

enum class Device { cpu, cuda };
enum class Op { none, trans };

std::string to_string(Device d);
Device parse_device(const std::string& name);

/// Top-k singular subspaces: exact (LAPACK/cuSOLVER SVD), randomized (Halko, Martinsson, Tropp
/// 2011: Gaussian sketch with oversampling, power iterations with re-orthonormalisation), or
/// gram: the k largest eigenpairs of the Gram matrix of W's smaller side (W^T W or W W^T), one
/// symmetric rank-k update and a partial symmetric eigensolver instead of a bidiagonalisation
/// of W. Its error bound exceeds the exact SVD's by at most sigma_1 / sigma_k, so it falls back
/// to the exact SVD when that ratio exceeds 100 (src/core/spectral.cpp). The primitive
/// svd_topk is the exact SVD; the randomized range finder (on gemm, qr_batched and svd_topk)
/// and the gram path (on syrk and syev_largest) are written once in core::topk_svd.
enum class SvdAlgorithm { exact, randomized, gram };
std::string to_string(SvdAlgorithm a);
SvdAlgorithm parse_svd_algorithm(const std::string& name);
struct SvdOptions {
  SvdAlgorithm algorithm = SvdAlgorithm::gram;
  index_t oversampling = 10;
  int power_iterations = 2;
  std::uint64_t seed = 0x5eed;
};

/// Memory owned by a backend. Moves, never copies. The deleter gets the pointer and the
/// context given at construction (the CUDA backend: the stream the memory is freed on, so that
/// the free is ordered after the work queued on it).
template <typename T>
class Buffer {
 public:
  using Deleter = void (*)(void* p, void* context);
  Buffer() = default;
  Buffer(T* p, index_t n, Deleter d, void* context = nullptr)
      : p_(p), n_(n), d_(d), context_(context) {}
  Buffer(Buffer&& o) noexcept : p_(o.p_), n_(o.n_), d_(o.d_), context_(o.context_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = o.p_;
      n_ = o.n_;
      d_ = o.d_;
      context_ = o.context_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }
  T* data() const { return p_; }
  index_t size() const { return n_; }
  MatrixView<T> matrix(index_t rows, index_t cols, index_t offset = 0) const {
    return MatrixView<T>(p_ + offset, rows, cols);
  }
  StackView<T> stack(index_t count, index_t rows, index_t cols, index_t offset = 0) const {
    return StackView<T>(p_ + offset, count, rows, cols);
  }

 private:
  void reset() {
    if (p_ && d_) d_(p_, context_);
    p_ = nullptr;
  }
  T* p_ = nullptr;
  index_t n_ = 0;
  Deleter d_ = nullptr;
  void* context_ = nullptr;
};

/// Extremes of the singular values of each matrix of a batched polar decomposition; the
/// ratio min/max reveals (numerical) rank deficiency of the input.
template <typename T>
struct PolarInfo {
  /// Per matrix. Exact singular values for the SVD path; for the iterative path the bounds
  /// sigma_max <= ||M||_F and sigma_min >= 1/||M^{-1}||_F, so that sigma_min/sigma_max
  /// under-estimates the true ratio by at most a factor l (see `estimated`).
  std::vector<T> sigma_min, sigma_max;
  int max_iterations = 0;  ///< iterative path: most Newton steps any matrix needed
  int schulz_steps = 0;    ///< iterative path: Newton-Schulz steps taken (0: SVD path)
  /// float32 matrices whose rank float32 could not resolve, recomputed in float64 from the
  /// float32 input (PolarOptions::promote); their G and sigma values are the float64 ones.
  int promoted = 0;
  bool estimated = false;  ///< some sigma_min/sigma_max are the iterative path's bounds
  /// The SVD path produced some G_k: all (chosen, or the fallback of a batch whose ranks were
  /// mostly doubtful) or the few doubtful ones (svd_matrices says how many).
  bool used_svd = true;
  int svd_matrices = 0;             ///< how many G_k the SVD path produced
  double orthogonality_error = -1;  ///< max_k ||G_k^T G_k - I||_F when measured, else -1
};

/// Unless a primitive says otherwise, the stacks it takes are contiguous (StackView::contiguous).
/// The batched polar iteration's kernel contract, which only backends implement and only
/// src/core/polar.cpp calls, is detail::PolarIterationPrimitives (dcalign/detail/).
template <typename T>
class Primitives : public detail::PolarIterationPrimitives<T> {
 public:
  virtual ~Primitives() = default;
  virtual Device device() const = 0;
  /// The same backend's float64 primitives (the same memory space and, on a GPU, the same
  /// stream), through which float32 work recomputes what float32 arithmetic cannot resolve
  /// (precision promotion, src/core/promote.cpp). nullptr where the backend offers none; the
  /// float64 primitives return themselves.
  Primitives<double>* float64() const { return float64_; }
  void set_float64(Primitives<double>* p) { float64_ = p; }

  // ---- memory
  virtual Buffer<T> allocate(index_t n) = 0;
  virtual void to_device(const T* host, T* dst, index_t n) = 0;
  virtual void to_host(const T* src, T* host, index_t n) = 0;
  /// dst = src over n values; the ranges may overlap (memmove semantics).
  virtual void copy(const T* src, T* dst, index_t n) = 0;
  virtual void fill(T* dst, index_t n, T value) = 0;
  /// dst = src widened to float64 (exactly), dst in the memory of float64() (the same device
  /// and stream); equal shapes, any leading dimensions. For float64 primitives a copy.
  virtual void to_float64(MatrixView<const T> src, MatrixView<double> dst) = 0;
  /// dst = src (memory of float64()) rounded to T, to nearest; equal shapes, any leading
  /// dimensions. For float64 primitives a copy.
  virtual void from_float64(MatrixView<const double> src, MatrixView<T> dst) = 0;
  /// Waits for queued work (no-op on the CPU); used before reading clocks.
  virtual void synchronize() = 0;

  // ---- BLAS level
  /// C = alpha op(A) op(B) + beta C.
  virtual void gemm(Op ta, Op tb, T alpha, MatrixView<const T> A, MatrixView<const T> B, T beta,
                    MatrixView<T> C) = 0;
  /// C_k = alpha op(A_k) op(B_k) + beta C_k; a stack with count 1 is broadcast.
  virtual void gemm_batched(Op ta, Op tb, T alpha, StackView<const T> A, StackView<const T> B,
                            T beta, StackView<T> C) = 0;
  /// Solves R_k X_k = B_k in place (R_k upper triangular, square).
  virtual void trsm_upper_batched(StackView<const T> R, StackView<T> B) = 0;
  /// out = [M_1; M_2; ...; M_c] (count*rows x cols, leading dimension out.ld()); `in` may be
  /// strided.
  virtual void vstack(StackView<const T> in, MatrixView<T> out) = 0;
  /// dst_k(i, j) = src[k * sc + i * si + j * sj]: a stack of the backend's memory in any layout
  /// with non-negative element strides (a DLPack tensor's, a C-ordered one) gathered into
  /// `dst`'s (which may be strided).
  virtual void gather(const T* src, index_t sc, index_t si, index_t sj, StackView<T> dst) = 0;
  /// Inverse of vstack (`out` may be strided).
  virtual void unvstack(MatrixView<const T> in, StackView<T> out) = 0;
  /// C = alpha A^T A + beta C (Op::trans) or alpha A A^T + beta C (Op::none), C square and,
  /// when beta != 0, symmetric on entry; both triangles of C are written (symmetric up to
  /// rounding).
  virtual void syrk(Op trans, T alpha, MatrixView<const T> A, T beta, MatrixView<T> C) = 0;
  /// C = alpha A + beta B (equal shapes; C may alias A or B).
  virtual void geam(T alpha, MatrixView<const T> A, T beta, MatrixView<const T> B,
                    MatrixView<T> C) = 0;

  // ---- factorizations
  /// G_k = orthogonal polar factor of M_k (or of M_k^T when `transposed`), via the SVD
  /// M = U S V^T, G = U V^T. Square l x l matrices; M may be strided (e.g. the row blocks of
  /// the product W^T Z), G is contiguous.
  virtual PolarInfo<T> polar_batched(StackView<const T> M, bool transposed, StackView<T> G) = 0;
  /// Thin QR of each a x l matrix: A_k is overwritten by Q_k, R_k (l x l) written to R.
  /// Returns per matrix min_j |R_jj| / max_j |R_jj| (0 for an exactly singular R).
  virtual std::vector<T> qr_batched(StackView<T> A, StackView<T> R) = 0;
  /// Top-k singular triplets of W (m x n, k <= min(m, n)) by the exact SVD. U (m x k) and V
  /// (n x k) may be empty views when not wanted; s receives k values on the host, in
  /// decreasing order. (The randomized and Gram routes are core::topk_svd's.)
  virtual void svd_topk(MatrixView<const T> W, index_t k, T* s, MatrixView<T> U,
                        MatrixView<T> V) = 0;
  /// Least squares G_k = A_k^+ Z for every k (A_k a x l, Z a x l), through the SVD of A_k.
  /// Returns the singular value ratio min/max of every A_k, for rank decisions.
  virtual std::vector<T> lstsq_batched(StackView<const T> A, MatrixView<const T> Z,
                                       StackView<T> G) = 0;
  /// The k largest eigenpairs of the symmetric S (n x n; only its lower triangle is read, and S
  /// is overwritten): eigenvalues on the host in decreasing order, orthonormal eigenvectors in
  /// V (n x k, column j for evals[j]).
  virtual void syev_largest(MatrixView<T> S, index_t k, T* evals, MatrixView<T> V) = 0;
  /// The k smallest eigenpairs of the symmetric-definite pencil S v = lambda B v (n x n),
  /// normalised so that V^T B V = I. Only the lower triangles of S and B are read; S is
  /// overwritten, and B's lower triangle holds its Cholesky factor L (B = L L^T) on return, as
  /// LAPACK's and cuSOLVER's sygv leave it. Eigenvalues (host) ascending. A B that is not
  /// positive definite throws InvalidInput naming the leading minor.
  virtual void sygv_smallest(MatrixView<T> S, MatrixView<T> B, index_t k, T* evals,
                             MatrixView<T> V) = 0;

  /// C_k <- C_k + alpha I for every square C_k (C may be strided).
  virtual void add_identity_batched(T alpha, StackView<T> C) = 0;

  // ---- reductions (results on the host)
  /// False when any of the n values is NaN or infinite.
  virtual bool all_finite(const T* x, index_t n) = 0;
  /// Index of the first non-finite entry of each matrix, or -1.
  virtual std::vector<index_t> first_nonfinite_batched(StackView<const T> x) = 0;
  /// ||G_k^T G_k - I||_F for every k (G_k r x l, any r).
  virtual std::vector<T> orthogonality_errors(StackView<const T> G) = 0;
  /// ||A_k G_k - Z||_F^2 for every k.
  virtual std::vector<T> residuals(StackView<const T> A, StackView<const T> G,
                                   MatrixView<const T> Z) = 0;
  /// ||A_k g_kj||^2 for every k and column j of G_k, as a c x l column-major host matrix.
  virtual std::vector<T> product_column_norms(StackView<const T> A, StackView<const T> G) = 0;
  /// sum of x_i^2 over n contiguous values, accumulated in double.
  virtual double sum_squares(const T* x, index_t n) = 0;
  /// <X_k, Y_k>_F = sum_ij X_k(i, j) Y_k(i, j) for every k, accumulated in double; X and Y may
  /// be strided (X = Y gives ||X_k||_F^2). The evaluation uses it for ||A_i||_F^2 and
  /// tr(G_i^T M_i).
  virtual std::vector<double> inner_products(StackView<const T> X, StackView<const T> Y) = 0;

 private:
  Primitives<double>* float64_ = nullptr;
};

struct BackendOptions {
  int threads = 0;          ///< CPU threads over users (0: all cores)
  int device_id = 0;        ///< CUDA device ordinal
  bool allow_tf32 = false;  ///< CUDA: TF32 tensor-core GEMM for float (off unless asked for)
  /// CUDA: uploads of at least 8 MiB from pageable host memory go through two page-locked
  /// staging buffers that several host threads fill while the previous one is transferred
  /// (src/base/staged_copy.hpp); false: the CUDA driver's own pageable copy.
  bool staged_upload = true;
  /// CUDA: a cudaStream_t (of device_id) to queue all work on instead of dcalign's own stream,
  /// e.g. the caller's c10::cuda::getCurrentCUDAStream() (dcalign::torch_api does this). The
  /// backend adopts it and never destroys it. It never synchronises the device: only this
  /// stream, and only where a result must come to the host (the decisions and reports of the
  /// algorithms); results left in device memory are ordered on the stream like the caller's
  /// own work, and the backend's memory is freed stream-ordered on it, so the stream must
  /// outlive the backend and its buffers. nullptr (default): dcalign's own non-blocking stream
  /// of the device; the legacy default stream is adopted as cudaStreamLegacy.
  void* cuda_stream = nullptr;
  /// CUDA: the order n from which the polar iteration's batched inverses factor each matrix on
  /// its own (cuSOLVER getrf + getrs) instead of in one batched call; 0 (default): never. A
  /// tuning knob; its measurements are noted in src/cuda/context.cu.
  index_t cuda_inverse_per_matrix_from = 0;
};

/// The BackendOptions::cuda_stream that names CUDA's legacy default stream (cudaStreamLegacy;
/// DLPack's stream 1), for code that does not include the CUDA headers.
inline void* cuda_legacy_default_stream() { return reinterpret_cast<void*>(std::uintptr_t(1)); }

/// A backend: where the data lives and who computes. Owns library handles and workspaces.
class Backend {
 public:
  Backend() = default;
  // Not copied or moved: a backend's float32 primitives point at its float64 ones.
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  /// Human-readable description (library versions, device model).
  virtual std::string description() const = 0;
  virtual Primitives<float>& f32() = 0;
  virtual Primitives<double>& f64() = 0;
  template <typename T>
  Primitives<T>& primitives();
};

template <>
inline Primitives<float>& Backend::primitives<float>() {
  return f32();
}
template <>
inline Primitives<double>& Backend::primitives<double>() {
  return f64();
}

/// Creates a backend. Device::cuda throws BackendError with the reason when the CUDA backend
/// is not compiled in or no usable GPU is present.
std::shared_ptr<Backend> make_backend(Device device, const BackendOptions& opts = {});

/// Whether make_backend(Device::cuda) can succeed here; `why` receives the reason if not.
bool cuda_available(std::string* why = nullptr);

/// A device's memory in bytes: free now, and in all.
struct DeviceMemory {
  std::uint64_t free = 0, total = 0;
};
/// Device::cpu: this machine's memory (MemAvailable and MemTotal of /proc/meminfo, each bounded
/// by the memory limit of the process's cgroup when it has one). Device::cuda: cudaMemGetInfo on
/// `device_id`. Throws BackendError with the reason when the device cannot be asked.
DeviceMemory device_memory(Device device, int device_id = 0);
/// The number of CUDA devices visible to this process: 0 without the CUDA backend, a driver or
/// a GPU.
int cuda_device_count();

/// The host BLAS as it runs in this process. OpenBLAS picks its kernels when it loads; where it
/// picked a set below what the CPU supports (a CPU newer than the library), dcalign loads the
/// right set while it is itself loaded, before its first BLAS call, unless the user chose:
/// OPENBLAS_CORETYPE always wins, and DCALIGN_BLAS_KERNELS=library keeps the library's choice.
struct BlasInfo {
  std::string library;    ///< e.g. "OpenBLAS 0.3.21"
  std::string kernels;    ///< the kernel set in use, e.g. "SkylakeX"
  std::string chosen_by;  ///< "OpenBLAS", "dcalign", "OPENBLAS_CORETYPE" or
                          ///< "DCALIGN_BLAS_KERNELS=library"
  std::string reason;     ///< one sentence: why this set
  std::string cpu;        ///< the CPU's vector level, e.g. "AVX-512"
  int threads = 1;        ///< the library's thread count
};
BlasInfo blas_info();

/// Several lines for `--version`: dcalign's version, the BLAS and its kernels, the CPU
/// kernels' instruction set and whether a CUDA backend can start here (and why not).
std::string runtime_summary();

}  // namespace dcalign
