// The kernels a device provides. Ops (core/ops/) check their operands, allocate outputs and
// record autograd; then they call the backend of their device for the arithmetic. The CPU backend
// (core/cpu/) serves cpu and sim devices; cuda/ registers a CUDA backend at start-up.
//
// Conventions for every kernel:
//   - all tensors are on this backend's device (ops check before calling);
//   - inputs may be any strided view; outputs are freshly allocated and contiguous unless the
//     kernel says otherwise (copy writes into any strided destination);
//   - every backend implements every kernel of the list (LATHE_BACKEND_KERNELS); a dtype or case
//     a kernel cannot run throws an Error naming the kernel and the device.
// There is one virtual call per kernel launch, never per element.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/op_table.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace lathe {

// Hyperparameters of one Adam-family update, as PyTorch's single-tensor path computes it.
struct AdamParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW
  bool amsgrad = false;
  bool maximize = false;
};

// The epilogue of a linear layer's product (Backend::linear).
enum class LinearEpilogue { none, gelu };

// TF32 for f32 matrix products (`lathe train --tf32`): off by default, as in PyTorch (TF32 keeps
// f32's range but rounds the products' inputs to 10 bits of mantissa). Process-wide, like
// torch.backends.cuda.matmul.allow_tf32; a backend without TF32 units (the CPU) ignores it.
void set_allow_tf32(bool on);
bool allow_tf32();

// How the fused attention's backward sums dQ (`lathe train --attention-backward`). `split`, the
// default: dQ in one kernel and dK, dV in another, every element summed by one thread in a fixed
// order, so a run gives the same bits every time (bitwise resume counts on it). `atomic`:
// FlashAttention-2's one kernel over key tiles, which adds each tile's share of dQ with f32 atomics
// in whatever order the blocks finish: 5 tensor-core products where the split does 7, and dQ's last
// bits may differ from run to run. Process-wide, like allow_tf32; a backend without a fused
// attention backward (the CPU) ignores it.
enum class AttentionBackward { split, atomic };
void set_attention_backward(AttentionBackward how);
AttentionBackward attention_backward();
const char* attention_backward_name(AttentionBackward how);
// "split" or "atomic"; anything else is an error that names the choices.
AttentionBackward parse_attention_backward(std::string_view name);

// Kernels that a backend may fuse from several ops; an op takes the fused one where its backend
// declares it (Backend::fuses) and composes smaller kernels elsewhere.
enum class FusedKernel {
  causal_attention,  // Backend::causal_attention and its backward; `width`: the head size
};

// Every kernel a backend provides, listed once: K(result, name, parameters). Backend (below)
// declares each one pure virtual; CpuBackend (core/cpu/cpu_backend.h) and CudaBackend
// (cuda/cuda_backend.h) declare their overrides from the same list, so a kernel's signature is
// written here and at each backend's definition of it, nowhere else. A comment before an entry
// says what the kernel computes.
#define LATHE_BACKEND_KERNELS(K) \
  K(std::string, name, () const) \
  /* Whether this backend runs `kernel` fused for inputs of `dtype`; `width` is the kernel's inner \
     size where its fused form has a limit (see FusedKernel), 0 where it has none. */ \
  K(bool, fuses, (FusedKernel kernel, DType dtype, int64_t width) const) \
  \
  /* ---- memory ---- */ \
  K(Allocator&, allocator, (int index)) \
  K(int, device_count, () const) \
  /* Copies raw bytes between the host and device `index`. */ \
  K(void, copy_to_host, (void* dst, const void* src, size_t nbytes, int index)) \
  K(void, copy_from_host, (void* dst, const void* src, size_t nbytes, int index)) \
  K(void, synchronize, (int index)) \
  \
  /* ---- data movement ---- */ \
  /* dst[i] = cast(src[i]) for every element; src and dst have the same shape (src may be a \
     broadcast view), any strides, any dtypes, both on this device. */ \
  K(void, copy, (const Tensor& src, const Tensor& dst)) \
  K(void, fill, (const Tensor& dst, double value)) /* dst contiguous */ \
  K(void, arange, (const Tensor& dst, double start, double step)) \
  /* Counter-based random numbers: element i depends only on (seed, offset + i). */ \
  K(void, random_uniform, (const Tensor& dst, uint64_t seed, uint64_t offset, double lo, double hi)) \
  K(void, random_normal, (const Tensor& dst, uint64_t seed, uint64_t offset, double mean, double std)) \
  \
  /* ---- elementwise (the ops of core/op_table.h) ---- */ \
  K(void, unary, (UnaryOp op, const Tensor& x, const Tensor& out, double p0 = 0, double p1 = 0)) \
  /* a and b are already broadcast (expanded) to out's shape and share a dtype, except for add, \
     where b may be 16-bit while a and out are f32 (a 16-bit residual branch added to the f32 \
     stream: b is widened as it is read, no cast kernel first). */ \
  K(void, binary, (BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out)) \
  K(void, where, (const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out)) \
  /* x[i] = x[i] * s in place, for a contiguous floating x and a one-element s on the device (f32, \
     or f64 for f64 x), computed in the compute type and rounded once. The kernel reads s, the \
     host never does; x is left as it is when s is 1. */ \
  K(void, scale_by, (const Tensor& x, const Tensor& s)) \
  \
  /* ---- reductions ---- */ \
  /* Reduces x over `dims` (sorted, unique); out has x's shape with those dims set to 1. \
     argmax/argmin reduce one dim and write i64. */ \
  K(void, reduce, (ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out)) \
  \
  /* ---- linear algebra ---- */ \
  /* out[..., M, N] = a[..., M, K] @ b[..., K, N]; a and b are expanded to out's batch dims and \
     share a dtype. out has it too, or is f32 for 16-bit a and b (the sums are f32 then, and are \
     not rounded to 16 bits: a weight gradient lands in its f32 master gradient as it is). */ \
  K(void, matmul, (const Tensor& a, const Tensor& b, const Tensor& out)) \
  \
  /* ---- linear layers (nn/functional.h) ---- */ \
  /* out [R, N] = x [R, K] @ weight [N, K]^T + bias [N] (bias may be undefined) for x with a unit \
     last stride and weight and bias contiguous, all of one dtype; out contiguous. The sum over K \
     and the bias add are in the compute type (f32 for 16-bit operands), and the result is rounded \
     once. With LinearEpilogue::gelu, `pre` [R, N] (contiguous) gets that rounded sum, the GELU's \
     input kept for the backward, and out the GELU (tanh approximation) of the unrounded sum, \
     rounded once: cuBLASLt's epilogues. */ \
  K(void, linear, (const Tensor& x, const Tensor& weight, const Tensor& bias, LinearEpilogue epilogue, \
                   const Tensor& out, const Tensor& pre)) \
  /* A linear layer's parameter gradients: gweight [N, K] = g^T @ x and gbias [N] = the sum of g's \
     rows, for g [R, N] and x [R, K] of one dtype with unit last strides. gweight and gbias are f32 \
     for 16-bit g and x (an f32 master weight's gradient, never rounded to 16 bits), else of g's \
     dtype, contiguous; either may be undefined. */ \
  K(void, linear_backward_weight, (const Tensor& g, const Tensor& x, const Tensor& gweight, const Tensor& gbias)) \
  \
  /* ---- neural-network kernels (last dim) ---- */ \
  K(void, softmax, (const Tensor& x, const Tensor& out, bool log)) \
  K(void, softmax_backward, (const Tensor& y, const Tensor& gy, const Tensor& gx, bool log)) \
  /* Causal attention fused into one pass (core/ops/nn_attention.cpp), without a [B, H, Tq, Tk] \
     tensor: out = softmax(scale q k^T + causal mask) v. q [B, H, Tq, hs]; k, v [B, H, Tk, hs] \
     with Tk >= Tq, query i sitting at position Tk - Tq + i (Tk > Tq: the queries after a KV \
     cache's keys), so it sees keys 0 .. Tk - Tq + i. Inputs have any strides with a unit last \
     one; out [B, H, Tq, hs] has any strides with a unit last one; lse [B, H, Tq] contiguous, each \
     query's log of its softmax denominator, kept for the backward, in the compute dtype (f32, f64 \
     for f64). A 16-bit q computes in f32 and rounds out once. Called only where the backend \
     `fuses(FusedKernel::causal_attention, dtype, head size)`; elsewhere the op composes matmul \
     and softmax. */ \
  K(void, causal_attention, (const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out, \
                             const Tensor& lse)) \
  /* gq [B, H, Tq, hs], gk and gv [B, H, Tk, hs], any strides with a unit last one; every \
     element is written. */ \
  K(void, causal_attention_backward, (const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, \
                                      const Tensor& lse, const Tensor& gout, double scale, const Tensor& gq, \
                                      const Tensor& gk, const Tensor& gv)) \
  /* weight and bias (x's dtype) may be undefined; mean and rstd have shape x.shape[:-1] and dtype \
     f32 (f64 when x is f64, so that gradchecks see no f32 rounding). out has x's dtype, or a \
     16-bit one for an f32 x: the f32 stream normalised straight into the dtype of the product \
     that reads it. With `residual` defined (x's shape; x's dtype, or 16 bits for an f32 x), the \
     rows normalised are x + residual, written to `sum` (x's dtype) as add writes them: the \
     residual stream's add fused into the norm that reads it. */ \
  K(void, layer_norm, (const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias, \
                       double eps, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& sum)) \
  /* x is the rows normalised (the forward's sum, with a residual); gy has the forward output's \
     dtype, gx, gweight and gbias x's; gweight/gbias may be undefined (no affine, or not needed). \
     With `gathered` defined (x's shape and dtype: the gradient the stream already holds), gx is \
     gathered + the norm's own gradient, rounded to x's dtype in turn as add would. */ \
  K(void, layer_norm_backward, (const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd, \
                                const Tensor& gy, const Tensor& gathered, const Tensor& gx, const Tensor& gweight, \
                                const Tensor& gbias)) \
  /* RMSNorm of contiguous rows: weight may be undefined; rstd has shape x.shape[:-1] and dtype \
     f32 (f64 for f64 x), as layer_norm's statistics. out has x's dtype, or a 16-bit one for an \
     f32 x; residual and sum as layer_norm's. */ \
  K(void, rms_norm, (const Tensor& x, const Tensor& residual, const Tensor& weight, double eps, const Tensor& out, \
                     const Tensor& rstd, const Tensor& sum)) \
  /* gy has the forward output's dtype, gx and gweight x's; gweight may be undefined (no weight, \
     or not needed); gathered as layer_norm_backward's. */ \
  K(void, rms_norm_backward, (const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& gy, \
                              const Tensor& gathered, const Tensor& gx, const Tensor& gweight)) \
  /* Rotary embeddings (core/ops/nn_rope.cpp): x and out [B, H, T, D], any strides with a unit \
     last one; cos and sin [T, D/2] contiguous, in x's compute type. `inverse` turns by the \
     opposite angles, which is the backward (a rotation's transpose is its inverse). */ \
  K(void, rope, (const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out)) \
  /* out[n, :] = weight[idx[n], :]; idx i32/i64 of any shape; out is idx.shape + [C]. */ \
  K(void, embedding, (const Tensor& weight, const Tensor& idx, const Tensor& out)) \
  /* gweight (zeroed by the caller) += scatter of gout rows; deterministic. */ \
  K(void, embedding_backward, (const Tensor& idx, const Tensor& gout, const Tensor& gweight)) \
  /* Per-row loss of logits [N, V] against targets [N]; rows whose target is ignore_index get 0. */ \
  K(void, cross_entropy, (const Tensor& logits, const Tensor& targets, int64_t ignore_index, const Tensor& losses)) \
  /* glogits[n, :] = (softmax(logits[n]) - onehot(targets[n])) * gloss[n]  (0 for ignored rows) */ \
  K(void, cross_entropy_backward, (const Tensor& logits, const Tensor& targets, int64_t ignore_index, \
                                   const Tensor& gloss, const Tensor& glogits)) \
  /* The fused classifier (llm.c's): one pass over each row of logits [N, V] (contiguous) gives \
     its loss against targets[n] in losses [N] (f32, or f64 for f64 logits; 0 for ignored rows) \
     and, when glogits is defined, its gradient row (softmax(logits[n]) - onehot(targets[n])) * \
     weight (0 for ignored rows), computed in the compute type and rounded once to glogits' \
     dtype, the logits'. weight is a one-element tensor of losses' dtype on the device, read by \
     the kernel (one over the rows counted, which the host does not know). glogits may be the \
     logits themselves: each row is read whole before any of it is written. */ \
  K(void, cross_entropy_fused, (const Tensor& logits, const Tensor& targets, int64_t ignore_index, \
                                const Tensor& weight, const Tensor& losses, const Tensor& glogits)) \
  \
  /* ---- indexing ---- */ \
  /* out = x.index_select(dim, idx) (idx 1-D) */ \
  K(void, index_select, (const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out)) \
  /* out (pre-filled by caller) .index_add_(dim, idx, src) */ \
  K(void, index_add, (const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src)) \
  /* out = x.gather(dim, idx) (idx has out's shape) */ \
  K(void, gather, (const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out)) \
  /* out (pre-filled by caller) .scatter_add_(dim, idx, src) */ \
  K(void, scatter_add, (const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src)) \
  \
  /* ---- optimizer updates (in place on param and state; contiguous tensors) ---- */ \
  /* Called through the op-layer entries of core/ops/adam_update.cpp, which check every operand \
     and say why an optimizer's kernel is declared here. One Adam/AdamW step for one parameter \
     (core/adam_step.h). `step` is the step count after increment; the plain path passes it from \
     the host. max_exp_avg_sq is undefined unless amsgrad. */ \
  K(void, adam_update, (const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, \
                        const Tensor& max_exp_avg_sq, double step, const AdamParams& p)) \
  /* The fused (multi-tensor) Adam/AdamW step over many parameters in one pass, with the same \
     per-element arithmetic as adam_update (same bits on the CPU). `steps` are one-element f32 \
     tensors on the parameters' device (the fused path keeps the step counter with its \
     parameter); the kernel increments each before using it, so the host never reads it. \
     max_exp_avg_sqs is empty unless amsgrad. copies[i], where defined, receives f32 params[i] as \
     updated, rounded to its 16-bit dtype. All other vectors have one entry per parameter. */ \
  K(void, adam_update_multi, (const std::vector<Tensor>& params, const std::vector<Tensor>& grads, \
                              const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs, \
                              const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps, \
                              const AdamParams& p, const std::vector<Tensor>& copies))

// How Backend declares each kernel of the list, and how a backend declares its override.
#define LATHE_BACKEND_PURE(result, name, params) virtual result name params = 0;
#define LATHE_BACKEND_OVERRIDE(result, name, params) result name params override;

class Backend {
 public:
  virtual ~Backend() = default;
  LATHE_BACKEND_KERNELS(LATHE_BACKEND_PURE)
};

// The backend serving a device; throws if the device's backend is not compiled in or the index
// does not exist.
Backend& backend_for(Device d);
// Called by cuda/ during static initialisation.
void register_backend(DeviceType type, Backend* backend);
bool backend_available(DeviceType type);

}  // namespace lathe
