// cuBLAS and cuSOLVER, loaded on first use.
//
// Linking libcublas and libcusolver makes the dynamic loader map them with cuBLASLt, cuSPARSE
// and nvJitLink (about 1 GB of files) and run their initialisers at every start of every
// program that links dcalign: some 70 ms before main(), paid by `dcalign align --help` and by
// every program that only uses the CPU backend. The CUDA backend calls them through the
// definitions below instead. Each has the exact prototype of the NVIDIA header (the compiler
// rejects a mismatch), opens the library with dlopen on its first call and forwards to the real
// function. The CUDA runtime, which is small, stays linked.
//
// A cuBLAS or cuSOLVER function the backend starts to use is added to the table below; until it
// is, linking fails with an undefined reference to it.
#include "cuda/lazy_libraries.hpp"

#include <cublas_v2.h>
#include <cusolverDn.h>
#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dcalign/error.hpp"

// Set by src/cuda/CMakeLists.txt from the libraries found at configure time.
#if !defined(DCALIGN_CUBLAS_SONAME) || !defined(DCALIGN_CUSOLVER_SONAME) || \
    !defined(DCALIGN_CUDA_LIBRARY_DIR)
#error "DCALIGN_CUBLAS_SONAME, DCALIGN_CUSOLVER_SONAME and DCALIGN_CUDA_LIBRARY_DIR must be set"
#endif

// X(library, return type, symbol, (parameters), (arguments)): every cuBLAS and cuSOLVER
// function the backend calls, under the symbol the header maps its name to (cublasCreate ->
// cublasCreate_v2).
// clang-format off
#define DCALIGN_CUDA_LAZY_FUNCTIONS(X)                                                            \
  X(cublas, cublasStatus_t, cublasCreate_v2, (cublasHandle_t* handle), (handle))                  \
  X(cublas, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))                  \
  X(cublas, cublasStatus_t, cublasDgeam, (cublasHandle_t handle, cublasOperation_t transa,        \
      cublasOperation_t transb, int m, int n, const double* alpha, const double* A, int lda,      \
      const double* beta, const double* B, int ldb, double* C, int ldc), (handle, transa, transb, \
      m, n, alpha, A, lda, beta, B, ldb, C, ldc))                                                 \
  X(cublas, cublasStatus_t, cublasDgemmStridedBatched, (cublasHandle_t handle,                    \
      cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,                    \
      const double* alpha, const double* A, int lda, long long int strideA, const double* B,      \
      int ldb, long long int strideB, const double* beta, double* C, int ldc,                     \
      long long int strideC, int batchCount), (handle, transa, transb, m, n, k, alpha, A, lda,    \
      strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount))                               \
  X(cublas, cublasStatus_t, cublasDgemm_v2, (cublasHandle_t handle, cublasOperation_t transa,     \
      cublasOperation_t transb, int m, int n, int k, const double* alpha, const double* A,        \
      int lda, const double* B, int ldb, const double* beta, double* C, int ldc), (handle,        \
      transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))                              \
  X(cublas, cublasStatus_t, cublasDgetrfBatched, (cublasHandle_t handle, int n,                   \
      double* const A[], int lda, int* P, int* info, int batchSize), (handle, n, A, lda, P, info, \
      batchSize))                                                                                 \
  X(cublas, cublasStatus_t, cublasDgetriBatched, (cublasHandle_t handle, int n,                   \
      const double* const A[], int lda, const int* P, double* const C[], int ldc, int* info,      \
      int batchSize), (handle, n, A, lda, P, C, ldc, info, batchSize))                            \
  X(cublas, cublasStatus_t, cublasDmatinvBatched, (cublasHandle_t handle, int n,                  \
      const double* const A[], int lda, double* const Ainv[], int lda_inv, int* info,             \
      int batchSize), (handle, n, A, lda, Ainv, lda_inv, info, batchSize))                        \
  X(cublas, cublasStatus_t, cublasDtrsmBatched, (cublasHandle_t handle, cublasSideMode_t side,    \
      cublasFillMode_t uplo, cublasOperation_t trans, cublasDiagType_t diag, int m, int n,        \
      const double* alpha, const double* const A[], int lda, double* const B[], int ldb,          \
      int batchCount), (handle, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb,             \
      batchCount))                                                                                \
  X(cublas, const char*, cublasGetStatusString, (cublasStatus_t status), (status))                \
  X(cublas, cublasStatus_t, cublasGetVersion_v2, (cublasHandle_t handle, int* version), (handle,  \
      version))                                                                                   \
  X(cublas, cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode),        \
      (handle, mode))                                                                             \
  X(cublas, cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t streamId),   \
      (handle, streamId))                                                                         \
  X(cublas, cublasStatus_t, cublasSgeam, (cublasHandle_t handle, cublasOperation_t transa,        \
      cublasOperation_t transb, int m, int n, const float* alpha, const float* A, int lda,        \
      const float* beta, const float* B, int ldb, float* C, int ldc), (handle, transa, transb, m, \
      n, alpha, A, lda, beta, B, ldb, C, ldc))                                                    \
  X(cublas, cublasStatus_t, cublasSgemmStridedBatched, (cublasHandle_t handle,                    \
      cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,                    \
      const float* alpha, const float* A, int lda, long long int strideA, const float* B,         \
      int ldb, long long int strideB, const float* beta, float* C, int ldc,                       \
      long long int strideC, int batchCount), (handle, transa, transb, m, n, k, alpha, A, lda,    \
      strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount))                               \
  X(cublas, cublasStatus_t, cublasSgemm_v2, (cublasHandle_t handle, cublasOperation_t transa,     \
      cublasOperation_t transb, int m, int n, int k, const float* alpha, const float* A, int lda, \
      const float* B, int ldb, const float* beta, float* C, int ldc), (handle, transa, transb, m, \
      n, k, alpha, A, lda, B, ldb, beta, C, ldc))                                                 \
  X(cublas, cublasStatus_t, cublasSgetrfBatched, (cublasHandle_t handle, int n, float* const A[], \
      int lda, int* P, int* info, int batchSize), (handle, n, A, lda, P, info, batchSize))        \
  X(cublas, cublasStatus_t, cublasSgetriBatched, (cublasHandle_t handle, int n,                   \
      const float* const A[], int lda, const int* P, float* const C[], int ldc, int* info,        \
      int batchSize), (handle, n, A, lda, P, C, ldc, info, batchSize))                            \
  X(cublas, cublasStatus_t, cublasSmatinvBatched, (cublasHandle_t handle, int n,                  \
      const float* const A[], int lda, float* const Ainv[], int lda_inv, int* info,               \
      int batchSize), (handle, n, A, lda, Ainv, lda_inv, info, batchSize))                        \
  X(cublas, cublasStatus_t, cublasStrsmBatched, (cublasHandle_t handle, cublasSideMode_t side,    \
      cublasFillMode_t uplo, cublasOperation_t trans, cublasDiagType_t diag, int m, int n,        \
      const float* alpha, const float* const A[], int lda, float* const B[], int ldb,             \
      int batchCount), (handle, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb,             \
      batchCount))                                                                                \
  X(cusolver, cusolverStatus_t, cusolverDnCreate, (cusolverDnHandle_t* handle), (handle))         \
  X(cusolver, cusolverStatus_t, cusolverDnCreateGesvdjInfo, (gesvdjInfo_t* info), (info))         \
  X(cusolver, cusolverStatus_t, cusolverDnDestroy, (cusolverDnHandle_t handle), (handle))         \
  X(cusolver, cusolverStatus_t, cusolverDnDestroyGesvdjInfo, (gesvdjInfo_t info), (info))         \
  X(cusolver, cusolverStatus_t, cusolverDnDgeqrf, (cusolverDnHandle_t handle, int m, int n,       \
      double* A, int lda, double* TAU, double* Workspace, int Lwork, int* devInfo), (handle, m,   \
      n, A, lda, TAU, Workspace, Lwork, devInfo))                                                 \
  X(cusolver, cusolverStatus_t, cusolverDnDgeqrf_bufferSize, (cusolverDnHandle_t handle, int m,   \
      int n, double* A, int lda, int* lwork), (handle, m, n, A, lda, lwork))                      \
  X(cusolver, cusolverStatus_t, cusolverDnDgesvd, (cusolverDnHandle_t handle, signed char jobu,   \
      signed char jobvt, int m, int n, double* A, int lda, double* S, double* U, int ldu,         \
      double* VT, int ldvt, double* work, int lwork, double* rwork, int* info), (handle, jobu,    \
      jobvt, m, n, A, lda, S, U, ldu, VT, ldvt, work, lwork, rwork, info))                        \
  X(cusolver, cusolverStatus_t, cusolverDnDgesvd_bufferSize, (cusolverDnHandle_t handle, int m,   \
      int n, int* lwork), (handle, m, n, lwork))                                                  \
  X(cusolver, cusolverStatus_t, cusolverDnDgesvdjBatched, (cusolverDnHandle_t handle,             \
      cusolverEigMode_t jobz, int m, int n, double* A, int lda, double* S, double* U, int ldu,    \
      double* V, int ldv, double* work, int lwork, int* info, gesvdjInfo_t params,                \
      int batchSize), (handle, jobz, m, n, A, lda, S, U, ldu, V, ldv, work, lwork, info, params,  \
      batchSize))                                                                                 \
  X(cusolver, cusolverStatus_t, cusolverDnDgesvdjBatched_bufferSize, (cusolverDnHandle_t handle,  \
      cusolverEigMode_t jobz, int m, int n, const double* A, int lda, const double* S,            \
      const double* U, int ldu, const double* V, int ldv, int* lwork, gesvdjInfo_t params,        \
      int batchSize), (handle, jobz, m, n, A, lda, S, U, ldu, V, ldv, lwork, params, batchSize))  \
  X(cusolver, cusolverStatus_t, cusolverDnDorgqr, (cusolverDnHandle_t handle, int m, int n,       \
      int k, double* A, int lda, const double* tau, double* work, int lwork, int* info), (handle, \
      m, n, k, A, lda, tau, work, lwork, info))                                                   \
  X(cusolver, cusolverStatus_t, cusolverDnDorgqr_bufferSize, (cusolverDnHandle_t handle, int m,   \
      int n, int k, const double* A, int lda, const double* tau, int* lwork), (handle, m, n, k,   \
      A, lda, tau, lwork))                                                                        \
  X(cusolver, cusolverStatus_t, cusolverDnDgetrf, (cusolverDnHandle_t handle, int m, int n,      \
      double* A, int lda, double* Workspace, int* devIpiv, int* devInfo), (handle, m, n, A, lda,  \
      Workspace, devIpiv, devInfo))                                                               \
  X(cusolver, cusolverStatus_t, cusolverDnDgetrf_bufferSize, (cusolverDnHandle_t handle, int m,   \
      int n, double* A, int lda, int* Lwork), (handle, m, n, A, lda, Lwork))                      \
  X(cusolver, cusolverStatus_t, cusolverDnDgetrs, (cusolverDnHandle_t handle,                     \
      cublasOperation_t trans, int n, int nrhs, const double* A, int lda, const int* devIpiv,     \
      double* B, int ldb, int* devInfo), (handle, trans, n, nrhs, A, lda, devIpiv, B, ldb,        \
      devInfo))                                                                                   \
  X(cusolver, cusolverStatus_t, cusolverDnSgetrf, (cusolverDnHandle_t handle, int m, int n,      \
      float* A, int lda, float* Workspace, int* devIpiv, int* devInfo), (handle, m, n, A, lda,    \
      Workspace, devIpiv, devInfo))                                                               \
  X(cusolver, cusolverStatus_t, cusolverDnSgetrf_bufferSize, (cusolverDnHandle_t handle, int m,   \
      int n, float* A, int lda, int* Lwork), (handle, m, n, A, lda, Lwork))                       \
  X(cusolver, cusolverStatus_t, cusolverDnSgetrs, (cusolverDnHandle_t handle,                     \
      cublasOperation_t trans, int n, int nrhs, const float* A, int lda, const int* devIpiv,      \
      float* B, int ldb, int* devInfo), (handle, trans, n, nrhs, A, lda, devIpiv, B, ldb,         \
      devInfo))                                                                                   \
  X(cusolver, cusolverStatus_t, cusolverDnDpotrfBatched, (cusolverDnHandle_t handle,             \
      cublasFillMode_t uplo, int n, double* Aarray[], int lda, int* infoArray, int batchSize),    \
      (handle, uplo, n, Aarray, lda, infoArray, batchSize))                                       \
  X(cusolver, cusolverStatus_t, cusolverDnDsyevdx, (cusolverDnHandle_t handle,                     \
      cusolverEigMode_t jobz, cusolverEigRange_t range, cublasFillMode_t uplo, int n, double* A,    \
      int lda, double vl, double vu, int il, int iu, int* meig, double* W, double* work, int lwork,          \
      int* info), (handle, jobz, range, uplo, n, A, lda, vl, vu, il, iu, meig, W, work, lwork,   \
      info))                                                                                      \
  X(cusolver, cusolverStatus_t, cusolverDnDsyevdx_bufferSize, (cusolverDnHandle_t handle,          \
      cusolverEigMode_t jobz, cusolverEigRange_t range, cublasFillMode_t uplo, int n,             \
      const double* A, int lda, double vl, double vu, int il, int iu, int* meig, const double* W,            \
      int* lwork), (handle, jobz, range, uplo, n, A, lda, vl, vu, il, iu, meig, W, lwork))        \
  X(cusolver, cusolverStatus_t, cusolverDnDsygvdx, (cusolverDnHandle_t handle,                    \
      cusolverEigType_t itype, cusolverEigMode_t jobz, cusolverEigRange_t range,                  \
      cublasFillMode_t uplo, int n, double* A, int lda, double* B, int ldb, double vl, double vu, \
      int il, int iu, int* meig, double* W, double* work, int lwork, int* info), (handle, itype,  \
      jobz, range, uplo, n, A, lda, B, ldb, vl, vu, il, iu, meig, W, work, lwork, info))          \
  X(cusolver, cusolverStatus_t, cusolverDnDsygvdx_bufferSize, (cusolverDnHandle_t handle,         \
      cusolverEigType_t itype, cusolverEigMode_t jobz, cusolverEigRange_t range,                  \
      cublasFillMode_t uplo, int n, const double* A, int lda, const double* B, int ldb,           \
      double vl, double vu, int il, int iu, int* meig, const double* W, int* lwork), (handle,     \
      itype, jobz, range, uplo, n, A, lda, B, ldb, vl, vu, il, iu, meig, W, lwork))               \
  X(cusolver, cusolverStatus_t, cusolverDnSetStream, (cusolverDnHandle_t handle,                  \
      cudaStream_t streamId), (handle, streamId))                                                 \
  X(cusolver, cusolverStatus_t, cusolverDnSgeqrf, (cusolverDnHandle_t handle, int m, int n,       \
      float* A, int lda, float* TAU, float* Workspace, int Lwork, int* devInfo), (handle, m, n,   \
      A, lda, TAU, Workspace, Lwork, devInfo))                                                    \
  X(cusolver, cusolverStatus_t, cusolverDnSgeqrf_bufferSize, (cusolverDnHandle_t handle, int m,   \
      int n, float* A, int lda, int* lwork), (handle, m, n, A, lda, lwork))                       \
  X(cusolver, cusolverStatus_t, cusolverDnSgesvd, (cusolverDnHandle_t handle, signed char jobu,   \
      signed char jobvt, int m, int n, float* A, int lda, float* S, float* U, int ldu, float* VT, \
      int ldvt, float* work, int lwork, float* rwork, int* info), (handle, jobu, jobvt, m, n, A,  \
      lda, S, U, ldu, VT, ldvt, work, lwork, rwork, info))                                        \
  X(cusolver, cusolverStatus_t, cusolverDnSgesvd_bufferSize, (cusolverDnHandle_t handle, int m,   \
      int n, int* lwork), (handle, m, n, lwork))                                                  \
  X(cusolver, cusolverStatus_t, cusolverDnSgesvdjBatched, (cusolverDnHandle_t handle,             \
      cusolverEigMode_t jobz, int m, int n, float* A, int lda, float* S, float* U, int ldu,       \
      float* V, int ldv, float* work, int lwork, int* info, gesvdjInfo_t params, int batchSize),  \
      (handle, jobz, m, n, A, lda, S, U, ldu, V, ldv, work, lwork, info, params, batchSize))      \
  X(cusolver, cusolverStatus_t, cusolverDnSgesvdjBatched_bufferSize, (cusolverDnHandle_t handle,  \
      cusolverEigMode_t jobz, int m, int n, const float* A, int lda, const float* S,              \
      const float* U, int ldu, const float* V, int ldv, int* lwork, gesvdjInfo_t params,          \
      int batchSize), (handle, jobz, m, n, A, lda, S, U, ldu, V, ldv, lwork, params, batchSize))  \
  X(cusolver, cusolverStatus_t, cusolverDnSorgqr, (cusolverDnHandle_t handle, int m, int n,       \
      int k, float* A, int lda, const float* tau, float* work, int lwork, int* info), (handle, m, \
      n, k, A, lda, tau, work, lwork, info))                                                      \
  X(cusolver, cusolverStatus_t, cusolverDnSorgqr_bufferSize, (cusolverDnHandle_t handle, int m,   \
      int n, int k, const float* A, int lda, const float* tau, int* lwork), (handle, m, n, k, A,  \
      lda, tau, lwork))                                                                           \
  X(cusolver, cusolverStatus_t, cusolverDnSpotrfBatched, (cusolverDnHandle_t handle,             \
      cublasFillMode_t uplo, int n, float* Aarray[], int lda, int* infoArray, int batchSize),     \
      (handle, uplo, n, Aarray, lda, infoArray, batchSize))                                       \
  X(cusolver, cusolverStatus_t, cusolverDnSsyevdx, (cusolverDnHandle_t handle,                     \
      cusolverEigMode_t jobz, cusolverEigRange_t range, cublasFillMode_t uplo, int n, float* A,    \
      int lda, float vl, float vu, int il, int iu, int* meig, float* W, float* work, int lwork,          \
      int* info), (handle, jobz, range, uplo, n, A, lda, vl, vu, il, iu, meig, W, work, lwork,   \
      info))                                                                                      \
  X(cusolver, cusolverStatus_t, cusolverDnSsyevdx_bufferSize, (cusolverDnHandle_t handle,          \
      cusolverEigMode_t jobz, cusolverEigRange_t range, cublasFillMode_t uplo, int n,             \
      const float* A, int lda, float vl, float vu, int il, int iu, int* meig, const float* W,            \
      int* lwork), (handle, jobz, range, uplo, n, A, lda, vl, vu, il, iu, meig, W, lwork))        \
  X(cusolver, cusolverStatus_t, cusolverDnSsygvdx, (cusolverDnHandle_t handle,                    \
      cusolverEigType_t itype, cusolverEigMode_t jobz, cusolverEigRange_t range,                  \
      cublasFillMode_t uplo, int n, float* A, int lda, float* B, int ldb, float vl, float vu,     \
      int il, int iu, int* meig, float* W, float* work, int lwork, int* info), (handle, itype,    \
      jobz, range, uplo, n, A, lda, B, ldb, vl, vu, il, iu, meig, W, work, lwork, info))          \
  X(cusolver, cusolverStatus_t, cusolverDnSsygvdx_bufferSize, (cusolverDnHandle_t handle,         \
      cusolverEigType_t itype, cusolverEigMode_t jobz, cusolverEigRange_t range,                  \
      cublasFillMode_t uplo, int n, const float* A, int lda, const float* B, int ldb, float vl,   \
      float vu, int il, int iu, int* meig, const float* W, int* lwork), (handle, itype, jobz,     \
      range, uplo, n, A, lda, B, ldb, vl, vu, il, iu, meig, W, lwork))                            \
  X(cusolver, cusolverStatus_t, cusolverGetProperty, (libraryPropertyType type, int* value),      \
      (type, value))
// clang-format on

namespace dcalign::cuda::lazy {
namespace {

// The site-packages directory of the Python module holding this code
// (<site-packages>/dcalign/_core.*.so), or empty when it is not one: the parent of the
// directory of the object dladdr names.
std::string module_site_packages() {
  Dl_info info{};
  static const int anchor = 0;
  if (::dladdr(&anchor, &info) == 0 || info.dli_fname == nullptr) return {};
  const std::filesystem::path dir = std::filesystem::path(info.dli_fname).parent_path();
  if (dir.filename() != "dcalign") return {};
  return dir.parent_path().string();
}

// By soname (the usual search: LD_LIBRARY_PATH, the program's run path, the loader cache), then
// in NVIDIA's wheels beside the Python module, then in the directory the library was found in
// at build time.
void* open_library(const char* soname) {
  if (void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string why = ::dlerror();
  std::string tried;
  for (const auto& dir : library_fallback_dirs()) {
    const std::string path = dir + "/" + soname;
    if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    tried += ", " + path;
  }
  throw BackendError(std::string("the CUDA backend cannot load ") + soname + ": " + why +
                     " (also tried" + tried.substr(1) +
                     "); install the CUDA toolkit's libraries, or NVIDIA's wheels with "
                     "`pip install dcalign[cuda13]`");
}

}  // namespace

constexpr const char* cublas_soname = DCALIGN_CUBLAS_SONAME;
constexpr const char* cusolver_soname = DCALIGN_CUSOLVER_SONAME;
// Opened once; a failed attempt throws and is retried by the next call.
void* cublas_handle() {
  static void* const handle = open_library(cublas_soname);
  return handle;
}
void* cusolver_handle() {
  static void* const handle = open_library(cusolver_soname);
  return handle;
}

void* lookup(void* library, const char* soname, const char* name) {
  if (void* fn = ::dlsym(library, name)) return fn;
  throw BackendError(std::string(soname) + " has no function " + name +
                     " (older than the CUDA toolkit dcalign was built with?)");
}

}  // namespace dcalign::cuda::lazy

// Hidden: in a shared libdcalign they serve dcalign alone.
#define DCALIGN_LAZY_DEFINE(library, ret, name, params, args)                   \
  extern "C" __attribute__((visibility("hidden"))) ret name params {            \
    namespace lazy = ::dcalign::cuda::lazy;                                     \
    static const auto fn = reinterpret_cast<decltype(&name)>(                   \
        lazy::lookup(lazy::library##_handle(), lazy::library##_soname, #name)); \
    return fn args;                                                             \
  }
DCALIGN_CUDA_LAZY_FUNCTIONS(DCALIGN_LAZY_DEFINE)
#undef DCALIGN_LAZY_DEFINE

namespace dcalign::cuda {

std::vector<std::string> wheel_library_dirs(const std::string& site_packages) {
  return {site_packages + "/nvidia/cu13/lib", site_packages + "/nvidia/cublas/lib",
          site_packages + "/nvidia/cusolver/lib"};
}

std::vector<std::string> library_fallback_dirs() {
  std::vector<std::string> dirs;
  const std::string site = lazy::module_site_packages();
  if (!site.empty()) dirs = wheel_library_dirs(site);
  dirs.push_back(DCALIGN_CUDA_LIBRARY_DIR);
  return dirs;
}

std::string toolkit_library_dir() { return DCALIGN_CUDA_LIBRARY_DIR; }

std::string check_lazy_libraries_in(const std::string& site_packages,
                                    std::vector<std::string>* opened) {
  std::string problems;
  const auto open_from_wheels = [&](const char* soname) -> void* {
    for (const auto& dir : wheel_library_dirs(site_packages)) {
      const std::string path = dir + "/" + soname;
      if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        link_map* map = nullptr;
        if (opened && ::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map)
          opened->push_back(map->l_name);
        return handle;
      }
    }
    problems +=
        std::string(soname) + " is in none of the wheel directories below " + site_packages + "\n";
    return nullptr;
  };
  void* const cublas = open_from_wheels(lazy::cublas_soname);
  void* const cusolver = open_from_wheels(lazy::cusolver_soname);
  struct Entry {
    void* library;
    const char* soname;
    const char* name;
  };
#define DCALIGN_LAZY_ENTRY(library, ret, name, params, args) \
  {library, lazy::library##_soname, #name},
  const Entry entries[] = {DCALIGN_CUDA_LAZY_FUNCTIONS(DCALIGN_LAZY_ENTRY)};
#undef DCALIGN_LAZY_ENTRY
  for (const auto& e : entries)
    if (e.library && !::dlsym(e.library, e.name))
      problems +=
          std::string(e.soname) + " below " + site_packages + " has no function " + e.name + "\n";
  return problems;
}

std::string check_lazy_libraries() {
  struct Entry {
    void* (*library)();
    const char* soname;
    const char* name;
  };
#define DCALIGN_LAZY_ENTRY(library, ret, name, params, args) \
  {lazy::library##_handle, lazy::library##_soname, #name},
  static const Entry entries[] = {DCALIGN_CUDA_LAZY_FUNCTIONS(DCALIGN_LAZY_ENTRY)};
#undef DCALIGN_LAZY_ENTRY
  std::string problems;
  for (const auto& e : entries) {
    try {
      lazy::lookup(e.library(), e.soname, e.name);
    } catch (const Error& err) {
      if (problems.find(err.what()) == std::string::npos)
        problems += std::string(err.what()) + "\n";
    }
  }
  if (!problems.empty()) return problems;
  // A call through the forwarding definitions reaches the library of the headers' version.
  int major = -1, minor = -1;
  if (cusolverGetProperty(MAJOR_VERSION, &major) != CUSOLVER_STATUS_SUCCESS ||
      cusolverGetProperty(MINOR_VERSION, &minor) != CUSOLVER_STATUS_SUCCESS ||
      major != CUSOLVER_VER_MAJOR || minor != CUSOLVER_VER_MINOR)
    problems += std::string(lazy::cusolver_soname) + " reports version " + std::to_string(major) +
                "." + std::to_string(minor) + ", the headers " +
                std::to_string(CUSOLVER_VER_MAJOR) + "." + std::to_string(CUSOLVER_VER_MINOR) +
                "\n";
  const char* text = cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE);
  if (text == nullptr || *text == '\0')
    problems += std::string(lazy::cublas_soname) + " gave no text for a status\n";
  return problems;
}

}  // namespace dcalign::cuda
