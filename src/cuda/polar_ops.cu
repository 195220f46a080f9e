// The primitives of the batched polar iteration (src/core/polar.cpp) on the GPU: the whole Newton
// phase, and with it the polish, in one kernel while X and its inverse fit one block's shared
// memory (kernels/polar_fused.cu); above that, own kernels for the per-matrix steps
// (kernels/polar_kernels.cu) and cuBLAS batched LU for the inverses.
#include <algorithm>
#include <string>

#include "cuda/check.hpp"
#include "cuda/library.hpp"
#include "cuda/ops.hpp"
#include "kernels/kernels.cuh"

namespace dcalign::cuda::ops {
namespace {

template <typename T>
void require_square_stack(StackView<T> X, index_t count, index_t n, const char* what) {
  if (X.count() != count || X.rows() != n || X.cols() != n || !X.contiguous())
    throw InvalidInput(std::string(what) +
                       ": expected a contiguous stack of square matrices (internal error)");
}

}  // namespace

template <typename T>
void polar_start(Context& ctx, StackView<const T> M, bool transposed, StackView<T> X, T* state,
                 double stop_below) {
  const index_t count = M.count(), n = M.rows();
  if (M.cols() != n) throw InvalidInput("polar_start: square matrices expected (internal error)");
  require_square_stack(X, count, n, "polar_start");
  to_int(n * n, "matrix size");
  to_int(count, "batch count");  // one block per matrix
  kernels::polar_start(ctx.stream(), count, n, M.data(), M.ld(), M.stride(), transposed, X.data(),
                       state, stop_below);
}

template <typename T>
void inverse_batched(Context& ctx, StackView<const T> X, StackView<T> Y, T* state) {
  const index_t count = X.count(), n = X.rows();
  require_square_stack(X, count, n, "inverse_batched");
  require_square_stack(Y, count, n, "inverse_batched");
  if (count == 0 || n == 0) return;
  const int ni = to_int(n, "n"), batch = to_int(count, "batch count");
  to_int(n * n, "matrix size");
  int* info = nullptr;
  if (n <= 32) {
    // One cuBLAS kernel for small orders (LU with partial pivoting and inverse, n <= 32).
    info = static_cast<int*>(ctx.workspace(Context::kSolver, sizeof(int) * count));
    T** x = ctx.pointers(Context::kPtrA, X.data(), n * n, count);
    T** y = ctx.pointers(Context::kPtrB, Y.data(), n * n, count);
    DCALIGN_CUDA(lib::matinv_batched(ctx.blas(), ni, x, ni, y, ni, info, batch));
  } else if (ctx.inverse_per_matrix_from() > 0 && n >= ctx.inverse_per_matrix_from()) {
    // cuSOLVER's blocked LU per matrix (BackendOptions::cuda_inverse_per_matrix_from): the
    // factors of X_k in a copy, Y_k = I, then getrs overwrites Y_k with X_k^{-1}. One matrix
    // after another on the backend's stream; each call is large enough at the orders this is
    // meant for (hundreds) to fill the GPU itself, where cuBLAS's batched LU is built for
    // small ones.
    const int lda = ni;
    T* lu = static_cast<T*>(ctx.workspace(Context::kScratch, sizeof(T) * count * n * n));
    int lwork = 0;
    DCALIGN_CUDA(lib::getrf_buffer_size(ctx.solver(), ni, lu, lda, &lwork));
    Layout solver;
    const size_t piv_at = solver.add<int>(n), info_at = solver.add<int>(count),
                 solve_info_at = solver.add<int>(1), work_at = solver.add<T>(std::max(lwork, 1));
    void* base = ctx.workspace(Context::kSolver, solver.bytes());
    int* piv = Layout::at<int>(base, piv_at);
    info = Layout::at<int>(base, info_at);
    int* solve_info = Layout::at<int>(base, solve_info_at);
    T* work = Layout::at<T>(base, work_at);
    DCALIGN_CUDA(cudaMemcpyAsync(lu, X.data(), sizeof(T) * count * n * n, cudaMemcpyDeviceToDevice,
                                 ctx.stream()));
    kernels::fill(ctx.stream(), Y.data(), count * n * n, T(0));
    kernels::add_identity(ctx.stream(), count, n, Y.data(), n, n * n, T(1));
    for (index_t k = 0; k < count; ++k) {
      T* a = lu + k * n * n;
      // A singular U gives info[k] > 0 and a getrs result of Inf/NaN: the state is marked
      // singular below, as for the batched route, and the iteration stops that matrix.
      DCALIGN_CUDA(lib::getrf(ctx.solver(), ni, a, lda, work, piv, info + k));
      DCALIGN_CUDA(
          lib::getrs(ctx.solver(), ni, ni, a, lda, piv, Y.data() + k * n * n, ni, solve_info));
    }
  } else {
    // getrfBatched factors in place, so X (const) is copied first; getriBatched then writes
    // the inverse out of place into Y.
    Layout solver;
    const size_t piv_at = solver.add<int>(count * n), info_at = solver.add<int>(count),
                 info_inv_at = solver.add<int>(count);
    void* base = ctx.workspace(Context::kSolver, solver.bytes());
    int* piv = Layout::at<int>(base, piv_at);
    info = Layout::at<int>(base, info_at);
    int* info_inv = Layout::at<int>(base, info_inv_at);
    T* lu = static_cast<T*>(ctx.workspace(Context::kScratch, sizeof(T) * count * n * n));
    DCALIGN_CUDA(cudaMemcpyAsync(lu, X.data(), sizeof(T) * count * n * n, cudaMemcpyDeviceToDevice,
                                 ctx.stream()));
    T** a = ctx.pointers(Context::kPtrA, static_cast<const T*>(lu), n * n, count);
    T** y = ctx.pointers(Context::kPtrB, Y.data(), n * n, count);
    DCALIGN_CUDA(lib::getrf_batched(ctx.blas(), ni, a, ni, piv, info, batch));
    DCALIGN_CUDA(lib::getri_batched(ctx.blas(), ni, a, ni, piv, y, ni, info_inv, batch));
  }
  // info[k] > 0: U(info, info) is exactly zero.
  kernels::polar_mark_singular(ctx.stream(), count, info, state);
}

template <typename T>
index_t polar_newton_step(Context& ctx, StackView<T> X, StackView<const T> Y, T* state,
                          int iteration, double tolerance) {
  const index_t count = X.count(), n = X.rows();
  require_square_stack(X, count, n, "polar_newton_step");
  require_square_stack(Y, count, n, "polar_newton_step");
  if (count == 0 || n == 0) return 0;
  to_int(n * n, "matrix size");
  to_int(count, "batch count");  // one block per matrix
  int* active = static_cast<int*>(ctx.workspace(Context::kResults, sizeof(int)));
  DCALIGN_CUDA(cudaMemsetAsync(active, 0, sizeof(int), ctx.stream()));
  kernels::polar_newton_step(ctx.stream(), count, n, X.data(), Y.data(), state, iteration,
                             tolerance, active);
  int host = 0;
  download(ctx, static_cast<const int*>(active), &host, 1);  // the iteration's only sync
  return host;
}

namespace {

// Queues the fused kernel on a non-empty batch (with the polish into G when G is given; the
// count of still active matrices into *active, zeroed first, when active is given): false,
// nothing queued, where the kernel does not take n x n matrices on this device (n within
// fused_polar_limit and its shared memory within what one block may have, opt-in).
template <typename T>
bool launch_fused(Context& ctx, StackView<T> X, T* state, int max_steps, double tolerance,
                  int* active, T* G) {
  const index_t count = X.count(), n = X.rows();
  if (n > fused_polar_limit<T>()) return false;
  int optin = 0;
  DCALIGN_CUDA(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device()));
  if (kernels::polar_fused_shared_bytes<T>(n) > static_cast<std::size_t>(optin)) return false;
  to_int(count, "batch count");  // one block per matrix
  if (active) DCALIGN_CUDA(cudaMemsetAsync(active, 0, sizeof(int), ctx.stream()));
  return kernels::polar_newton_fused(ctx.stream(), count, n, X.data(), state, max_steps, tolerance,
                                     active, G) == cudaSuccess;
}

}  // namespace

template <typename T>
index_t polar_newton_steps(Context& ctx, StackView<T> X, StackView<T> Y, T* state, int max_steps,
                           double tolerance) {
  const index_t count = X.count(), n = X.rows();
  require_square_stack(X, count, n, "polar_newton_steps");
  require_square_stack(Y, count, n, "polar_newton_steps");
  if (count == 0 || n == 0) return 0;
  int* active = static_cast<int*>(ctx.workspace(Context::kResults, sizeof(int)));
  if (!launch_fused<T>(ctx, X, state, max_steps, tolerance, active, nullptr)) return -1;
  int host = 0;
  download(ctx, static_cast<const int*>(active), &host, 1);  // the whole phase's only sync
  return host;
}

template <typename T>
bool polar_newton_polish(Context& ctx, StackView<T> X, StackView<T> G, T* state, int max_steps,
                         double tolerance) {
  const index_t count = X.count(), n = X.rows();
  require_square_stack(X, count, n, "polar_newton_polish");
  require_square_stack(G, count, n, "polar_newton_polish");
  if (count == 0 || n == 0) return true;
  // No count of active matrices: the caller reads the states once, which say the same, so
  // nothing waits for the kernel and nothing is zeroed before it.
  return launch_fused<T>(ctx, X, state, max_steps, tolerance, nullptr, G.data());
}

template <typename T>
void add_identity_batched(Context& ctx, T alpha, StackView<T> C) {
  if (C.rows() != C.cols())
    throw InvalidInput("add_identity_batched: square matrices expected (internal error)");
  kernels::add_identity(ctx.stream(), C.count(), C.rows(), C.data(), C.ld(), C.stride(), alpha);
}

#define DCALIGN_INSTANTIATE_POLAR_OPS(T)                                                         \
  template void polar_start<T>(Context&, StackView<const T>, bool, StackView<T>, T*, double);    \
  template void inverse_batched<T>(Context&, StackView<const T>, StackView<T>, T*);              \
  template index_t polar_newton_step<T>(Context&, StackView<T>, StackView<const T>, T*, int,     \
                                        double);                                                 \
  template index_t polar_newton_steps<T>(Context&, StackView<T>, StackView<T>, T*, int, double); \
  template bool polar_newton_polish<T>(Context&, StackView<T>, StackView<T>, T*, int, double);   \
  template void add_identity_batched<T>(Context&, T, StackView<T>);
DCALIGN_INSTANTIATE_POLAR_OPS(float)
DCALIGN_INSTANTIATE_POLAR_OPS(double)

}  // namespace dcalign::cuda::ops
