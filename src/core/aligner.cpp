// Enrolment of later users against a fitted model, and its save and load (include/dcalign/
// aligner.hpp; the directory format is src/core/model_file.cpp). Written on Primitives<T> like the
// methods: ODC and GOPP enrol by the Procrustes step of their fit (one product W_new^T Z, one
// batched polar factor), Imakura-DC and Kawakami-DC by the backend's batched least squares.
#include "dcalign/aligner.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

#include "core/common.hpp"
#include "core/methods.hpp"
#include "core/model_file.hpp"
#include "dcalign/npy.hpp"
#include "dcalign/polar.hpp"

namespace dcalign {
namespace {

using namespace model_file;

template <typename T>
const char* precision_name() {
  return std::is_same_v<T, float> ? "float32" : "float64";
}

// ODC, GOPP and OPP have orthogonal G_i and enrol by the Procrustes step; the others (RDP
// against its target, the mean of the A_i G_i) by least squares.
bool procrustes(Method m) { return core::method_info(m).enrolment == core::Enrolment::procrustes; }

std::string shape_string(index_t r, index_t c) {
  return std::to_string(r) + " x " + std::to_string(c);
}

/// Backend memory for host arrays: on the CPU the host pointers themselves, elsewhere explicit
/// copies in (in) and out (out, copied back by finish).
template <typename T>
class Staging {
 public:
  explicit Staging(Primitives<T>& p) : p_(p), host_(p.device() == Device::cpu) {}
  bool host() const { return host_; }
  const T* in(const T* host, index_t n) {
    if (host_) return host;
    bufs_.push_back(p_.allocate(n));
    p_.to_device(host, bufs_.back().data(), n);
    return bufs_.back().data();
  }
  T* out(T* host, index_t n) {
    if (host_) return host;
    bufs_.push_back(p_.allocate(n));
    outs_.push_back({bufs_.back().data(), host, n});
    return bufs_.back().data();
  }
  void finish() {
    for (const auto& o : outs_) p_.to_host(o.dev, o.host, o.n);
    p_.synchronize();
  }

 private:
  struct Out {
    T* dev;
    T* host;
    index_t n;
  };
  Primitives<T>& p_;
  bool host_;
  std::vector<Buffer<T>> bufs_;
  std::vector<Out> outs_;
};

/// Zbar = (1/c) W [G_1; ...; G_c], Kawakami-DC's kept target.
template <typename T>
Matrix<T> mean_aligned(Primitives<T>& p, const Stack<T>& A, const Stack<T>& G) {
  const index_t c = A.count(), a = A.rows(), l = A.cols();
  Matrix<T> Z(a, l);
  Staging<T> st(p);
  const StackView<const T> dA(st.in(A.data(), A.size()), c, a, l);
  const StackView<const T> dG(st.in(G.data(), G.size()), c, l, l);
  const MatrixView<T> dZ(st.out(Z.data(), a * l), a, l);
  Buffer<T> gv = p.allocate(c * l * l);
  p.vstack(dG, MatrixView<T>(gv.data(), c * l, l));
  p.gemm(Op::none, Op::none, T(1) / T(c), dA.concatenated(),
         MatrixView<const T>(gv.data(), c * l, l), T(0), dZ);
  st.finish();
  return Z;
}

// ---- enrolment

template <typename T>
BatchEnrolment<T> enroll_impl(const Aligner<T>& model, StackView<const T> A_new, Backend& backend,
                              bool single) {
  const index_t k = A_new.count(), a = model.anchor_rows(), l = model.dim();
  const Method method = model.method();
  const auto who = [single](index_t u) {
    return single ? std::string("A_new")
                  : "new user " + std::to_string(u) + " (A_new[" + std::to_string(u) + "])";
  };
  if (k < 1)
    throw InvalidInput("enroll: no new users (the batch is empty); expected k >= 1 matrices of " +
                       shape_string(a, l));
  if (A_new.rows() != a || A_new.cols() != l)
    throw InvalidInput("enroll: " + std::string(single ? "A_new is " : "each A_new[k] is ") +
                       shape_string(A_new.rows(), A_new.cols()) + ", expected a x l = " +
                       shape_string(a, l) + ", the shape of the anchor representations the " +
                       to_string(method) + " model was fitted on");

  auto& p = backend.primitives<T>();
  BatchEnrolment<T> out;
  EnrolmentReport& r = out.report;
  r.method = to_string(method);
  r.device = to_string(p.device());
  r.precision = precision_name<T>();
  r.users = k;
  r.anchor_rows = a;
  r.dim = l;
  r.fitted_users = model.users();
  auto t0 = std::chrono::steady_clock::now();
  const auto lap = [&](const char* phase) {
    p.synchronize();
    const auto t = std::chrono::steady_clock::now();
    r.add_phase(phase, std::chrono::duration<double>(t - t0).count());
    t0 = t;
  };

  out.G = Stack<T>(k, l, l);
  Staging<T> st(p);
  const StackView<const T> A(st.in(A_new.data(), A_new.size()), k, a, l);
  const MatrixView<const T> Z(st.in(model.target().data(), a * l), a, l);
  const StackView<T> G(st.out(out.G.data(), out.G.size()), k, l, l);
  if (!st.host()) lap("upload");

  // One O(a l) scan: cheap next to the O(a l^2) enrolment, and LAPACK's behaviour on NaN is
  // unspecified for the least-squares path.
  const auto bad = p.first_nonfinite_batched(A);
  for (index_t u = 0; u < k; ++u)
    if (bad[u] >= 0)
      throw InvalidInput("enroll: " + who(u) + " has a non-finite value (NaN or Inf) at row " +
                         std::to_string(bad[u] % a) + ", column " + std::to_string(bad[u] / a) +
                         "; every entry must be finite");
  lap("validate");

  std::vector<T> ratio(static_cast<size_t>(k));
  const double tol = model.rank_tolerance();
  std::string factorised;
  if (procrustes(method)) {
    // As in the fit (core::procrustes_step): W_new^T Z, whose row blocks are the M_k = A_k^T Z,
    // then one batched polar factor with the fit's polar method and rank fallback.
    Buffer<T> m = p.allocate(k * l * l);
    p.gemm(Op::trans, Op::none, T(1), A.concatenated(), Z, T(0), MatrixView<T>(m.data(), k * l, l));
    // Finite entries (checked above) whose products, or their squares, overflow: the norms
    // ||M_u||_F^2 (double sums) say which user, O(k l^2).
    const StackView<const T> Ms(m.data(), k, l, l, k * l, l);
    if (const index_t u = core::first_overflowing(p, Ms); u < k) {
      throw NumericalError("enroll: " + who(u) +
                           ": A_new^T Z overflowed to Inf although every entry is finite; "
                           "rescale A_new by one power of two (its G_new does not change)");
    }
    PolarOptions po;
    po.method = model.options().polar;
    po.fallback_ratio = tol;
    po.measure_orthogonality = false;  // measured below for the report
    const PolarInfo<T> info = polar_factor(p, Ms, false, G, po);
    for (index_t u = 0; u < k; ++u)
      ratio[u] = info.sigma_max[u] > 0 ? info.sigma_min[u] / info.sigma_max[u] : T(0);
    factorised = "A_new^T Z";
    lap("procrustes");
  } else {
    ratio = core::least_squares(p, A, Z, G, tol);
    factorised = "A_new";
    lap("least_squares");
  }
  for (index_t u = 0; u < k; ++u)
    if (!(static_cast<double>(ratio[u]) > tol)) {
      std::ostringstream os;
      os << "enroll: " << (single ? "" : "new user " + std::to_string(u) + ": ") << factorised
         << " is numerically rank deficient (sigma_min/sigma_max = "
         << static_cast<double>(ratio[u]) << ", tolerance " << tol
         << "); A_new must have full column rank l = " << l
         << (procrustes(method) ? " and A_new^T Z must be nonsingular" : "");
      throw InvalidInput(os.str());
    }
  if (!p.all_finite(G.data(), G.size()))
    throw NumericalError(
        "enroll: the computed G_new contain NaN or Inf although A_new passed "
        "validation (overflow? rescale the anchors)");

  const auto res = p.residuals(A, StackView<const T>(G), Z);
  const auto orth = p.orthogonality_errors(StackView<const T>(G));
  const double zz = p.sum_squares(Z.data(), a * l);
  for (index_t u = 0; u < k; ++u) {
    r.residual.push_back(static_cast<double>(res[u]));
    r.relative_residual.push_back(zz > 0 ? std::sqrt(static_cast<double>(res[u]) / zz) : 0.0);
    r.orthogonality_error.push_back(static_cast<double>(orth[u]));
    r.rank_ratio.push_back(static_cast<double>(ratio[u]));
  }
  lap("evaluate");
  st.finish();
  if (!st.host()) lap("download");
  return out;
}

}  // namespace

// ---- EnrolmentReport

void EnrolmentReport::add_phase(const std::string& name, double s) {
  seconds.emplace_back(name, s);
  total_seconds += s;
}

std::string EnrolmentReport::to_json(int indent) const {
  Json j;
  j["method"] = method;
  j["device"] = device;
  j["precision"] = precision;
  j["users"] = users;
  j["anchor_rows"] = anchor_rows;
  j["dim"] = dim;
  j["fitted_users"] = fitted_users;
  j["residual"] = residual;
  j["relative_residual"] = relative_residual;
  j["orthogonality_error"] = orthogonality_error;
  j["rank_ratio"] = rank_ratio;
  Json s = Json::object();
  for (const auto& [name, sec] : seconds) s[name] = sec;
  s["total"] = total_seconds;
  j["seconds"] = s;
  return j.dump(indent);
}

// ---- Aligner

template <typename T>
void Aligner<T>::require_fitted(const char* what) const {
  if (!fitted())
    throw InvalidInput(std::string("Aligner::") + what +
                       ": the aligner is not fitted; call fit() or load() first");
}

template <typename T>
Alignment<T> Aligner<T>::fit(const Stack<T>& anchors, const AlignOptions& opts, Backend& backend) {
  Alignment<T> res = align(anchors, opts, backend);
  // A method without a target (Kawakami-DC) enrols against the mean of the aligned anchors.
  Matrix<T> Z = !core::method_info(opts.method).has_target
                    ? mean_aligned(backend.primitives<T>(), anchors, res.G)
                    : res.target;
  // Commit only once everything succeeded: a failed fit leaves the aligner as it was.
  opts_ = opts;
  rank_tolerance_ = opts.rank_tolerance >= 0
                        ? opts.rank_tolerance
                        : static_cast<double>(anchors.cols()) * std::numeric_limits<T>::epsilon();
  opts_.rank_tolerance = rank_tolerance_;
  target_ = std::move(Z);
  users_ = anchors.count();
  explicit_target_ = opts.method == Method::odc && opts.target.size() > 0;
  iterations_ = res.report.iterations;
  converged_ = res.report.converged;
  return res;
}

template <typename T>
Alignment<T> Aligner<T>::fit(const Stack<T>& anchors, const AlignOptions& opts) {
  auto backend = make_backend(Device::cpu);
  return fit(anchors, opts, *backend);
}

template <typename T>
BatchEnrolment<T> Aligner<T>::enroll(const Stack<T>& A_new, Backend& backend) const {
  require_fitted("enroll");
  return enroll_impl(*this, A_new.view(), backend, false);
}

template <typename T>
BatchEnrolment<T> Aligner<T>::enroll(const Stack<T>& A_new) const {
  auto backend = make_backend(Device::cpu);
  return enroll(A_new, *backend);
}

template <typename T>
Enrolment<T> Aligner<T>::enroll(const Matrix<T>& A_new, Backend& backend) const {
  require_fitted("enroll");
  // The matrix seen as a stack of one: no copy of A_new.
  BatchEnrolment<T> b = enroll_impl(
      *this, StackView<const T>(A_new.data(), 1, A_new.rows(), A_new.cols()), backend, true);
  return {b.G.matrix(0), std::move(b.report)};
}

template <typename T>
Enrolment<T> Aligner<T>::enroll(const Matrix<T>& A_new) const {
  auto backend = make_backend(Device::cpu);
  return enroll(A_new, *backend);
}

template <typename T>
void Aligner<T>::save(const std::string& dir) const {
  require_fitted("save");
  Json j;
  j["format"] = kFormatName;
  j["format_version"] = kModelFormatVersion;
  j["dcalign_version"] = version_string();
  j["method"] = to_string(opts_.method);
  j["precision"] = precision_name<T>();
  j["anchor_rows"] = anchor_rows();
  j["dim"] = dim();
  j["users"] = users_;
  j["enrolment"] = procrustes(opts_.method) ? "procrustes" : "least_squares";
  j["rank_tolerance"] = rank_tolerance_;
  j["target"] = {{"file", kTargetFile}, {"shape", {anchor_rows(), dim()}}};
  j["options"] = options_json({opts_, explicit_target_, iterations_, converged_});
  save_directory(
      dir, kAlignerLayout, [](const Json&) { return std::vector<std::string>{kTargetFile}; },
      [&](const fs::path& tmp) {
        write_json(tmp / kJsonFile, j);
        write_npy<T>((tmp / kTargetFile).string(), target_.view());
      });
}

template <typename T>
Aligner<T> Aligner<T>::load(const std::string& dir) {
  const Parsed m = parse_model(dir);
  const std::string npy = (model_dir(dir) / m.target_file).string();
  if (m.info.precision != precision_name<T>())
    throw InvalidInput("model '" + dir + "' holds " + m.info.precision + " matrices; load it as " +
                       (m.info.precision == "float32" ? "Aligner<float>" : "Aligner<double>") +
                       ", not " +
                       (std::is_same_v<T, float> ? "Aligner<float>" : "Aligner<double>"));
  const NpyHeader h = read_npy_header(npy);
  const DType want = std::is_same_v<T, float> ? DType::float32 : DType::float64;
  std::string shape;
  for (index_t s : h.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(s);
  if (h.shape.size() != 2 || h.shape[0] != m.info.anchor_rows || h.shape[1] != m.info.dim)
    throw IoError("model file '" + npy + "' has shape (" + shape + ") but model.json says the " +
                  "target is (anchor_rows, dim) = (" + std::to_string(m.info.anchor_rows) + ", " +
                  std::to_string(m.info.dim) + ")");
  if (h.dtype != want)
    throw IoError("model file '" + npy + "' holds " +
                  (h.dtype == DType::float32 ? "float32" : "float64") +
                  " values but model.json says the precision is " + m.info.precision);
  Matrix<T> Z = read_npy_matrix<T>(npy);
  for (index_t jj = 0; jj < Z.cols(); ++jj)
    for (index_t i = 0; i < Z.rows(); ++i)
      if (!std::isfinite(Z(i, jj)))
        throw IoError("model file '" + npy + "' has a non-finite value at row " +
                      std::to_string(i) + ", column " + std::to_string(jj) + " (corrupt model)");
  Aligner out;
  out.opts_ = m.opts;
  out.target_ = std::move(Z);
  out.users_ = m.info.users;
  out.rank_tolerance_ = m.rank_tolerance;
  out.explicit_target_ = m.explicit_target;
  out.iterations_ = m.iterations;
  out.converged_ = m.converged;
  return out;
}

template class Aligner<float>;
template class Aligner<double>;

}  // namespace dcalign
