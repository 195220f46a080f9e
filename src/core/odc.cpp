// ODC, paper 001 Algorithm 4: G_i = U_i V_i^T from the SVD of A_i^T A_r O (orthogonal
// Procrustes per user, eq. 70-71). All products A_i^T (A_r O) come from ONE matrix product
// (A_r O)^T [A_1 ... A_c], followed by one batched polar step. With an explicit target Z
// (paper 004, eqs. 17-20) the same step aligns every user to Z.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/common.hpp"
#include "dcalign/random.hpp"

namespace dcalign::core {

template <typename T>
void run_odc(Context<T>& ctx, MatrixView<T> target) {
  auto& p = ctx.p;
  const index_t a = ctx.rows(), l = ctx.dim();
  MatrixView<T> Z = target;  // align_resident always provides it for targeted methods
  if (ctx.opts.target.size() > 0) {
    const auto& given = ctx.opts.target;
    if (given.rows() != a || given.cols() != l)
      throw InvalidInput("explicit ODC target Z is " + std::to_string(given.rows()) + " x " +
                         std::to_string(given.cols()) + ", expected a x l = " + std::to_string(a) +
                         " x " + std::to_string(l));
    require_finite(given, "explicit ODC target Z");
    Buffer<T> up = upload(p, given);
    p.copy(up.data(), Z.data(), a * l);
  } else if (host_rotation_behind_products(ctx)) {
    // G's memory holds W^T A_r until the polar step writes G.
    ctx.products = p.allocate(ctx.users() * l * l);
    products_rotation_last(p, ctx.A, ctx.opts.reference_user, ctx.opts, ctx.G.data(), Z,
                           ctx.products.data());
    ctx.timer.lap("target");
    const PolarInfo<T> info = polar_of_products(ctx, ctx.products.data());
    ctx.values_checked = true;  // as procrustes_step: finite products prove finite anchors
    finish_procrustes(ctx, MatrixView<const T>(Z), info, "A_i^T A_r O (r the reference user)");
    return;
  } else {
    reference_target(ctx, Z);
  }
  ctx.timer.lap("target");
  procrustes_to_target(
      ctx, MatrixView<const T>(Z),
      ctx.opts.target.size() > 0 ? "A_i^T Z" : "A_i^T A_r O (r the reference user)");
}

template <typename T>
Buffer<T> haar_rotation_on_backend(Primitives<T>& p, std::uint64_t seed, index_t l) {
  if (p.float64() == nullptr)
    throw Error("the Haar draw of O on the backend needs its float64 primitives (internal error)");
  Primitives<double>& q = *p.float64();
  Rng rng = Rng::stream(seed, kHaarStream);
  const Matrix<double> gaussian = random_normal<double>(l, l, rng);
  const index_t ll = l * l;
  Buffer<double> qr = q.allocate(ll), r = q.allocate(ll), diagonal = q.allocate(l);
  q.to_device(gaussian.data(), qr.data(), ll);
  q.qr_batched(StackView<double>(qr.data(), 1, l, l), StackView<double>(r.data(), 1, l, l));
  // R's diagonal, r(j, j) = r[j (l + 1)], read back (l values, not the whole R).
  q.gather(r.data(), 0, l + 1, 0, StackView<double>(diagonal.data(), 1, l, 1));
  std::vector<double> d(static_cast<std::size_t>(l));
  q.to_host(diagonal.data(), d.data(), l);
  // The signs of R's diagonal into Q, as random_orthogonal does (Mezzadri 2007): only then is
  // the distribution exactly Haar. CholeskyQR2, the CUDA backend's first route, makes R's
  // diagonal positive already; LAPACK's and cuSOLVER's Householder QR need the flips.
  std::vector<double> sign(static_cast<std::size_t>(l));
  bool flips = false;
  for (index_t j = 0; j < l; ++j) {
    if (!std::isfinite(d[j]) || d[j] == 0)
      throw Error("the Haar draw of O: R(" + std::to_string(j) + ", " + std::to_string(j) +
                  ") = " + std::to_string(d[j]) + " in the QR of its Gaussian (internal error)");
    sign[j] = d[j] < 0 ? -1.0 : 1.0;
    flips = flips || d[j] < 0;
  }
  if (flips) {
    // Column j of Q times sign[j] into r, free once its diagonal is read: a batch of l products
    // of an l x 1 column and a 1 x 1 sign.
    Buffer<double> s = q.allocate(l);
    q.to_device(sign.data(), s.data(), l);
    q.gemm_batched(Op::none, Op::none, 1.0, StackView<const double>(qr.data(), l, l, 1),
                   StackView<const double>(s.data(), l, 1, 1), 0.0,
                   StackView<double>(r.data(), l, l, 1));
  }
  Buffer<T> o = p.allocate(ll);
  p.from_float64(MatrixView<const double>((flips ? r : qr).data(), l, l),
                 MatrixView<T>(o.data(), l, l));
  return o;
}

template <typename T>
void reference_target(Context<T>& ctx, MatrixView<T> Z) {
  auto& p = ctx.p;
  const index_t l = ctx.dim();
  // Every process draws O (cheap, l x l): a bad supplied O fails everywhere alike. A Haar O of
  // a large l is factorised where the anchors are (haar_on_backend_from, common.hpp).
  Buffer<T> o = ctx.opts.rotation == TargetRotation::haar && p.device() != Device::cpu &&
                        p.float64() != nullptr && l >= haar_on_backend_from
                    ? haar_rotation_on_backend(p, ctx.opts.seed, l)
                    : upload(p, target_rotation(ctx.opts, l));
  const int owner = ctx.team.owner(ctx.opts.reference_user);
  if (ctx.team.rank() == owner)
    p.gemm(Op::none, Op::none, T(1), ctx.A[ctx.opts.reference_user - ctx.team.first()],
           MatrixView<const T>(o.data(), l, l), T(0), Z);
  ctx.team.broadcast(Z.data(), Z.rows() * l, owner);
}

template <typename T>
void products_rotation_last(Primitives<T>& p, StackView<const T> A, index_t reference,
                            const AlignOptions& opts, T* scratch, MatrixView<T> Z, T* products) {
  const index_t c = A.count(), l = A.cols();
  const MatrixView<const T> Ar = A[reference];
  const MatrixView<T> first(scratch, c * l, l);
  // Queued first; the host then draws O (a Gaussian and a LAPACK QR) while the device works.
  p.gemm(Op::trans, Op::none, T(1), A.concatenated(), Ar, T(0), first);
  const Buffer<T> o = upload(p, target_rotation(opts, l));
  const MatrixView<const T> O(o.data(), l, l);
  p.gemm(Op::none, Op::none, T(1), Ar, O, T(0), Z);
  p.gemm(Op::none, Op::none, T(1), MatrixView<const T>(first), O, T(0),
         MatrixView<T>(products, c * l, l));
}

template <typename T>
bool host_rotation_behind_products(const Context<T>& ctx) {
  return ctx.opts.rotation == TargetRotation::haar && ctx.p.device() != Device::cpu &&
         ctx.team.solo() && ctx.dim() < haar_on_backend_from && ctx.G.contiguous();
}

template void run_odc<float>(Context<float>&, MatrixView<float>);
template void run_odc<double>(Context<double>&, MatrixView<double>);
template Buffer<float> haar_rotation_on_backend<float>(Primitives<float>&, std::uint64_t, index_t);
template Buffer<double> haar_rotation_on_backend<double>(Primitives<double>&, std::uint64_t,
                                                         index_t);
template void reference_target<float>(Context<float>&, MatrixView<float>);
template void reference_target<double>(Context<double>&, MatrixView<double>);
template void products_rotation_last<float>(Primitives<float>&, StackView<const float>, index_t,
                                            const AlignOptions&, float*, MatrixView<float>, float*);
template void products_rotation_last<double>(Primitives<double>&, StackView<const double>, index_t,
                                             const AlignOptions&, double*, MatrixView<double>,
                                             double*);
template bool host_rotation_behind_products<float>(const Context<float>&);
template bool host_rotation_behind_products<double>(const Context<double>&);

}  // namespace dcalign::core
