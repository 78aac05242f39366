#pragma once
// Emulator stand-in for cuBLASLt (README.md here): the part of its matmul API that the
// linear layers use (cuda/backend_matmul.cpp), computed naively in double from the documented
// contract, so that lathe's mapping of its row-major operands, epilogues and leading dimensions is
// checked without a GPU. Column-major D [m, n] = op(A) op(B); then the epilogue: BIAS adds bias[i]
// to row i of D; GELU (tanh approximation) applies after it, and the *_AUX forms write its input to
// the aux matrix (ld a multiple of 8, as documented); BGRADB writes the sum over k of op(B) per
// column of D to the bias pointer, in D's type. Every result is rounded once to its type.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cublas_v2.h"

typedef void* cublasLtHandle_t;
constexpr cublasStatus_t CUBLAS_STATUS_NOT_SUPPORTED = cublasStatus_t(15);

enum cublasLtEpilogue_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_GELU = 32,
  CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
  CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
  CUBLASLT_EPILOGUE_BGRADB = 512,
};
enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
};
enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

struct cublasLtMatmulDescOpaque_emu {
  cublasComputeType_t compute;
  int32_t ta = 0, tb = 0;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  void* aux = nullptr;
  int64_t ld_aux = 0;
};
struct cublasLtMatrixLayoutOpaque_emu {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct cublasLtMatmulPreferenceOpaque_emu {
  uint32_t min_alignment = 256;  // the least of A, B, C and D's
};
typedef cublasLtMatmulDescOpaque_emu* cublasLtMatmulDesc_t;
typedef cublasLtMatrixLayoutOpaque_emu* cublasLtMatrixLayout_t;
typedef cublasLtMatmulPreferenceOpaque_emu* cublasLtMatmulPreference_t;
typedef struct {
  uint64_t data[8];  // data[0]: the alignment the algorithm assumes
} cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = reinterpret_cast<void*>(1);
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType_t) {
  *d = new cublasLtMatmulDescOpaque_emu{compute};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                                     const void* buf, size_t size) {
  auto take = [&](void* dst, size_t want) {
    if (size != want) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(dst, buf, size);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return take(&d->ta, sizeof d->ta);
    case CUBLASLT_MATMUL_DESC_TRANSB: return take(&d->tb, sizeof d->tb);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return take(&d->epilogue, sizeof d->epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return take(&d->bias, sizeof d->bias);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return take(&d->aux, sizeof d->aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return take(&d->ld_aux, sizeof d->ld_aux);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
  *l = new cublasLtMatrixLayoutOpaque_emu{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = new cublasLtMatmulPreferenceOpaque_emu{};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                           cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                           size_t size) {
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return size == 8 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  if (size != 4) return CUBLAS_STATUS_INVALID_VALUE;
  uint32_t a;
  std::memcpy(&a, buf, 4);
  if (a < p->min_alignment) p->min_alignment = a;
  return CUBLAS_STATUS_SUCCESS;
}

namespace emu {
// The documented shape rules of one product; NOT_SUPPORTED for an epilogue's layout it refuses.
inline cublasStatus_t lt_check(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                               cublasLtMatrixLayout_t D) {
  const uint64_t m = D->rows, n = D->cols;
  const uint64_t k = d->ta == CUBLAS_OP_N ? A->cols : A->rows;
  if ((d->ta == CUBLAS_OP_N ? A->rows : A->cols) != m) return CUBLAS_STATUS_INVALID_VALUE;
  if ((d->tb == CUBLAS_OP_N ? B->rows : B->cols) != k || (d->tb == CUBLAS_OP_N ? B->cols : B->rows) != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (A->ld < int64_t(A->rows) || B->ld < int64_t(B->rows) || D->ld < int64_t(D->rows)) return CUBLAS_STATUS_INVALID_VALUE;
  if (A->type != B->type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->epilogue & 128) {  // an aux matrix
    if (d->aux == nullptr || d->ld_aux % 8 != 0 || d->ld_aux < int64_t(m)) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if ((d->epilogue & 4 || d->epilogue == CUBLASLT_EPILOGUE_BGRADB) && d->bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
inline uint32_t lt_alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}
inline double lt_gelu(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
}  // namespace emu

inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A,
                                                     cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t D,
                                                     cublasLtMatmulPreference_t pref, int requested,
                                                     cublasLtMatmulHeuristicResult_t* results, int* count) {
  if (requested <= 0) return CUBLAS_STATUS_INVALID_VALUE;
  *count = 0;
  const cublasStatus_t st = emu::lt_check(d, A, B, D);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return st;
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = pref->min_alignment;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void* alpha, const void* a,
                                     cublasLtMatrixLayout_t A, const void* b, cublasLtMatrixLayout_t B, const void* beta,
                                     const void* c, cublasLtMatrixLayout_t, void* dd, cublasLtMatrixLayout_t D,
                                     const cublasLtMatmulAlgo_t* algo, void*, size_t, cudaStream_t) {
  const cublasStatus_t st = emu::lt_check(d, A, B, D);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  // An algorithm chosen for aligned pointers refuses others, as cuBLASLt's do.
  const uint32_t assumed = uint32_t(algo->data[0]);
  for (const void* p : {a, b, c, static_cast<const void*>(dd), static_cast<const void*>(d->bias),
                        static_cast<const void*>(d->aux)})
    if (p != nullptr && emu::lt_alignment(p) < assumed) return CUBLAS_STATUS_INVALID_VALUE;
  if (*static_cast<const float*>(beta) != 0.0f) return CUBLAS_STATUS_NOT_SUPPORTED;  // lathe never accumulates
  const double al = *static_cast<const float*>(alpha);
  const long long m = (long long)D->rows, n = (long long)D->cols;
  const long long k = d->ta == CUBLAS_OP_N ? (long long)A->cols : (long long)A->rows;
  auto a_at = [&](long long i, long long l) {
    return emu::operand(a, A->type, d->ta == CUBLAS_OP_N ? i + l * A->ld : l + i * A->ld, d->compute);
  };
  auto b_at = [&](long long l, long long j) {
    return emu::operand(b, B->type, d->tb == CUBLAS_OP_N ? l + j * B->ld : j + l * B->ld, d->compute);
  };
  const uint32_t ep = d->epilogue;
  for (long long j = 0; j < n; ++j)
    for (long long i = 0; i < m; ++i) {
      double v = 0;
      for (long long l = 0; l < k; ++l) v += a_at(i, l) * b_at(l, j);
      v *= al;
      if (ep & 4) v += emu::load(d->bias, D->type, i);
      if (ep & 128) emu::store(d->aux, D->type, i + j * d->ld_aux, v);
      if (ep & 32) v = emu::lt_gelu(v);
      emu::store(dd, D->type, i + j * D->ld, v);
    }
  if (ep == CUBLASLT_EPILOGUE_BGRADB)
    for (long long j = 0; j < n; ++j) {
      double s = 0;
      // The bias gradient sums the operand as stored (a reduction, not a tensor-core product).
      for (long long l = 0; l < k; ++l) s += emu::load(b, B->type, d->tb == CUBLAS_OP_N ? l + j * B->ld : j + l * B->ld);
      emu::store(d->bias, D->type, j, s);
    }
  return CUBLAS_STATUS_SUCCESS;
}
