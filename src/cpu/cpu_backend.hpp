#pragma once
#include <memory>

#include "cpu/host_pool.hpp"
#include "dcalign/backend.hpp"

namespace dcalign::cpu {

template <typename T>
class CpuPrimitives final : public Primitives<T> {
 public:
  /// `pool` (not owned) provides allocate()'s memory.
  CpuPrimitives(int threads, HostPool* pool);
  Device device() const override { return Device::cpu; }
  int threads() const { return threads_; }

  Buffer<T> allocate(index_t n) override;
  void to_device(const T* host, T* dst, index_t n) override;
  void to_host(const T* src, T* host, index_t n) override;
  void copy(const T* src, T* dst, index_t n) override;
  void to_float64(MatrixView<const T> src, MatrixView<double> dst) override;
  void from_float64(MatrixView<const double> src, MatrixView<T> dst) override;
  void fill(T* dst, index_t n, T value) override;
  void synchronize() override {}

  void gemm(Op ta, Op tb, T alpha, MatrixView<const T> A, MatrixView<const T> B, T beta,
            MatrixView<T> C) override;
  void gemm_batched(Op ta, Op tb, T alpha, StackView<const T> A, StackView<const T> B, T beta,
                    StackView<T> C) override;
  void trsm_upper_batched(StackView<const T> R, StackView<T> B) override;
  void vstack(StackView<const T> in, MatrixView<T> out) override;
  void unvstack(MatrixView<const T> in, StackView<T> out) override;
  void gather(const T* src, index_t sc, index_t si, index_t sj, StackView<T> dst) override;
  void syrk(Op trans, T alpha, MatrixView<const T> A, T beta, MatrixView<T> C) override;
  void geam(T alpha, MatrixView<const T> A, T beta, MatrixView<const T> B,
            MatrixView<T> C) override;

  PolarInfo<T> polar_batched(StackView<const T> M, bool transposed, StackView<T> G) override;
  std::vector<T> qr_batched(StackView<T> A, StackView<T> R) override;
  void svd_topk(MatrixView<const T> W, index_t k, T* s, MatrixView<T> U, MatrixView<T> V) override;
  std::vector<T> lstsq_batched(StackView<const T> A, MatrixView<const T> Z,
                               StackView<T> G) override;
  void syev_largest(MatrixView<T> S, index_t k, T* evals, MatrixView<T> V) override;
  void sygv_smallest(MatrixView<T> S, MatrixView<T> B, index_t k, T* evals,
                     MatrixView<T> V) override;

  void polar_start(StackView<const T> M, bool transposed, StackView<T> X, T* state,
                   double stop_below) override;
  void inverse_batched(StackView<const T> X, StackView<T> Y, T* state) override;
  index_t polar_newton_step(StackView<T> X, StackView<const T> Y, T* state, int iteration,
                            double tolerance) override;
  index_t polar_newton_steps(StackView<T> X, StackView<T> Y, T* state, int max_steps,
                             double tolerance) override;
  void add_identity_batched(T alpha, StackView<T> C) override;

  bool all_finite(const T* x, index_t n) override;
  std::vector<index_t> first_nonfinite_batched(StackView<const T> x) override;
  std::vector<T> orthogonality_errors(StackView<const T> G) override;
  std::vector<T> residuals(StackView<const T> A, StackView<const T> G,
                           MatrixView<const T> Z) override;
  std::vector<T> product_column_norms(StackView<const T> A, StackView<const T> G) override;
  double sum_squares(const T* x, index_t n) override;
  std::vector<double> inner_products(StackView<const T> X, StackView<const T> Y) override;

 private:
  /// Threads for a parallel region doing about `work` flops (or entries touched): this
  /// backend's threads, or 1 where waking a team costs more than it saves or a region is
  /// already running. Chosen per call; the team (OpenMP's) is the only pool dcalign uses, with
  /// BLAS held to one thread inside it.
  int team(double work) const;

  int threads_;
  HostPool* pool_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& opts)
      : pool_(HostPool::open()), f32_(opts.threads, pool_.get()), f64_(opts.threads, pool_.get()) {
    f32_.set_float64(&f64_);
    f64_.set_float64(&f64_);
  }
  Device device() const override { return Device::cpu; }
  std::string description() const override;
  Primitives<float>& f32() override { return f32_; }
  Primitives<double>& f64() override { return f64_; }
  HostPool& pool() { return *pool_; }

 private:
  struct ClosePool {
    void operator()(HostPool* p) const { p->close(); }
  };
  std::unique_ptr<HostPool, ClosePool> pool_;  // first: the primitives go before it
  CpuPrimitives<float> f32_;
  CpuPrimitives<double> f64_;
};

}  // namespace dcalign::cpu
