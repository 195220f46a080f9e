// Memory, BLAS-level primitives and reductions of the CUDA backend.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/check.hpp"
#include "cuda/library.hpp"
#include "cuda/ops.hpp"
#include "kernels/kernels.cuh"

namespace dcalign::cuda::ops {

template <typename U>
void download(Context& ctx, const U* src, U* host, index_t n) {
  if (n <= 0) return;
  DCALIGN_CUDA(cudaMemcpyAsync(host, src, sizeof(U) * static_cast<size_t>(n),
                               cudaMemcpyDeviceToHost, ctx.stream()));
  ctx.sync();
}
template void download<float>(Context&, const float*, float*, index_t);
template void download<double>(Context&, const double*, double*, index_t);
template void download<int>(Context&, const int*, int*, index_t);
template void download<unsigned long long>(Context&, const unsigned long long*, unsigned long long*,
                                           index_t);

index_t users_per_chunk(index_t per_user, index_t count) {
  // 2^25 values: 256 MiB of doubles of scratch at most for the per-user products.
  constexpr index_t kBudget = index_t(1) << 25;
  const index_t users = per_user > 0 ? kBudget / per_user : count;
  return std::max<index_t>(1, std::min(users, std::max<index_t>(count, 1)));
}

// ---- memory

template <typename T>
Buffer<T> allocate(Context& ctx, index_t n) {
  if (n < 0) throw InvalidInput("allocate: negative size");
  const index_t count = std::max<index_t>(n, 1);
  if (static_cast<std::uint64_t>(count) > SIZE_MAX / sizeof(T))
    throw BackendError("allocate: " + std::to_string(n) + " values exceed the address space");
  void* p = device_malloc(static_cast<size_t>(count) * sizeof(T), ctx.stream(), "a buffer");
  return Buffer<T>(static_cast<T*>(p), n, &free_on_stream, ctx.stream());
}

namespace {

// Pageable (not page-locked, not registered, not managed) host memory.
bool pageable(const void* host) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, host) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;  // unknown to CUDA: leave it to the driver's copy
  }
  return attr.type == cudaMemoryTypeUnregistered;
}

}  // namespace

template <typename T>
void to_device(Context& ctx, const T* host, T* dst, index_t n) {
  if (n <= 0) return;
  const std::size_t bytes = sizeof(T) * static_cast<size_t>(n);
  // Large copies from pageable memory: staged (BackendOptions::staged_upload), which returns
  // once `host` is no longer read, with the transfers ordered on the stream.
  constexpr std::size_t kStageFrom = std::size_t(8) << 20;
  if (ctx.staged_upload() && bytes >= kStageFrom && pageable(host)) {
    ctx.upload_staged(host, dst, bytes);
    return;
  }
  DCALIGN_CUDA(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, ctx.stream()));
  // Callers may release the host memory as soon as this returns (core::upload does); for
  // page-locked host memory the copy could still be reading it, so wait.
  ctx.sync();
}

template <typename T>
void to_host(Context& ctx, const T* src, T* host, index_t n) {
  download(ctx, src, host, n);
}

template <typename T>
void copy(Context& ctx, const T* src, T* dst, index_t n) {
  if (n <= 0 || src == dst) return;
  const size_t bytes = sizeof(T) * static_cast<size_t>(n);
  const bool overlap = (src < dst + n) && (dst < src + n);
  if (!overlap) {
    DCALIGN_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
    return;
  }
  // memmove semantics (the CPU backend's): through a scratch copy.
  void* tmp = ctx.workspace(Context::kScratch, bytes);
  DCALIGN_CUDA(cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
  DCALIGN_CUDA(cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
}

template <typename T>
void fill(Context& ctx, T* dst, index_t n, T value) {
  kernels::fill(ctx.stream(), dst, n, value);
}

template <typename S, typename D>
void convert(Context& ctx, MatrixView<const S> src, MatrixView<D> dst) {
  if (src.rows() != dst.rows() || src.cols() != dst.cols())
    throw InvalidInput("convert: shapes differ (internal error)");
  if (src.rows() == 0 || src.cols() == 0) return;
  to_int(src.rows(), "rows");
  to_int(src.cols(), "columns");
  if constexpr (std::is_same_v<S, D>) {
    kernels::copy_matrices(ctx.stream(), 1, src.rows(), src.cols(), src.data(), src.ld(), 0,
                           dst.data(), dst.ld(), 0);
  } else {
    kernels::convert_matrix(ctx.stream(), src.rows(), src.cols(), src.data(), src.ld(), dst.data(),
                            dst.ld());
  }
}
template void convert<float, double>(Context&, MatrixView<const float>, MatrixView<double>);
template void convert<double, float>(Context&, MatrixView<const double>, MatrixView<float>);
template void convert<double, double>(Context&, MatrixView<const double>, MatrixView<double>);

// ---- BLAS level

template <typename T>
void gemm(Context& ctx, Op ta, Op tb, T alpha, MatrixView<const T> A, MatrixView<const T> B, T beta,
          MatrixView<T> C) {
  const bool at = ta == Op::trans, bt = tb == Op::trans;
  const index_t m = at ? A.cols() : A.rows(), k = at ? A.rows() : A.cols();
  const index_t kb = bt ? B.cols() : B.rows(), n = bt ? B.rows() : B.cols();
  if (k != kb || C.rows() != m || C.cols() != n)
    throw InvalidInput("gemm: inner or outer dimensions do not match (internal error)");
  if (m == 0 || n == 0) return;
  DCALIGN_CUDA(lib::gemm(ctx.blas(), lib::op(at), lib::op(bt), to_int(m, "gemm m"),
                         to_int(n, "gemm n"), to_int(k, "gemm k"), &alpha, A.data(),
                         to_int(std::max<index_t>(A.ld(), 1), "lda"), B.data(),
                         to_int(std::max<index_t>(B.ld(), 1), "ldb"), &beta, C.data(),
                         to_int(std::max<index_t>(C.ld(), 1), "ldc")));
}

template <typename T>
void syrk(Context& ctx, Op trans, T alpha, MatrixView<const T> A, T beta, MatrixView<T> C) {
  const bool t = trans == Op::trans;
  const index_t n = t ? A.cols() : A.rows();
  if (C.rows() != n || C.cols() != n)
    throw InvalidInput("syrk: C must be square of the product's order (internal error)");
  // cuBLAS's syrk fills one triangle; the other would need a mirroring kernel. On the GPU the
  // full gemm costs little more than that extra pass, so both triangles come from it.
  gemm(ctx, t ? Op::trans : Op::none, t ? Op::none : Op::trans, alpha, A, A, beta, C);
}

template <typename T>
void gemm_batched(Context& ctx, Op ta, Op tb, T alpha, StackView<const T> A, StackView<const T> B,
                  T beta, StackView<T> C) {
  const index_t count = C.count();
  if ((A.count() != count && A.count() != 1) || (B.count() != count && B.count() != 1))
    throw InvalidInput("gemm_batched: batch counts do not match (internal error)");
  const bool at = ta == Op::trans, bt = tb == Op::trans;
  const index_t m = at ? A.cols() : A.rows(), k = at ? A.rows() : A.cols();
  const index_t kb = bt ? B.cols() : B.rows(), n = bt ? B.rows() : B.cols();
  if (k != kb || C.rows() != m || C.cols() != n)
    throw InvalidInput("gemm_batched: inner or outer dimensions do not match (internal error)");
  if (count == 0 || m == 0 || n == 0) return;
  // A stack of one matrix is broadcast: stride 0.
  const long long sa = A.count() == 1 ? 0 : A.stride(), sb = B.count() == 1 ? 0 : B.stride();
  DCALIGN_CUDA(lib::gemm_strided_batched(
      ctx.blas(), lib::op(at), lib::op(bt), to_int(m, "gemm_batched m"),
      to_int(n, "gemm_batched n"), to_int(k, "gemm_batched k"), &alpha, A.data(),
      to_int(std::max<index_t>(A.ld(), 1), "lda"), sa, B.data(),
      to_int(std::max<index_t>(B.ld(), 1), "ldb"), sb, &beta, C.data(),
      to_int(std::max<index_t>(C.ld(), 1), "ldc"), C.stride(), to_int(count, "batch count")));
}

template <typename T>
void trsm_upper_batched(Context& ctx, StackView<const T> R, StackView<T> B) {
  const index_t count = B.count();
  if (R.count() != count || R.rows() != R.cols() || R.rows() != B.rows())
    throw InvalidInput("trsm_upper_batched: shapes do not match (internal error)");
  if (count == 0 || B.rows() == 0 || B.cols() == 0) return;
  T** r = ctx.pointers(Context::kPtrA, R.data(), R.stride(), count);
  T** b = ctx.pointers(Context::kPtrB, B.data(), B.stride(), count);
  const T one = T(1);
  DCALIGN_CUDA(lib::trsm_upper_batched(ctx.blas(), to_int(B.rows(), "trsm m"),
                                       to_int(B.cols(), "trsm n"), &one, r, to_int(R.ld(), "ldr"),
                                       b, to_int(B.ld(), "ldb"), to_int(count, "batch count")));
}

template <typename T>
void vstack(Context& ctx, StackView<const T> in, MatrixView<T> out) {
  if (out.rows() != in.count() * in.rows() || out.cols() != in.cols())
    throw InvalidInput("vstack: shapes do not match (internal error)");
  to_int(in.rows() * in.cols(), "matrix size");
  kernels::copy_matrices(ctx.stream(), in.count(), in.rows(), in.cols(), in.data(), in.ld(),
                         in.stride(), out.data(), out.ld(), in.rows());
}

template <typename T>
void unvstack(Context& ctx, MatrixView<const T> in, StackView<T> out) {
  if (in.rows() != out.count() * out.rows() || in.cols() != out.cols())
    throw InvalidInput("unvstack: shapes do not match (internal error)");
  to_int(out.rows() * out.cols(), "matrix size");
  kernels::copy_matrices(ctx.stream(), out.count(), out.rows(), out.cols(), in.data(), in.ld(),
                         out.rows(), out.data(), out.ld(), out.stride());
}

template <typename T>
void gather(Context& ctx, const T* src, index_t sc, index_t si, index_t sj, StackView<T> dst) {
  if (sc < 0 || si < 0 || sj < 0)
    throw InvalidInput("gather: negative strides are not supported (internal error)");
  kernels::gather_matrices(ctx.stream(), dst.count(), dst.rows(), dst.cols(), src, sc, si, sj,
                           dst.data(), dst.ld(), dst.stride());
}

template <typename T>
void geam(Context& ctx, T alpha, MatrixView<const T> A, T beta, MatrixView<const T> B,
          MatrixView<T> C) {
  if (A.rows() != C.rows() || A.cols() != C.cols() || B.rows() != C.rows() || B.cols() != C.cols())
    throw InvalidInput("geam: shapes do not match (internal error)");
  if (C.rows() == 0 || C.cols() == 0) return;
  // cuBLAS allows C == A (or C == B) in place when the leading dimensions agree, which is how
  // the callers alias.
  if ((C.data() == A.data() && C.ld() != A.ld()) || (C.data() == B.data() && C.ld() != B.ld()))
    throw InvalidInput("geam: an aliased output needs the same leading dimension (internal)");
  DCALIGN_CUDA(lib::geam(ctx.blas(), to_int(C.rows(), "geam m"), to_int(C.cols(), "geam n"), &alpha,
                         A.data(), to_int(A.ld(), "lda"), &beta, B.data(), to_int(B.ld(), "ldb"),
                         C.data(), to_int(C.ld(), "ldc")));
}

// ---- reductions

template <typename T>
bool all_finite(Context& ctx, const T* x, index_t n) {
  if (n <= 0) return true;
  int* flag = static_cast<int*>(ctx.workspace(Context::kResults, sizeof(int)));
  DCALIGN_CUDA(cudaMemsetAsync(flag, 0, sizeof(int), ctx.stream()));
  kernels::flag_nonfinite(ctx.stream(), x, n, flag);
  int host = 0;
  download(ctx, flag, &host, 1);
  return host == 0;
}

template <typename T>
std::vector<index_t> first_nonfinite_batched(Context& ctx, StackView<const T> x) {
  const index_t count = x.count();
  std::vector<index_t> out(static_cast<size_t>(count), -1);
  if (count == 0 || x.rows() == 0 || x.cols() == 0) return out;
  to_int(x.rows() * x.cols(), "matrix size");
  auto* first = static_cast<unsigned long long*>(
      ctx.workspace(Context::kResults, sizeof(unsigned long long) * static_cast<size_t>(count)));
  DCALIGN_CUDA(cudaMemsetAsync(first, 0xFF, sizeof(unsigned long long) * static_cast<size_t>(count),
                               ctx.stream()));
  kernels::first_nonfinite(ctx.stream(), count, x.rows(), x.cols(), x.data(), x.ld(), x.stride(),
                           first);
  std::vector<unsigned long long> host(static_cast<size_t>(count));
  download(ctx, first, host.data(), count);
  for (index_t k = 0; k < count; ++k)
    if (host[k] != ULLONG_MAX) out[k] = static_cast<index_t>(host[k]);
  return out;
}

template <typename T>
std::vector<T> orthogonality_errors(Context& ctx, StackView<const T> G) {
  const index_t count = G.count(), r = G.rows(), l = G.cols();
  std::vector<T> err(static_cast<size_t>(count), T(0));
  if (count == 0 || l == 0) return err;
  to_int(l * l, "matrix size");
  const index_t chunk = users_per_chunk(l * l, count);
  T* gram = static_cast<T*>(ctx.workspace(Context::kScratch, sizeof(T) * chunk * l * l));
  T* out = static_cast<T*>(ctx.workspace(Context::kResults, sizeof(T) * count));
  const T one = T(1), zero = T(0);
  for (index_t k0 = 0; k0 < count; k0 += chunk) {
    const index_t kc = std::min(chunk, count - k0);
    const T* g = G.data() + k0 * G.stride();
    DCALIGN_CUDA(lib::gemm_strided_batched(
        ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, to_int(l, "l"), to_int(l, "l"), to_int(r, "rows"),
        &one, g, to_int(std::max<index_t>(G.ld(), 1), "ldg"), G.stride(), g,
        to_int(std::max<index_t>(G.ld(), 1), "ldg"), G.stride(), &zero, gram, to_int(l, "l"), l * l,
        to_int(kc, "batch count")));
    kernels::identity_distance(ctx.stream(), kc, l, gram, out + k0);
  }
  download(ctx, out, err.data(), count);
  return err;
}

namespace {

// Y_k = A_k G_k for users [k0, k0 + kc) into contiguous a x nz scratch matrices.
template <typename T>
void products(Context& ctx, StackView<const T> A, StackView<const T> G, index_t k0, index_t kc,
              T* Y) {
  const T one = T(1), zero = T(0);
  const index_t a = A.rows(), l = A.cols(), nz = G.cols();
  DCALIGN_CUDA(lib::gemm_strided_batched(
      ctx.blas(), CUBLAS_OP_N, CUBLAS_OP_N, to_int(a, "a"), to_int(nz, "columns of G"),
      to_int(l, "l"), &one, A.data() + k0 * A.stride(), to_int(std::max<index_t>(A.ld(), 1), "lda"),
      A.stride(), G.data() + k0 * G.stride(), to_int(std::max<index_t>(G.ld(), 1), "ldg"),
      G.stride(), &zero, Y, to_int(std::max<index_t>(a, 1), "a"), a * nz,
      to_int(kc, "batch count")));
}

template <typename T>
void check_products(StackView<const T> A, StackView<const T> G, const char* what) {
  if (G.count() != A.count() || G.rows() != A.cols())
    throw InvalidInput(std::string(what) + ": shapes do not match (internal error)");
  to_int(A.rows() * G.cols(), "matrix size");
}

}  // namespace

template <typename T>
std::vector<T> residuals(Context& ctx, StackView<const T> A, StackView<const T> G,
                         MatrixView<const T> Z) {
  check_products(A, G, "residuals");
  const index_t count = A.count(), a = A.rows(), nz = G.cols();
  if (Z.rows() != a || Z.cols() != nz)
    throw InvalidInput("residuals: Z has the wrong shape (internal error)");
  std::vector<T> res(static_cast<size_t>(count), T(0));
  if (count == 0) return res;
  const index_t chunk = users_per_chunk(a * nz, count);
  T* y = static_cast<T*>(ctx.workspace(Context::kScratch, sizeof(T) * chunk * a * nz));
  T* out = static_cast<T*>(ctx.workspace(Context::kResults, sizeof(T) * count));
  for (index_t k0 = 0; k0 < count; k0 += chunk) {
    const index_t kc = std::min(chunk, count - k0);
    products(ctx, A, G, k0, kc, y);
    kernels::residual_sums(ctx.stream(), kc, a, nz, y, Z.data(), Z.ld(), out + k0);
  }
  download(ctx, out, res.data(), count);
  return res;
}

template <typename T>
std::vector<T> product_column_norms(Context& ctx, StackView<const T> A, StackView<const T> G) {
  check_products(A, G, "product_column_norms");
  const index_t count = A.count(), a = A.rows(), nz = G.cols();
  std::vector<T> norms(static_cast<size_t>(count * nz), T(0));
  if (count == 0 || nz == 0) return norms;
  const index_t chunk = users_per_chunk(a * nz, count);
  T* y = static_cast<T*>(ctx.workspace(Context::kScratch, sizeof(T) * chunk * a * nz));
  T* out = static_cast<T*>(ctx.workspace(Context::kResults, sizeof(T) * count * nz));
  for (index_t k0 = 0; k0 < count; k0 += chunk) {
    const index_t kc = std::min(chunk, count - k0);
    products(ctx, A, G, k0, kc, y);
    kernels::column_sums(ctx.stream(), kc, a, nz, y, k0, count, out);
  }
  download(ctx, out, norms.data(), count * nz);
  return norms;
}

template <typename T>
double sum_squares(Context& ctx, const T* x, index_t n) {
  if (n <= 0) return 0.0;
  Layout layout;
  const size_t partials_at = layout.add<double>(kernels::kSumPartials);
  const size_t out_at = layout.add<double>(1);
  void* base = ctx.workspace(Context::kResults, layout.bytes());
  double* out = Layout::at<double>(base, out_at);
  kernels::sum_squares(ctx.stream(), x, n, Layout::at<double>(base, partials_at), out);
  double host = 0.0;
  DCALIGN_CUDA(cudaMemcpyAsync(&host, out, sizeof(double), cudaMemcpyDeviceToHost, ctx.stream()));
  ctx.sync();
  return host;
}

template <typename T>
std::vector<double> inner_products(Context& ctx, StackView<const T> X, StackView<const T> Y) {
  const index_t count = X.count();
  if (Y.count() != count || Y.rows() != X.rows() || Y.cols() != X.cols())
    throw InvalidInput("inner_products: shapes do not match (internal error)");
  std::vector<double> out(static_cast<size_t>(count), 0.0);
  if (count == 0) return out;
  to_int(X.rows() * X.cols(), "matrix size");
  to_int(count, "batch count");  // one block per matrix
  auto* d = static_cast<double*>(ctx.workspace(Context::kResults, sizeof(double) * count));
  kernels::inner_products(ctx.stream(), count, X.rows(), X.cols(), X.data(), X.ld(), X.stride(),
                          Y.data(), Y.ld(), Y.stride(), d);
  download(ctx, static_cast<const double*>(d), out.data(), count);
  return out;
}

#define DCALIGN_INSTANTIATE_BLAS_OPS(T)                                                           \
  template Buffer<T> allocate<T>(Context&, index_t);                                              \
  template void to_device<T>(Context&, const T*, T*, index_t);                                    \
  template void to_host<T>(Context&, const T*, T*, index_t);                                      \
  template void copy<T>(Context&, const T*, T*, index_t);                                         \
  template void fill<T>(Context&, T*, index_t, T);                                                \
  template void gemm<T>(Context&, Op, Op, T, MatrixView<const T>, MatrixView<const T>, T,         \
                        MatrixView<T>);                                                           \
  template void gemm_batched<T>(Context&, Op, Op, T, StackView<const T>, StackView<const T>, T,   \
                                StackView<T>);                                                    \
  template void trsm_upper_batched<T>(Context&, StackView<const T>, StackView<T>);                \
  template void vstack<T>(Context&, StackView<const T>, MatrixView<T>);                           \
  template void unvstack<T>(Context&, MatrixView<const T>, StackView<T>);                         \
  template void gather<T>(Context&, const T*, index_t, index_t, index_t, StackView<T>);           \
  template void syrk<T>(Context&, Op, T, MatrixView<const T>, T, MatrixView<T>);                  \
  template void geam<T>(Context&, T, MatrixView<const T>, T, MatrixView<const T>, MatrixView<T>); \
  template bool all_finite<T>(Context&, const T*, index_t);                                       \
  template std::vector<index_t> first_nonfinite_batched<T>(Context&, StackView<const T>);         \
  template std::vector<T> orthogonality_errors<T>(Context&, StackView<const T>);                  \
  template std::vector<T> residuals<T>(Context&, StackView<const T>, StackView<const T>,          \
                                       MatrixView<const T>);                                      \
  template std::vector<T> product_column_norms<T>(Context&, StackView<const T>,                   \
                                                  StackView<const T>);                            \
  template double sum_squares<T>(Context&, const T*, index_t);                                    \
  template std::vector<double> inner_products<T>(Context&, StackView<const T>, StackView<const T>);
DCALIGN_INSTANTIATE_BLAS_OPS(float)
DCALIGN_INSTANTIATE_BLAS_OPS(double)

}  // namespace dcalign::cuda::ops
