// One single-threaded matrix product on raw row-major storage, for CPU kernels that multiply
// blocks of their own (the matmul kernel's tiles, the fused attention's query blocks):
//
//   C (M x N, rows ldc apart) = alpha * op(A) op(B) + beta * C,   op(X) = X or X^T
//
// A is M x K as stored when !trans_a (rows lda apart), else stored K x M; likewise B. beta == 0
// ignores C's old contents (NaN included). OpenBLAS where the build found it, else Eigen.
#pragma once

#include <cstdint>

namespace lathe::cpu {

template <class T>  // float or double
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace lathe::cpu
