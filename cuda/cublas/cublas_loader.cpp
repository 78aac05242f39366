// cuBLAS, loaded at its first use instead of at every program start.
//
// Linking libcublas.so pulls in libcublasLt.so, whose static initialisers cost about 0.4 s and
// 217 MB of resident memory before main() in every process, whether it touches a GPU or not:
// `lathe --version`, every CPU-only training run, every test process. So lathe does not link
// cuBLAS. This file defines each cuBLAS function lathe calls, with the header's signature, as a
// forwarder to the real one, which it finds with dlsym in the library dlopen'd at the first call.
// Call sites stay plain cuBLAS; a function used for the first time needs its forwarder here (the
// link fails, naming it, until it has one).
//
// The CUDA emulator (cuda/emulator) implements these functions itself and does not compile this
// file. The forwarders have hidden visibility (cuda/CMakeLists.txt), so the library's own calls
// to its functions never resolve to them.
#include <cublas_v2.h>
#include <dlfcn.h>

#include "core/error.h"

namespace {

void* cublas_library() {
  // LATHE_CUBLAS_SONAME: the toolkit's library, by the name the build found it under.
  static void* const handle = [] {
    void* h = dlopen(LATHE_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* why = dlerror();
      LATHE_FAIL("cuda: cannot load cuBLAS (", why ? why : LATHE_CUBLAS_SONAME,
                 "); the CUDA backend needs the toolkit's cuBLAS library on the loader's path "
                 "(e.g. LD_LIBRARY_PATH=/usr/local/cuda/lib64)");
    }
    return h;
  }();
  return handle;
}

template <class Function>
Function* real(const char* name) {
  void* address = dlsym(cublas_library(), name);
  LATHE_CHECK(address != nullptr, "cuda: ", LATHE_CUBLAS_SONAME, " has no function ", name,
              " (a cuBLAS older than the headers lathe was built with?)");
  return reinterpret_cast<Function*>(address);
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  static auto* const f = real<decltype(cublasCreate_v2)>("cublasCreate_v2");
  return f(handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static auto* const f = real<decltype(cublasSetStream_v2)>("cublasSetStream_v2");
  return f(handle, stream);
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  static auto* const f = real<decltype(cublasSetPointerMode_v2)>("cublasSetPointerMode_v2");
  return f(handle, mode);
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  static auto* const f = real<decltype(cublasSetMathMode)>("cublasSetMathMode");
  return f(handle, mode);
}

const char* cublasGetStatusString(cublasStatus_t status) {
  static auto* const f = real<decltype(cublasGetStatusString)>("cublasGetStatusString");
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
  static auto* const f = real<Gemm>("cublasGemmStridedBatchedEx");
  return f(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB,
           beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

}  // extern "C"
