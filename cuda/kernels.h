// The boundary between the CUDA backend's host code (cuda_backend.cpp and backend_*.cpp, which
// know lathe's Tensor) and its kernels (*.cu, which know only raw pointers, shapes and strides).
//
// Of lathe's core headers only the dependency-free op table is included: nvcc then never parses
// Eigen, which keeps the .cu files quick to compile. DT mirrors lathe::DType by value
// (cuda_backend.cpp static_asserts that they agree).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/op_table.h"  // UnaryOp, BinaryOp, ReduceOp: shared with core, dependency-free

namespace lathe::cuda {

// Mirrors lathe::DType.
enum class DT : uint8_t { f32, f64, bf16, f16, i32, i64, b8 };
// A strided iteration space shared by N operands (the output first), after merging dims that are
// contiguous in every operand. Passed to kernels by value.
constexpr int kMaxDims = 8;
template <int N>
struct Geometry {
  int ndim = 0;
  int64_t numel = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};  // in elements
};

// One contiguous run for every operand (or a single element)?
template <int N>
inline bool is_flat(const Geometry<N>& g) {
  if (g.ndim > 1) return false;
  for (int k = 0; k < N; ++k)
    if (g.ndim == 1 && g.strides[k][0] != 1) return false;
  return true;
}

// Where kernels report bad indices without trapping: host-mapped memory the host reads at its next
// synchronisation with the device (runtime.cpp turns it into a lathe::Error). The first reporter
// wins a lock word in device memory (atomics on host-mapped memory are not reliable over PCIe),
// then writes the details with plain stores.
struct DeviceErrorInfo {
  int32_t code;  // 0 = none; else an IndexError value
  int32_t pad;
  int64_t value;     // the offending index
  int64_t position;  // its flat position in the index tensor
  int64_t limit;     // the valid range is [0, limit)
  int32_t* lock;     // device memory; 0 = free
};
enum IndexError : int32_t {
  kNoError = 0,
  kEmbeddingId = 1,
  kCrossEntropyTarget = 2,
  kIndexSelect = 3,
  kIndexAdd = 4,
  kGather = 5,
  kScatterAdd = 6,
};

// ---- copy.cu ----
// dst[i] = cast(src[i]) over g (operand 0 = dst, 1 = src).
void launch_copy(const Geometry<2>& g, void* dst, DT dst_dtype, const void* src, DT src_dtype, cudaStream_t s);
// Fills n elements of elem_size bytes with the bit pattern `bits` (the value already cast on the host).
void launch_fill(void* dst, int64_t n, int elem_size, uint64_t bits, cudaStream_t s);
void launch_arange(void* dst, DT dtype, int64_t n, double start, double step, cudaStream_t s);
// uniform: lo + (hi - lo) * u; normal: mean + std * z (a = lo or mean, b = hi or std).
void launch_random(void* dst, DT dtype, int64_t n, uint64_t seed, uint64_t offset, double a, double b,
                   bool normal, cudaStream_t s);

// ---- elementwise.cu ----
// out = op(x) with p0, p1 as core/op_table.h documents (NaN = absent); operand 0 = out, 1 = x.
void launch_unary(UnaryOp op, DT dtype, const Geometry<2>& g, void* out, const void* x, double p0, double p1,
                  cudaStream_t s);
// out = op(a, b); a and b of dtype `dtype`, out of dtype (comparisons: b8).
void launch_binary(BinaryOp op, DT dtype, const Geometry<3>& g, void* out, const void* a, const void* b,
                   cudaStream_t s);
void launch_where(DT dtype, const Geometry<4>& g, void* out, const void* cond, const void* a, const void* b,
                  cudaStream_t s);
// out = a + b for f32 a and out and a 16-bit b of dtype b_dtype (operand 0 = out, 1 = a, 2 = b).
void launch_add_widening(DT b_dtype, const Geometry<3>& g, float* out, const float* a, const void* b, cudaStream_t s);
// x[i] *= scale[0] in place over n contiguous elements; scale is one element of x's compute type in
// device memory. Every block reads it first and returns when it is 1.
void launch_scale_by(DT dtype, void* x, int64_t n, const void* scale, cudaStream_t s);

// ---- reduce.cu ----
// Reduces rows of a contiguous x viewed as [K, R] (rows = true) or [R, K] (rows = false) into out[K].
// scratch_bytes(...) tells the host how much scratch a call needs; it passes that much.
size_t reduce_scratch_bytes(ReduceOp op, DT dtype, int64_t K, int64_t R, bool rows, int sm_count);
void launch_reduce(ReduceOp op, DT dtype, const void* x, int64_t K, int64_t R, bool rows, void* out, void* scratch,
                   int sm_count, cudaStream_t s);

// ---- norm.cu: softmax and layer norm, row kernels over the last dim of contiguous tensors ----
void launch_softmax(DT dtype, const void* x, void* y, int64_t rows, int64_t len, bool log, cudaStream_t s);
void launch_softmax_backward(DT dtype, const void* y, const void* gy, void* gx, int64_t rows, int64_t len,
                             bool log, cudaStream_t s);
// The residual branch a norm adds into its rows as it reads them: `branch` of branch_dtype (the
// rows' dtype, or 16 bits for f32 rows), the sums written to `sum` in the rows' dtype, each rounded
// as add rounds it. A null branch: the rows are normalised as they are.
struct NormBranch {
  DT branch_dtype;
  const void* branch = nullptr;
  void* sum = nullptr;
};
// x, w, b of `dtype` (w and b may be null), y of y_dtype (dtype, or 16-bit for f32 x); mean/rstd are
// f64 when stat_f64, else f32.
void launch_layer_norm(DT dtype, DT y_dtype, const void* x, NormBranch branch, const void* w, const void* b,
                       double eps, void* y, void* mean, void* rstd, bool stat_f64, int64_t rows, int64_t len,
                       cudaStream_t s);
size_t layer_norm_backward_scratch_bytes(DT dtype, int64_t rows, int64_t len);
// gy of gy_dtype (the forward's y_dtype), everything else of `dtype`; gw and gb may be null (not
// wanted); w may be null (no affine weight). `gathered` (may be null): the gradient x already
// holds, added into gx with each term rounded to `dtype` as add rounds it.
void launch_layer_norm_backward(DT dtype, DT gy_dtype, const void* x, const void* w, const void* mean,
                                const void* rstd, bool stat_f64, const void* gy, const void* gathered, void* gx,
                                void* gw, void* gb, int64_t rows, int64_t len, void* scratch, cudaStream_t s);

// RMSNorm: x and w of `dtype` (w may be null: no weight), y of y_dtype (dtype, or 16-bit for f32 x);
// rstd is f64 when stat_f64, else f32; branch as layer norm's.
void launch_rms_norm(DT dtype, DT y_dtype, const void* x, NormBranch branch, const void* w, double eps, void* y,
                     void* rstd, bool stat_f64, int64_t rows, int64_t len, cudaStream_t s);
size_t rms_norm_backward_scratch_bytes(DT dtype, int64_t rows, int64_t len);
// gy of gy_dtype (the forward's y_dtype), everything else of `dtype`; gw may be null (not wanted);
// w may be null (no weight); gathered as layer norm's.
void launch_rms_norm_backward(DT dtype, DT gy_dtype, const void* x, const void* w, const void* rstd, bool stat_f64,
                              const void* gy, const void* gathered, void* gx, void* gw, int64_t rows, int64_t len,
                              void* scratch, cudaStream_t s);

// ---- rope.cu: rotary position embeddings ----
// x and out are [B, H, T, D] with the strides given (in elements, unit last); cos and sin [T, D/2]
// contiguous in dtype's compute type (f64 for f64, else f32). inverse turns by the opposite angles.
struct RopeShape {
  int64_t B, H, T, D;
  int64_t x_strides[3];    // of B, H, T
  int64_t out_strides[3];
};
void launch_rope(DT dtype, const void* x, const void* cos, const void* sin, bool inverse, void* out,
                 const RopeShape& shape, cudaStream_t s);

// ---- attention.cu: causal flash attention ----
// One [B, H, T, hs] operand: its first element and its element strides over batch, head and
// position (the last stride is 1).
template <class P>
struct Heads {
  P data;
  int64_t sb, sh, st;
};
using HeadsIn = Heads<const void*>;
using HeadsOut = Heads<void*>;
// q [B, H, Tq, hs] against k, v [B, H, Tk, hs], Tk >= Tq: query i sits at position Tk - Tq + i and
// sees keys 0 .. Tk - Tq + i. The kernels read 16 bytes at a time: every operand's pointer is
// 16-byte aligned, its strides and hs are multiples of 16 bytes' worth of elements, and
// hs <= kAttentionMaxHeadSize (the host glue pads and copies what is not).
struct AttnShape {
  int64_t B, H, Tq, Tk, hs;
  float scale;  // of the scores q k^T
};
constexpr int64_t kAttentionMaxHeadSize = 128;
// out = softmax(scale q k^T + causal mask) v; lse [B, H, Tq] (f32, contiguous): each query's log
// of its softmax denominator. f32, bf16 and f16; 16-bit inputs compute in f32 (tensor cores with
// f32 accumulation) and round out once.
void launch_attention_forward(DT dtype, const AttnShape& s, HeadsIn q, HeadsIn k, HeadsIn v, HeadsOut out,
                              float* lse, cudaStream_t stream);
// gq, gk, gv from the forward's operands, out and lse, and gout; rowsums is scratch of B * H * Tq
// floats (rowsum(gout * out) of each query). dq_sum null: the split backward (dQ in a kernel of its
// own, deterministic); else scratch of B * H * Tq * hs floats for FlashAttention-2's one kernel,
// which sums dQ there with atomics (core/backend.h, AttentionBackward).
void launch_attention_backward(DT dtype, const AttnShape& s, HeadsIn q, HeadsIn k, HeadsIn v, HeadsIn out,
                               const float* lse, HeadsIn gout, HeadsOut gq, HeadsOut gk, HeadsOut gv,
                               float* rowsums, float* dq_sum, cudaStream_t stream);

// ---- tokens.cu: embedding and cross-entropy ----
void launch_embedding(DT dtype, const void* weight, int64_t vocab, int64_t dim, DT idx_dtype, const void* idx,
                      int64_t n, void* out, DeviceErrorInfo* err, cudaStream_t s);
size_t embedding_backward_scratch_bytes(int64_t vocab, int64_t n);
void launch_embedding_backward(DT dtype, DT idx_dtype, const void* idx, int64_t n, const void* gout,
                               void* gweight, int64_t vocab, int64_t dim, void* scratch, DeviceErrorInfo* err,
                               cudaStream_t s);
void launch_cross_entropy(DT dtype, const void* logits, int64_t rows, int64_t classes, DT t_dtype,
                          const void* targets, int64_t ignore_index, void* losses, DeviceErrorInfo* err,
                          cudaStream_t s);
// gloss[n * gloss_stride] is row n's incoming gradient (stride 0: one shared scalar).
void launch_cross_entropy_backward(DT dtype, const void* logits, int64_t rows, int64_t classes, DT t_dtype,
                                   const void* targets, int64_t ignore_index, const void* gloss,
                                   int64_t gloss_stride, void* glogits, DeviceErrorInfo* err, cudaStream_t s);
// The fused classifier: losses (compute type) and, when glogits is not null, the gradient rows
// scaled by weight[0] (compute type, device memory); glogits may equal logits.
void launch_cross_entropy_fused(DT dtype, const void* logits, int64_t rows, int64_t classes, DT t_dtype,
                                const void* targets, int64_t ignore_index, const void* weight, void* losses,
                                void* glogits, DeviceErrorInfo* err, cudaStream_t s);

// ---- index.cu ----
// Tensors are described as [outer, size, inner] around the indexed dim (x and out contiguous).
struct IndexShape {
  int64_t outer = 1, inner = 1;
  int64_t src_size = 0;  // size of the indexed dim in the tensor read from (or added into)
  int64_t idx_size = 0;  // number of indices
};
// out[o, j, i] = x[o, idx[j], i]
void launch_index_select(DT dtype, const void* x, const IndexShape& sh, DT idx_dtype, const void* idx, void* out,
                         DeviceErrorInfo* err, cudaStream_t s);
// out[o, idx[j], i] += src[o, j, i], each output line summed in order of j.
void launch_index_add(DT dtype, void* out, const IndexShape& sh, DT idx_dtype, const void* idx, const void* src,
                      DeviceErrorInfo* err, cudaStream_t s);
// gather: g walks out's (= idx's) shape with operands 0 = out, 1 = idx, 2 = x, where x's stride in
// the gathered dim is 0 (that coordinate comes from idx): out = x[offset + idx * x_dim_stride].
void launch_gather(DT dtype, const Geometry<3>& g, int64_t x_dim_stride, int64_t x_dim_size, DT idx_dtype,
                   void* out, const void* idx, const void* x, DeviceErrorInfo* err, cudaStream_t s);
// scatter_add: `lines` walks idx's shape without the scattered dim (operands 0 = idx, 1 = src,
// 2 = out); each line adds its `len` entries in order: out[.. idx[j] ..] += src[.. j ..].
struct ScatterLine {
  int64_t len = 0;          // idx's size in the scattered dim
  int64_t idx_stride = 0;   // strides along that dim
  int64_t src_stride = 0;
  int64_t out_stride = 0;
  int64_t out_size = 0;     // out's size in that dim: valid indices are [0, out_size)
};
void launch_scatter_add(DT dtype, const Geometry<3>& lines, const ScatterLine& line, DT idx_dtype, const void* idx,
                        const void* src, void* out, DeviceErrorInfo* err, cudaStream_t s);

// ---- optim.cu ----
struct AdamArgs {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay, amsgrad, maximize;
  double step;
};
// param and grad of dtype `dtype`, moments of dtype `state_dtype`; max_exp_avg_sq null unless amsgrad.
void launch_adam(DT dtype, DT state_dtype, void* param, const void* grad, void* exp_avg, void* exp_avg_sq,
                 void* max_exp_avg_sq, int64_t n, const AdamArgs& a, cudaStream_t s);
// One parameter of a fused step: step is its one-element f32 counter on the GPU.
struct AdamTensorPtrs {
  void* param;
  const void* grad;
  void* exp_avg;
  void* exp_avg_sq;
  void* max_exp_avg_sq;  // null unless amsgrad
  float* step;
  int64_t numel;
  void* copy;    // null, or a 16-bit copy of an f32 param that receives its updated value
  DT copy_dtype;  // bf16 or f16
};
// Every tensor has param dtype `dtype` and moments `state_dtype`; a.step is unused (each counter
// is incremented on the GPU, then read there).
void launch_adam_multi(DT dtype, DT state_dtype, const AdamTensorPtrs* tensors, int count, const AdamArgs& a,
                       cudaStream_t s);

// Checks cudaGetLastError after a launch; throws lathe::Error naming `what` (defined in runtime.cpp,
// so that .cu files need no lathe header).
void check_launch(const char* what);
// Throws lathe::Error "<what>: CUDA error <name>: <description>" unless err is cudaSuccess.
void check_cuda(cudaError_t err, const char* what);
// Throws lathe::Error: kernel `what` has no variant for dtype dt.
[[noreturn]] void fail_dtype(const char* what, DT dt);

}  // namespace lathe::cuda
