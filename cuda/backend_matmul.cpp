// CudaBackend::matmul through cuBLAS (cublasGemmStridedBatchedEx), and the linear layers' products
// through cuBLASLt, whose epilogues add the bias, apply the GELU and sum the bias gradient in the
// product's own pass over its output.
//
// cuBLAS is column-major; a row-major C = A B is computed as C^T = B^T A^T, which reads each
// row-major operand as its column-major transpose for free. A transposed view (unit row stride)
// is passed with CUBLAS_OP_T instead of being copied; only a view that is neither layout is
// copied first. Batch dims are merged where both operands step through them evenly; a broadcast
// (stride-0) batch dim becomes a zero batch stride, never a copy. Dims that cannot merge are walked
// on the host, one strided-batched call per step.
//
// f32 runs in true f32 unless TF32 is allowed (`--tf32`, core/backend.h), so that by default results
// match the CPU within f32 rounding. bf16 and f16 multiply on tensor cores with f32 accumulation
// and one rounding of the result, as the CPU's f32 product does, or none: 16-bit operands may write
// an f32 product (a weight gradient for its f32 master).
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "core/matrix_layout.h"
#include "cuda/cuda_backend.h"

namespace lathe::cuda {

namespace {

// One operand's matrices for cuBLAS: op and leading dimension of its column-major reading.
struct Operand {
  bool usable = false;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
};

// t's trailing two dims (core/matrix_layout.h) as cuBLAS reads them, column-major: row-major rows
// are the column-major transpose (no op), column-major ones are read as stored and transposed by
// cuBLAS. cuBLAS also needs the leading dimension to span a row (or column); a layout whose does
// not (a broadcast row) is copied.
Operand operand_of(const Tensor& t) {
  const MatrixLayout l = matrix_layout(t);
  const int64_t nd = t.dim();
  const int64_t span = std::max<int64_t>(t.shape()[size_t(l.row_major ? nd - 1 : nd - 2)], 1);
  if (!l.usable || l.outer < span) return {};
  return {true, l.row_major ? CUBLAS_OP_N : CUBLAS_OP_T, l.outer};
}

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  bool f64_scalars;
};

GemmTypes gemm_types(DType t) {
  switch (t) {
    case DType::f32: return {CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, false};
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
  const bool low = a_in.dtype() == DType::bf16 || a_in.dtype() == DType::f16;
  LATHE_CHECK(a_in.dtype() == b_in.dtype() && (a_in.dtype() == out.dtype() || (low && out.dtype() == DType::f32)),
              "matmul kernel: dtypes differ: ", a_in.desc(), ", ", b_in.desc(), " -> ", out.desc());
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
  const GemmTypes types = gemm_types(a_in.dtype());
  const cudaDataType_t out_type = out.dtype() == a_in.dtype() ? types.data : CUDA_R_32F;

  Tensor a = a_in, b = b_in;
  Operand oa = operand_of(a), ob = operand_of(b);
  if (!oa.usable) {
    a = compact_matrices(a_in, a_in.dtype());
    oa = operand_of(a);
  }
  if (!ob.usable) {
    b = compact_matrices(b_in, b_in.dtype());
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
  const int64_t esize = int64_t(dtype_size(a.dtype())), out_esize = int64_t(dtype_size(out.dtype()));
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
                       ctx.cublas, ob.op, oa.op, m, n, k, alpha, pb + (off_b + b0 * stride_b) * esize, types.data,
                       ldb, stride_b, pa + (off_a + b0 * stride_a) * esize, types.data, lda, stride_a, beta,
                       po + (off_o + b0 * stride_o) * out_esize, out_type, m, stride_o, count, types.compute,
                       CUBLAS_GEMM_DEFAULT),
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

// ---- linear layers: cuBLASLt with epilogues ----

namespace {

// Whether linear layers take cuBLASLt's epilogues (the bias; the bias then the GELU, keeping the
// GELU's input; the bias gradient beside the weight gradient), each one pass over memory fewer than
// a kernel of its own. One switch: LATHE_CUDA_EPILOGUES=0 turns them off, for tools/gpu_check.sh's
// benchmark to measure both (read at every product, so that a test can take both paths). Off, or
// where cuBLASLt finds no algorithm for a product, the product is cuBLAS's GEMM and each epilogue a
// kernel of its own (a 16-bit product is then rounded before its bias is added, and the GELU reads
// that rounding).
bool epilogues_enabled() {
  const char* v = std::getenv("LATHE_CUDA_EPILOGUES");
  return v == nullptr || v[0] != '0';
}

// One cuBLASLt product as cuBLAS sees it, column-major: D [m, n] (ld ldd) = op(A) [m, k] op(B) [k, n],
// then the epilogue with `bias` (the bias read, or the bias gradient written) and `aux` (the GELU's
// input, ld ldd).
struct LtProduct {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  cudaDataType_t ab_type = CUDA_R_32F, d_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  void* aux = nullptr;
};

// The largest power of two up to 16 that divides p's address: the alignment the heuristic may
// assume (views into a tensor need not start on 16 bytes).
uint32_t alignment_of(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 16;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// The heuristic's choice per product shape, layout, types, epilogue and alignment, on each device;
// nullopt where cuBLASLt has none (that product takes the plain path from then on).
using LtKey = std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, bool,
                         bool, uint32_t>;
std::mutex lt_mu;
std::map<LtKey, std::optional<cublasLtMatmulAlgo_t>> lt_algos;

// Descriptors that destroy themselves.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// Runs p; false when cuBLASLt cannot (no algorithm for it), and then nothing was written.
bool run_lt(DeviceContext& ctx, const LtProduct& p) {
  const uint32_t align = std::min({alignment_of(p.a), alignment_of(p.b), alignment_of(p.d),
                                   p.bias ? alignment_of(p.bias) : 16u, p.aux ? alignment_of(p.aux) : 16u});
  const LtKey key{ctx.index, int(p.ta), int(p.tb), p.m, p.n, p.k, p.lda, p.ldb, p.ldd, int(p.ab_type), int(p.d_type),
                  int(p.compute), int(p.epilogue), p.bias != nullptr, p.aux != nullptr, align};
  const char* what = "linear (cuBLASLt)";
  LtDescriptors desc;
  check_cublas(cublasLtMatmulDescCreate(&desc.op, p.compute, CUDA_R_32F), what);
  const int32_t ta = p.ta, tb = p.tb;
  const uint32_t epilogue = p.epilogue;
  check_cublas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), what);
  check_cublas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), what);
  check_cublas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
               what);
  if (p.bias)
    check_cublas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof p.bias),
                 what);
  if (p.aux) {
    const int64_t ld_aux = p.ldd;
    check_cublas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p.aux,
                                                sizeof p.aux),
                 what);
    check_cublas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof ld_aux),
                 what);
  }
  const bool a_n = p.ta == CUBLAS_OP_N, b_n = p.tb == CUBLAS_OP_N;
  check_cublas(cublasLtMatrixLayoutCreate(&desc.a, p.ab_type, uint64_t(a_n ? p.m : p.k), uint64_t(a_n ? p.k : p.m),
                                          p.lda),
               what);
  check_cublas(cublasLtMatrixLayoutCreate(&desc.b, p.ab_type, uint64_t(b_n ? p.k : p.n), uint64_t(b_n ? p.n : p.k),
                                          p.ldb),
               what);
  check_cublas(cublasLtMatrixLayoutCreate(&desc.d, p.d_type, uint64_t(p.m), uint64_t(p.n), p.ldd), what);

  std::optional<cublasLtMatmulAlgo_t> algo;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(lt_mu);
    auto it = lt_algos.find(key);
    if (it != lt_algos.end()) {
      known = true;
      algo = it->second;
    }
  }
  if (!known) {
    check_cublas(cublasLtMatmulPreferenceCreate(&desc.pref), what);
    const uint64_t workspace = ctx.lt_workspace_bytes;
    check_cublas(cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                      sizeof workspace),
                 what);
    for (const auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      check_cublas(cublasLtMatmulPreferenceSetAttribute(desc.pref, attr, &align, sizeof align), what);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt, desc.op, desc.a, desc.b, desc.d, desc.d,
                                                             desc.pref, 1, &result, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) algo = result.algo;
    std::lock_guard<std::mutex> lock(lt_mu);
    lt_algos[key] = algo;
  }
  if (!algo) return false;
  const float alpha = 1.0f, beta = 0.0f;
  check_cublas(cublasLtMatmul(ctx.cublaslt, desc.op, &alpha, p.a, desc.a, p.b, desc.b, &beta, p.d, desc.d, p.d, desc.d,
                              &*algo, ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream),
               what);
  return true;
}

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// cuBLASLt takes f32 and 16-bit products (f64 ones, a gradcheck's, take the plain path).
bool lt_dtype(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

}  // namespace

void CudaBackend::linear(const Tensor& x, const Tensor& weight, const Tensor& bias, LinearEpilogue epilogue,
                         const Tensor& out, const Tensor& pre) {
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const int64_t R = x.shape()[0], K = x.shape()[1], N = weight.shape()[0];
  const bool gelu = epilogue == LinearEpilogue::gelu;
  // out^T [N, R] = weight [N, K] (read as its column-major transpose, op T) @ x^T [K, R] (x's rows as
  // columns, op N). The GELU's input has out's layout; cuBLASLt wants its leading dim a multiple of 8.
  if (epilogues_enabled() && lt_dtype(x.dtype()) && (bias.defined() || gelu) && K > 0 && (!gelu || N % 8 == 0)) {
    LtProduct p;
    p.ta = CUBLAS_OP_T;
    p.tb = CUBLAS_OP_N;
    p.m = N;
    p.n = R;
    p.k = K;
    p.a = weight.data_ptr();
    p.lda = K;
    p.b = x.data_ptr();
    p.ldb = R == 1 ? K : x.strides()[0];
    p.d = out.data_ptr();
    p.ldd = N;
    p.ab_type = p.d_type = lt_type(x.dtype());
    p.compute = gemm_types(x.dtype()).compute;
    p.bias = bias.defined() ? bias.data_ptr() : nullptr;
    p.aux = gelu ? pre.data_ptr() : nullptr;
    p.epilogue = gelu ? (bias.defined() ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                      : CUBLASLT_EPILOGUE_BIAS;
    if (run_lt(ctx, p)) return;
  }
  // The plain path: the product, then the bias and the GELU as kernels of their own.
  const Tensor y = gelu ? pre : out;
  matmul(x, weight.t(), y);
  if (bias.defined()) binary(BinaryOp::add, y, bias.expand(y.shape()), y);
  if (gelu) unary(UnaryOp::gelu, y, out, 0, 0);
}

void CudaBackend::linear_backward_weight(const Tensor& g, const Tensor& x, const Tensor& gweight,
                                         const Tensor& gbias) {
  DeviceContext& ctx = context_of(g);
  const int64_t R = g.shape()[0], N = g.shape()[1], K = x.shape()[1];
  // gweight^T [K, N] = x^T [K, R] (x's rows as columns, op N) @ g [R, N] (g's rows as columns, op T);
  // the bias gradient, the sum of g's rows, is the BGRADB epilogue's sum over the product's k.
  if (epilogues_enabled() && lt_dtype(g.dtype()) && gweight.defined() && gbias.defined() && R > 0 && K > 0) {
    LtProduct p;
    p.ta = CUBLAS_OP_N;
    p.tb = CUBLAS_OP_T;
    p.m = K;
    p.n = N;
    p.k = R;
    p.a = x.data_ptr();
    p.lda = R == 1 ? K : x.strides()[0];
    p.b = g.data_ptr();
    p.ldb = R == 1 ? N : g.strides()[0];
    p.d = gweight.data_ptr();
    p.ldd = K;
    p.ab_type = lt_type(g.dtype());
    p.d_type = lt_type(gweight.dtype());
    p.compute = gemm_types(g.dtype()).compute;
    p.bias = gbias.data_ptr();
    p.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    if (run_lt(ctx, p)) return;
  }
  if (gweight.defined()) matmul(g.t(), x, gweight);  // [N, R] @ [R, K], f32 for 16-bit g and x
  if (!gbias.defined()) return;
  if (R == 0) return fill(gbias, 0.0);
  // The rows' sum in the reduction kernel; 16-bit rows are widened first, so that the sum is f32.
  Tensor rows = g;
  if (gbias.dtype() != g.dtype()) {
    rows = Tensor::empty(g.shape(), gbias.dtype(), g.device());
    copy(g, rows);
  }
  reduce(ReduceOp::sum, rows, {0}, gbias.view({1, N}));
}

}  // namespace lathe::cuda
