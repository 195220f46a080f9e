#include "cpu/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "dcalign/error.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DCALIGN_X86_CLONES 1
#define DCALIGN_TARGET_AVX2 __attribute__((target("avx2,fma")))
#if defined(__clang__)
#define DCALIGN_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma")))
#else
// GCC would otherwise keep to 256-bit vectors; the full width is 3% faster on the sums.
#define DCALIGN_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma,prefer-vector-width=512")))
#endif
#endif

namespace dcalign::cpu {
namespace {

Isa supported_isa() {
#ifdef DCALIGN_X86_CLONES
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
#endif
  return Isa::baseline;
}

Isa select_isa() {
  const Isa best = supported_isa();
  const char* env = std::getenv("DCALIGN_CPU_ISA");
  if (!env || !*env) return best;
  const std::string name(env);
  Isa want;
  if (name == "baseline")
    want = Isa::baseline;
  else if (name == "avx2")
    want = Isa::avx2;
  else if (name == "avx512")
    want = Isa::avx512;
  else
    throw BackendError("DCALIGN_CPU_ISA='" + name +
                       "' is not an instruction set of the CPU kernels (expected baseline, avx2 "
                       "or avx512)");
  if (static_cast<int>(want) > static_cast<int>(best))
    throw BackendError("DCALIGN_CPU_ISA=" + name +
                       " asks for an instruction set this CPU lacks "
                       "(it supports up to " +
                       to_string(best) + ")");
  return want;
}

// ---- dot products in double

// Independent partial sums, enough additions in flight to keep up with memory rather than wait
// on the adder: 64 lanes (eight AVX-512 or sixteen AVX2 registers of doubles), split between two
// halves of the range read side by side, so that two streams keep more memory requests in
// flight than one. Over 400 MB on two cores with AVX-512: 12.6-12.8 ms (32 lanes, one stream:
// 15 ms; 64 lanes, one stream: 12.5-13.4 ms, and 13.4-14.7 ms as the report's evaluation right
// after ODC's product); with AVX2 13.2 ms. SSE2 has 16 registers: 16 lanes in one stream (18 ms,
// 20 ms in two; the single accumulator before all this took 22 ms).
template <Isa isa>
constexpr int kDotLanes = isa == Isa::baseline ? 16 : 64;
template <Isa isa>
constexpr int kDotStreams = isa == Isa::baseline ? 1 : 2;

// y == nullptr: the sum of squares of x, loading each value once (x with itself as y loads it
// twice: 14.3 against 12.2 ms).
template <int kLanes, int kStreams, typename T>
inline __attribute__((always_inline)) double dot_body(const T* __restrict x, const T* __restrict y,
                                                      index_t n) {
  static_assert(kStreams == 1 || kStreams == 2, "one or two streams");
  constexpr int kStep = kLanes / kStreams;
  // Stream s reads [s * part, (s + 1) * part); the tail [kStreams * part, n) comes last.
  const index_t part = n / kLanes * kStep;
  double lane[kLanes] = {};
  double tail = 0;
  if (y) {
    for (index_t i = 0; i < part; i += kStep)
      for (int s = 0; s < kStreams; ++s)
        for (int j = 0; j < kStep; ++j)
          lane[s * kStep + j] += static_cast<double>(x[s * part + i + j]) * y[s * part + i + j];
    for (index_t i = kStreams * part; i < n; ++i) tail += static_cast<double>(x[i]) * y[i];
  } else {
    for (index_t i = 0; i < part; i += kStep)
      for (int s = 0; s < kStreams; ++s)
        for (int j = 0; j < kStep; ++j) {
          const double v = x[s * part + i + j];
          lane[s * kStep + j] += v * v;
        }
    for (index_t i = kStreams * part; i < n; ++i) tail += static_cast<double>(x[i]) * x[i];
  }
  for (int w = kLanes / 2; w > 0; w /= 2)  // pairwise, as the lanes would be added in SIMD
    for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
  return lane[0] + tail;
}

template <typename T>
double dot_baseline(const T* x, const T* y, index_t n) {
  return dot_body<kDotLanes<Isa::baseline>, kDotStreams<Isa::baseline>>(x, y, n);
}
#ifdef DCALIGN_X86_CLONES
template <typename T>
DCALIGN_TARGET_AVX2 double dot_avx2(const T* x, const T* y, index_t n) {
  return dot_body<kDotLanes<Isa::avx2>, kDotStreams<Isa::avx2>>(x, y, n);
}
template <typename T>
DCALIGN_TARGET_AVX512 double dot_avx512(const T* x, const T* y, index_t n) {
  return dot_body<kDotLanes<Isa::avx512>, kDotStreams<Isa::avx512>>(x, y, n);
}
#endif

// ---- Gauss-Jordan inverse
//
// Own code because OpenBLAS has no batched small-matrix inverse: for n <= kSmallInverse its
// getrf + getri pair spends most of its time in per-call overhead, while this loop keeps the
// matrix in L1/L2 and runs along contiguous columns.
//
// The pivots are taken KB at a time (KB = 4 from order 16, 1 below, where the extra scalar work
// per column costs more than it saves). Within a block the pivot columns are eliminated as in
// the textbook loop (the panel), saving each pivot's column c_p (zero in its own row, with the
// block's later row interchanges applied). Every other column j then gets the block's
// interchanges, the multipliers t_pj = (a_pj - sum_{q < p} c_q[p] t_qj) / pivot_p, the rank-KB
// update a_j -= sum_p c_p t_pj, and the pivot rows set to t_pj - sum_{q != p} c_q[p] t_qj,
// which is what the textbook loop leaves there. One pass per block instead of one per pivot
// loads and stores each entry once instead of KB times (30 -> 20 us at 50 x 50); the update
// runs four columns at a time, so that each c_p[i] loaded serves four columns (20.6 -> 17.2 us
// with AVX-512, 0.84 -> 0.42 us at 8 x 8).

template <typename T, int KB>
inline __attribute__((always_inline)) void gj_update(T* a, index_t n, const T* __restrict cols,
                                                     const T* __restrict mult, index_t j0,
                                                     index_t j1) {
  index_t j = j0;
  for (; j + 4 <= j1; j += 4) {
    T* __restrict a0 = a + j * n;
    T* __restrict a1 = a0 + n;
    T* __restrict a2 = a1 + n;
    T* __restrict a3 = a2 + n;
    T t0[KB], t1[KB], t2[KB], t3[KB];
    for (int p = 0; p < KB; ++p) {
      t0[p] = mult[j * 2 * KB + p];
      t1[p] = mult[(j + 1) * 2 * KB + p];
      t2[p] = mult[(j + 2) * 2 * KB + p];
      t3[p] = mult[(j + 3) * 2 * KB + p];
    }
    for (index_t i = 0; i < n; ++i) {
      T v0 = a0[i], v1 = a1[i], v2 = a2[i], v3 = a3[i];
      for (int p = 0; p < KB; ++p) {
        const T c = cols[p * n + i];
        v0 -= c * t0[p];
        v1 -= c * t1[p];
        v2 -= c * t2[p];
        v3 -= c * t3[p];
      }
      a0[i] = v0;
      a1[i] = v1;
      a2[i] = v2;
      a3[i] = v3;
    }
  }
  for (; j < j1; ++j) {
    T* __restrict aj = a + j * n;
    T t[KB];
    for (int p = 0; p < KB; ++p) t[p] = mult[j * 2 * KB + p];
    for (index_t i = 0; i < n; ++i) {
      T v = aj[i];
      for (int p = 0; p < KB; ++p) v -= cols[p * n + i] * t[p];
      aj[i] = v;
    }
  }
}

// `work`: KB x n pivot columns c_p, then per column j its multipliers t_0..t_{KB-1} and the
// values x_0..x_{KB-1} its pivot rows held before the update (2 KB entries).
template <typename T, int KB>
inline __attribute__((always_inline)) bool gj_body(T* a, index_t n, index_t* perm,
                                                   T* __restrict work) {
  T* __restrict cols = work;
  T* __restrict mult = work + KB * n;
  T inv[KB];
  for (index_t k0 = 0; k0 < n; k0 += KB) {
    const int kb = static_cast<int>(std::min<index_t>(KB, n - k0));
    for (int q = 0; q < kb; ++q) {  // the panel
      const index_t k = k0 + q;
      T* ak = a + k * n;
      index_t r = k;
      T best = std::abs(ak[k]);
      for (index_t i = k + 1; i < n; ++i)
        if (std::abs(ak[i]) > best) {
          best = std::abs(ak[i]);
          r = i;
        }
      if (!(best > T(0))) return false;
      perm[k] = r;
      if (r != k) {
        for (int j = 0; j < kb; ++j) std::swap(a[k + (k0 + j) * n], a[r + (k0 + j) * n]);
        for (int p = 0; p < q; ++p) std::swap(cols[p * n + k], cols[p * n + r]);
      }
      inv[q] = T(1) / ak[k];
      T* __restrict c = cols + q * n;
      for (index_t i = 0; i < n; ++i) c[i] = ak[i];
      c[k] = T(0);
      for (int j = 0; j < kb; ++j) {
        if (j == q) continue;
        T* __restrict aj = a + (k0 + j) * n;
        const T t = aj[k] * inv[q];
        for (index_t i = 0; i < n; ++i) aj[i] -= c[i] * t;
        aj[k] = t;
      }
      for (index_t i = 0; i < n; ++i) ak[i] = -c[i] * inv[q];
      ak[k] = inv[q];
    }
    for (int p = kb; p < KB; ++p)  // a short last block: its missing pivots contribute zero
      for (index_t i = 0; i < n; ++i) cols[p * n + i] = T(0);
    for (index_t j = 0; j < n; ++j) {  // the multipliers of every other column
      if (j == k0) {
        j += kb - 1;
        continue;
      }
      T* __restrict aj = a + j * n;
      T* __restrict m = mult + j * 2 * KB;
      for (int q = 0; q < kb; ++q)
        if (perm[k0 + q] != k0 + q) std::swap(aj[k0 + q], aj[perm[k0 + q]]);
      for (int q = 0; q < kb; ++q) {
        T v = aj[k0 + q];
        for (int p = 0; p < q; ++p) v -= cols[p * n + k0 + q] * m[p];
        m[KB + q] = v;
        m[q] = v * inv[q];
      }
      for (int q = kb; q < KB; ++q) m[q] = T(0);
    }
    gj_update<T, KB>(a, n, cols, mult, 0, k0);
    gj_update<T, KB>(a, n, cols, mult, k0 + kb, n);
    for (index_t j = 0; j < n; ++j) {  // the pivot rows
      if (j == k0) {
        j += kb - 1;
        continue;
      }
      T* aj = a + j * n;
      const T* m = mult + j * 2 * KB;
      for (int q = 0; q < kb; ++q) aj[k0 + q] += m[q] - m[KB + q];
    }
  }
  // Row interchanges of the input are column interchanges of its inverse, in reverse order.
  for (index_t k = n - 1; k >= 0; --k)
    if (perm[k] != k)
      for (index_t i = 0; i < n; ++i) std::swap(a[i + k * n], a[i + perm[k] * n]);
  return true;
}

constexpr index_t kBlockFrom = 16;
static_assert(gauss_jordan_workspace(1) >= 3 * 4, "workspace: KB x n columns + 2 KB per column");

template <typename T>
inline __attribute__((always_inline)) bool gj_dispatch(T* a, index_t n, index_t* perm, T* work) {
  return n >= kBlockFrom ? gj_body<T, 4>(a, n, perm, work) : gj_body<T, 1>(a, n, perm, work);
}

template <typename T>
bool gj_baseline(T* a, index_t n, index_t* perm, T* work) {
  return gj_dispatch(a, n, perm, work);
}
#ifdef DCALIGN_X86_CLONES
template <typename T>
DCALIGN_TARGET_AVX2 bool gj_avx2(T* a, index_t n, index_t* perm, T* work) {
  return gj_dispatch(a, n, perm, work);
}
template <typename T>
DCALIGN_TARGET_AVX512 bool gj_avx512(T* a, index_t n, index_t* perm, T* work) {
  return gj_dispatch(a, n, perm, work);
}
#endif

}  // namespace

Isa kernel_isa() {
  static const Isa isa = select_isa();
  return isa;
}

std::string to_string(Isa isa) {
  switch (isa) {
    case Isa::baseline:
      return "baseline";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "baseline";
}

template <typename T>
double dot(const T* x, const T* y, index_t n) {
  if (x == y) y = nullptr;  // dot_body's one-load form
#ifdef DCALIGN_X86_CLONES
  switch (kernel_isa()) {
    case Isa::avx512:
      return dot_avx512(x, y, n);
    case Isa::avx2:
      return dot_avx2(x, y, n);
    case Isa::baseline:
      break;
  }
#endif
  return dot_baseline(x, y, n);
}

template <typename T>
bool gauss_jordan_inverse(T* a, index_t n, index_t* perm, T* work) {
#ifdef DCALIGN_X86_CLONES
  switch (kernel_isa()) {
    case Isa::avx512:
      return gj_avx512(a, n, perm, work);
    case Isa::avx2:
      return gj_avx2(a, n, perm, work);
    case Isa::baseline:
      break;
  }
#endif
  return gj_baseline(a, n, perm, work);
}

template double dot<float>(const float*, const float*, index_t);
template double dot<double>(const double*, const double*, index_t);
template bool gauss_jordan_inverse<float>(float*, index_t, index_t*, float*);
template bool gauss_jordan_inverse<double>(double*, index_t, index_t*, double*);

}  // namespace dcalign::cpu
