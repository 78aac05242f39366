// cuBLAS and cuBLASLt, loaded at their first use instead of at every program start.
//
// Linking libcublas.so pulls in libcublasLt.so, whose static initialisers cost about 0.4 s and
// 217 MB of resident memory before main() in every process, whether it touches a GPU or not:
// `lathe --version`, every CPU-only training run, every test process. So lathe links neither. This
// file defines each cuBLAS and cuBLASLt function lathe calls, with the header's signature, as a
// forwarder to the real one, which it finds with dlsym in its library (libcublas or libcublasLt),
// dlopen'd at the first call into it. Call sites stay plain cuBLAS; a function used for the first
// time needs its forwarder here (the link fails, naming it, until it has one).
//
// The CUDA emulator (cuda/emulator) implements these functions itself and does not compile this
// file. The forwarders have hidden visibility (cuda/CMakeLists.txt), so the libraries' own calls
// to their functions (libcublas calls into libcublasLt) never resolve to them.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "core/error.h"

namespace {

enum class Library { cublas, cublaslt };

std::string soname(Library library, const std::string& major) {
  return (library == Library::cublas ? "libcublas.so." : "libcublasLt.so.") + major;
}

// The cuBLAS major versions tried, the toolkit's that lathe was built with (LATHE_CUBLAS_MAJOR)
// first, then 13 and 12: a GPU machine may carry only the other one (a PyTorch wheel's
// nvidia/cublas, an older toolkit), and both keep the functions below by name. Both libraries come
// from one major, chosen at the first call into either; another major than the build's is said once.
const std::string& major() {
  static const std::string chosen = [] {
    std::string tried;
    for (const char* m : {LATHE_CUBLAS_MAJOR, "13", "12"}) {
      if (dlopen(soname(Library::cublaslt, m).c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) {
        if (std::string(m) != LATHE_CUBLAS_MAJOR)
          std::fprintf(stderr, "lathe: note: cuBLAS %s loaded; lathe was built with cuBLAS %s's headers\n", m,
                       LATHE_CUBLAS_MAJOR);
        return std::string(m);
      }
      const char* why = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(why ? why : soname(Library::cublaslt, m));
    }
    LATHE_FAIL("cuda: cannot load cuBLAS (", tried,
               "); the CUDA backend needs the toolkit's cuBLAS libraries on the loader's path "
               "(e.g. LD_LIBRARY_PATH=/usr/local/cuda/lib64)");
  }();
  return chosen;
}

void* open_library(Library library) {
  const std::string name = soname(library, major());
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    LATHE_FAIL("cuda: cannot load ", library == Library::cublas ? "cuBLAS" : "cuBLASLt", " (", why ? why : name,
               "); the CUDA backend needs the toolkit's cuBLAS libraries on the loader's path "
               "(e.g. LD_LIBRARY_PATH=/usr/local/cuda/lib64)");
  }
  return h;
}

// Each library's handle, opened at the first call into it.
void* handle(Library library) {
  if (library == Library::cublas) {
    static void* const cublas = open_library(Library::cublas);
    return cublas;
  }
  static void* const cublaslt = open_library(Library::cublaslt);
  return cublaslt;
}

template <class Function>
Function* real(Library library, const char* name) {
  void* address = dlsym(handle(library), name);
  LATHE_CHECK(address != nullptr, "cuda: ", soname(library, major()), " has no function ", name,
              " (a cuBLAS older than the headers lathe was built with?)");
  return reinterpret_cast<Function*>(address);
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  static auto* const f = real<decltype(cublasCreate_v2)>(Library::cublas, "cublasCreate_v2");
  return f(handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static auto* const f = real<decltype(cublasSetStream_v2)>(Library::cublas, "cublasSetStream_v2");
  return f(handle, stream);
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  static auto* const f = real<decltype(cublasSetPointerMode_v2)>(Library::cublas, "cublasSetPointerMode_v2");
  return f(handle, mode);
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  static auto* const f = real<decltype(cublasSetMathMode)>(Library::cublas, "cublasSetMathMode");
  return f(handle, mode);
}

const char* cublasGetStatusString(cublasStatus_t status) {
  static auto* const f = real<decltype(cublasGetStatusString)>(Library::cublas, "cublasGetStatusString");
  return f(status);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long strideA, const void* B,
                                          cudaDataType Btype, int ldb, long long strideB,
                                          const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  // The C++ header overloads this name (a computeType of cudaDataType, for old callers), so the
  // type is spelled out rather than taken with decltype.
  using Gemm = cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                              const void*, const void*, cudaDataType, int, long long, const void*,
                              cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                              long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  static auto* const f = real<Gemm>(Library::cublas, "cublasGemmStridedBatchedEx");
  return f(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB,
           beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

// ---- cuBLASLt (libcublasLt): linear layers with epilogues (cuda/backend_matmul.cpp)

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  static auto* const f = real<decltype(cublasLtCreate)>(Library::cublaslt, "cublasLtCreate");
  return f(lightHandle);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  static auto* const f = real<decltype(cublasLtMatmulDescCreate)>(Library::cublaslt, "cublasLtMatmulDescCreate");
  return f(matmulDesc, computeType, scaleType);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  static auto* const f = real<decltype(cublasLtMatmulDescDestroy)>(Library::cublaslt, "cublasLtMatmulDescDestroy");
  return f(matmulDesc);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
  static auto* const f =
      real<decltype(cublasLtMatmulDescSetAttribute)>(Library::cublaslt, "cublasLtMatmulDescSetAttribute");
  return f(matmulDesc, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  static auto* const f = real<decltype(cublasLtMatrixLayoutCreate)>(Library::cublaslt, "cublasLtMatrixLayoutCreate");
  return f(matLayout, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  static auto* const f =
      real<decltype(cublasLtMatrixLayoutDestroy)>(Library::cublaslt, "cublasLtMatrixLayoutDestroy");
  return f(matLayout);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  static auto* const f =
      real<decltype(cublasLtMatmulPreferenceCreate)>(Library::cublaslt, "cublasLtMatmulPreferenceCreate");
  return f(pref);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  static auto* const f =
      real<decltype(cublasLtMatmulPreferenceDestroy)>(Library::cublaslt, "cublasLtMatmulPreferenceDestroy");
  return f(pref);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  static auto* const f = real<decltype(cublasLtMatmulPreferenceSetAttribute)>(
      Library::cublaslt, "cublasLtMatmulPreferenceSetAttribute");
  return f(pref, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  static auto* const f =
      real<decltype(cublasLtMatmulAlgoGetHeuristic)>(Library::cublaslt, "cublasLtMatmulAlgoGetHeuristic");
  return f(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
           heuristicResultsArray, returnAlgoCount);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
                              cudaStream_t stream) {
  static auto* const f = real<decltype(cublasLtMatmul)>(Library::cublaslt, "cublasLtMatmul");
  return f(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
           workspaceSizeInBytes, stream);
}

}  // extern "C"
