#pragma once
// cuBLAS's strided batched GEMM as documented (column-major, op(A) m x k, op(B) k x n), computed
// naively in double: the reference against which lathe's row-major mapping is checked.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime_api.h"

typedef void* cublasHandle_t;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasPointerMode_t { CUBLAS_POINTER_MODE_HOST = 0 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16 };
enum cudaDataType_t { CUDA_R_32F, CUDA_R_64F, CUDA_R_16F, CUDA_R_16BF };
typedef cudaDataType_t cudaDataType;
enum cublasComputeType_t { CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_64F };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

inline cublasStatus_t cublasCreate(cublasHandle_t* h) { *h = reinterpret_cast<void*>(1); return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetPointerMode(cublasHandle_t, cublasPointerMode_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
inline const char* cublasGetStatusString(cublasStatus_t) { return "emulated cuBLAS error"; }

namespace emu {
inline double load(const void* p, cudaDataType_t t, long long i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_64F: return static_cast<const double*>(p)[i];
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}
// An f32 operand as a TF32 tensor core reads it (CUBLAS_COMPUTE_32F_FAST_TF32, lathe's --tf32): 10
// explicit mantissa bits of f32's 23, rounded to nearest with ties away from zero, as PTX's
// cvt.rna.tf32.f32 does. Other types and compute types pass unchanged.
inline double operand(const void* p, cudaDataType_t t, long long i, cublasComputeType_t compute) {
  if (t != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F_FAST_TF32) return load(p, t, i);
  float x = static_cast<const float*>(p)[i];
  if (!std::isfinite(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;  // half a unit of the 10th bit, then drop the 13 below it
  std::memcpy(&x, &u, 4);
  return x;
}
inline void store(void* p, cudaDataType_t t, long long i, double v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = float(v); break;
    case CUDA_R_64F: static_cast<double*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<__half*>(p)[i] = __float2half_rn(float(v)); break;
    default: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(float(v)); break;
  }
}
}  // namespace emu

inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                                 int k, const void* alpha, const void* A, cudaDataType_t at, int lda,
                                                 long long sa, const void* B, cudaDataType_t bt, int ldb, long long sb,
                                                 const void* beta, void* C, cudaDataType_t ct, int ldc, long long sc,
                                                 int batch, cublasComputeType_t comp, cublasGemmAlgo_t) {
  // Argument checks as cuBLAS documents them.
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, ta == CUBLAS_OP_N ? m : k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldb < std::max(1, tb == CUBLAS_OP_N ? k : n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldc < std::max(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  const double al = comp == CUBLAS_COMPUTE_64F ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  const double be = comp == CUBLAS_COMPUTE_64F ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int l = 0; l < k; ++l) {
          const long long ai = ta == CUBLAS_OP_N ? i + (long long)l * lda : l + (long long)i * lda;
          const long long bi = tb == CUBLAS_OP_N ? l + (long long)j * ldb : j + (long long)l * ldb;
          acc += emu::operand(A, at, b * sa + ai, comp) * emu::operand(B, bt, b * sb + bi, comp);
        }
        const long long ci = b * sc + i + (long long)j * ldc;
        const double prev = be != 0 ? emu::load(C, ct, ci) : 0.0;
        emu::store(C, ct, ci, al * acc + be * prev);
      }
  return CUBLAS_STATUS_SUCCESS;
}
