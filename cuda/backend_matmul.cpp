// CudaBackend::matmul through cuBLAS (cublasGemmStridedBatchedEx).
//
// cuBLAS is column-major; a row-major C = A B is computed as C^T = B^T A^T, which reads each
// row-major operand as its column-major transpose for free. A transposed view (unit row stride)
// is passed with CUBLAS_OP_T instead of being copied; only a view that is neither layout is
// copied first. Batch dims are merged where both operands step through them evenly; a broadcast
// (stride-0) batch dim becomes a zero batch stride, never a copy. Dims that cannot merge are walked
// on the host, one strided-batched call per step.
//
// f32 runs in true f32 (no TF32) so results match the CPU within f32 rounding; set
// LATHE_CUDA_TF32=1 to allow TF32 tensor cores. bf16 and f16 multiply on tensor cores with f32
// accumulation and one rounding of the result, as the CPU's f32 product does.
#include <climits>
#include <cstdlib>

#include "cuda/cuda_backend.h"

namespace lathe::cuda {

namespace {

// One operand's matrices for cuBLAS: op and leading dimension of its column-major reading.
struct Operand {
  bool usable = false;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
};

// t's trailing two dims as a (rows x cols) row-major matrix read by cuBLAS column-major.
Operand operand_of(const Tensor& t) {
  const int64_t nd = t.dim();
  const int64_t rows = t.shape()[size_t(nd - 2)], cols = t.shape()[size_t(nd - 1)];
  const int64_t s_row = t.strides()[size_t(nd - 2)], s_col = t.strides()[size_t(nd - 1)];
  // Row-major rows: the column-major transpose, no op.
  if (cols == 1 || s_col == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : s_row;
    if (ld >= std::max<int64_t>(cols, 1)) return {true, CUBLAS_OP_N, ld};
  }
  // Column-major (a transposed view): read as stored, then transposed by cuBLAS.
  if (rows == 1 || s_row == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : s_col;
    if (ld >= std::max<int64_t>(rows, 1)) return {true, CUBLAS_OP_T, ld};
  }
  return {};
}

// A contiguous copy of t whose broadcast batch dims stay broadcast (size 1, expanded back).
Tensor compact_copy(Backend& be, const Tensor& t) {
  Tensor src = t;
  for (int64_t d = 0; d + 2 < t.dim(); ++d)
    if (t.strides()[size_t(d)] == 0 && t.shape()[size_t(d)] > 1) src = src.narrow(d, 0, 1);
  Tensor dst = Tensor::empty(src.shape(), src.dtype(), t.device());
  be.copy(src, dst);
  return dst.expand(t.shape());
}

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  bool f64_scalars;
};

GemmTypes gemm_types(DType t) {
  static const bool tf32 = [] {
    const char* v = std::getenv("LATHE_CUDA_TF32");
    return v != nullptr && v[0] == '1';
  }();
  switch (t) {
    case DType::f32: return {CUDA_R_32F, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, false};
    case DType::f64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
    case DType::bf16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, false};
    case DType::f16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, false};
    default: LATHE_FAIL("matmul: dtype ", dtype_name(t), " is not a floating type");
  }
}

int checked_int(int64_t v, const char* what, const Tensor& t) {
  LATHE_CHECK(v >= 0 && v <= INT_MAX, "matmul: ", what, " ", v, " of ", t.desc(),
              " exceeds what cuBLAS takes (2^31 - 1)");
  return int(v);
}

}  // namespace

void CudaBackend::matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  LATHE_CHECK(a_in.dtype() == b_in.dtype() && a_in.dtype() == out.dtype(), "matmul kernel: dtypes differ: ",
              a_in.desc(), ", ", b_in.desc(), " -> ", out.desc());
  LATHE_CHECK(out.is_contiguous() && out.dim() >= 2,
              "matmul kernel: output must be contiguous and at least 2-D, got ", out.desc());
  LATHE_CHECK(a_in.dim() == out.dim() && b_in.dim() == out.dim(), "matmul kernel: operands ", a_in.desc(), " and ",
              b_in.desc(), " are not expanded to the batch dims of ", out.desc());
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const int64_t nd = out.dim();
  const int64_t M = out.shape()[size_t(nd - 2)], N = out.shape()[size_t(nd - 1)];
  const int64_t K = a_in.shape()[size_t(nd - 1)];
  if (K == 0) {
    fill(out, 0.0);
    return;
  }
  const GemmTypes types = gemm_types(out.dtype());

  Tensor a = a_in, b = b_in;
  Operand oa = operand_of(a), ob = operand_of(b);
  if (!oa.usable) {
    a = compact_copy(*this, a_in);
    oa = operand_of(a);
  }
  if (!ob.usable) {
    b = compact_copy(*this, b_in);
    ob = operand_of(b);
  }

  // Batch dims merged where a, b and out all step evenly; the last merged dim goes to cuBLAS.
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  Strides sa(a.strides().begin(), a.strides().end() - 2), sb(b.strides().begin(), b.strides().end() - 2);
  Strides so(out.strides().begin(), out.strides().end() - 2);
  Shape mshape;
  std::vector<int64_t> ma, mb, mo;
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] == 1) continue;
    if (!mshape.empty() && ma.back() == sa[d] * batch[d] && mb.back() == sb[d] * batch[d] &&
        mo.back() == so[d] * batch[d]) {
      mshape.back() *= batch[d];
      ma.back() = sa[d];
      mb.back() = sb[d];
      mo.back() = so[d];
      continue;
    }
    mshape.push_back(batch[d]);
    ma.push_back(sa[d]);
    mb.push_back(sb[d]);
    mo.push_back(so[d]);
  }
  const int64_t inner = mshape.empty() ? 1 : mshape.back();
  const int64_t stride_a = mshape.empty() ? 0 : ma.back(), stride_b = mshape.empty() ? 0 : mb.back();
  const int64_t stride_o = mshape.empty() ? M * N : mo.back();
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < mshape.size(); ++d) outer *= mshape[d];

  const int m = checked_int(N, "column count", out), n = checked_int(M, "row count", out);
  const int k = checked_int(K, "inner size", a);
  const int lda = checked_int(oa.ld, "leading dimension", a), ldb = checked_int(ob.ld, "leading dimension", b);
  const size_t esize = dtype_size(out.dtype());
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const double alpha64 = 1.0, beta64 = 0.0;
  const void* alpha = types.f64_scalars ? static_cast<const void*>(&alpha64) : static_cast<const void*>(&alpha32);
  const void* beta = types.f64_scalars ? static_cast<const void*>(&beta64) : static_cast<const void*>(&beta32);

  const char* pa = static_cast<const char*>(a.data_ptr());
  const char* pb = static_cast<const char*>(b.data_ptr());
  char* po = static_cast<char*>(out.data_ptr());
  std::vector<int64_t> idx(mshape.size() > 1 ? mshape.size() - 1 : 0, 0);
  int64_t off_a = 0, off_b = 0, off_o = 0;
  constexpr int64_t kMaxBatch = 65535;
  for (int64_t it = 0; it < outer; ++it) {
    for (int64_t b0 = 0; b0 < inner; b0 += kMaxBatch) {
      const int count = int(std::min(kMaxBatch, inner - b0));
      // C^T (N x M, ld N) = op(B) (N x K) * op(A) (K x M)
      check_cublas(cublasGemmStridedBatchedEx(
                       ctx.cublas, ob.op, oa.op, m, n, k, alpha,
                       pb + (off_b + b0 * stride_b) * int64_t(esize), types.data, ldb, stride_b,
                       pa + (off_a + b0 * stride_a) * int64_t(esize), types.data, lda, stride_a, beta,
                       po + (off_o + b0 * stride_o) * int64_t(esize), types.data, m, stride_o, count,
                       types.compute, CUBLAS_GEMM_DEFAULT),
                   "matmul (cublasGemmStridedBatchedEx)");
    }
    // Next outer batch index (odometer over the merged dims before the last).
    for (int64_t d = int64_t(idx.size()) - 1; d >= 0; --d) {
      const size_t du = size_t(d);
      off_a += ma[du];
      off_b += mb[du];
      off_o += mo[du];
      if (++idx[du] < mshape[du]) break;
      off_a -= ma[du] * mshape[du];
      off_b -= mb[du] * mshape[du];
      off_o -= mo[du] * mshape[du];
      idx[du] = 0;
    }
  }
}

}  // namespace lathe::cuda
