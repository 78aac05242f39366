// Every differentiable op of lathe. Each op checks its operands (device, dtype, shape), runs the
// backend kernel of its device, and records its backward rule beside its forward (core/ops/*.cpp).
#pragma once

#include <optional>
#include <vector>

#include "core/backend.h"
#include "core/random.h"
#include "core/tensor.h"

namespace lathe {

// ---- elementwise binary, with broadcasting (core/ops/binary.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// comparisons: b8 results, no gradient
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// scalar forms keep the tensor's dtype
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double p);

// ---- elementwise unary (core/ops/unary.cpp) ----
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);      // tanh approximation, as GPT-2
Tensor gelu_erf(const Tensor& x);  // exact: x Phi(x) (PyTorch's approximate="none")
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor log_sigmoid(const Tensor& x);  // log(sigmoid(x)), without overflow or cancellation
Tensor silu(const Tensor& x);  // x * sigmoid(x)
Tensor squared_relu(const Tensor& x);  // relu(x)^2
// Logit soft-capping: cap * tanh(x / cap), for a positive finite cap.
Tensor softcap(const Tensor& x, double cap);
Tensor abs(const Tensor& x);
Tensor square(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// ---- selection (core/ops/where.cpp) ----
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions over dims; an empty dims list means all dims (core/ops/reduce.cpp) ----
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);  // values
Tensor max(const Tensor& x);                                     // over everything
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
// Variance with Bessel's correction by default (correction = 1), as torch.var.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false, int64_t correction = 1);

// ---- linear algebra (core/ops/matmul.cpp) ----
// Batched matmul with broadcasting of the batch dims; 1-D operands as in torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- neural-network ops (core/ops/nn_*.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// LayerNorm over the last dim; weight and bias may be undefined. out_dtype (default: x's) may be
// 16-bit for an f32 x: the statistics stay f32 and the output is rounded once into that dtype (the
// input of the product that follows, in a 16-bit run); the backward then takes a 16-bit gradient
// and gives x an f32 one.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                  std::optional<DType> out_dtype = std::nullopt);
// RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * weight (weight may be undefined), as
// torch.nn.functional.rms_norm. Statistics in f32 (f64 for f64 input) whatever the input dtype.
// out_dtype as layer_norm's: a 16-bit output of an f32 x, rounded once from the f32 result.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-5,
                std::optional<DType> out_dtype = std::nullopt);
// The residual stream's add fused into the norm that reads it: `sum` is add(x, branch) and `normed`
// its norm, both bitwise what add and the norm give, from one pass over the rows (branch of x's
// shape, in x's dtype or 16 bits for an f32 x; other dtypes are added apart first). Both norms'
// backwards also add the gradient their input already holds into their own, in the same pass.
struct SumAndNorm {
  Tensor sum, normed;
};
SumAndNorm add_layer_norm(const Tensor& x, const Tensor& branch, const Tensor& weight, const Tensor& bias,
                          double eps = 1e-5, std::optional<DType> out_dtype = std::nullopt);
SumAndNorm add_rms_norm(const Tensor& x, const Tensor& branch, const Tensor& weight, double eps = 1e-5,
                        std::optional<DType> out_dtype = std::nullopt);
// Rotary position embeddings in the rotate-half convention (GPT-NeoX, Llama, nanochat): each head
// vector x of size D turns its halves (x1, x2) = (x[:D/2], x[D/2:]) by its position's angles,
//   out = (x1 cos - x2 sin, x2 cos + x1 sin).
// x [B, H, T, D] (D even; any strides, unit last), cos and sin [T, D/2]: row t holds the angles
// of x's position t, in x's compute type (f32 for f32, bf16 and f16; f64 for f64); they are
// constants (no gradient). Returns [B, H, T, D], a view of [B, T, H, D] storage like
// causal_attention's output, so that heads side by side again cost no copy.
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin);
// softmax(scale q k^T + causal mask) v for q, k, v [B, H, T, hs] of one floating dtype (query i
// sees keys 0..i), as torch's scaled_dot_product_attention(is_causal=True, scale=scale). k and v
// may hold more positions than q, [B, H, Tk, hs] with Tk > T: the queries then come after the
// first Tk - T keys (a KV cache), query i seeing keys 0..Tk - T + i. Where the backend fuses it
// (Backend::fuses: the CPU in every float dtype, CUDA in f32, bf16 and f16 for head sizes up to
// 128) one kernel keeps no [B, H, T, Tk] tensor (core/cpu/attention.cpp, cuda/attention.cu), a
// 16-bit one computing in f32 and rounding its results once; elsewhere it is composed of matmul
// and softmax. Returns [B, H, T, hs]; the fused path's is a view of [B, T, H, hs] storage, so that
// putting the heads side by side again (transpose(1, 2), then reshape) copies nothing.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale);
// The same for q, k and v side by side in one [B, T, 3C] tensor (a qkv projection's output), with
// n_head heads: returns [B, T, C], the heads side by side. Its gradient is one [B, T, 3C] tensor
// the backward kernel writes whole, where three head views' gradients would each be scattered
// into a zeroed [B, T, 3C] tensor and summed.
Tensor causal_attention_qkv(const Tensor& qkv, int64_t n_head, double scale);
// weight [V, C], idx i32/i64 any shape -> idx.shape + [C]; ids out of range are an error.
Tensor embedding(const Tensor& weight, const Tensor& idx);
// Mean cross-entropy of logits [N, V] (or [..., V]) against targets [N] (or [...]); rows whose
// target equals ignore_index do not count. Targets out of range are an error.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// The same mean with its gradient computed in the same pass over the logits (llm.c's fused
// classifier): the forward writes the gradient for an upstream gradient of 1, which the backward
// multiplies by the actual one on the device (nothing to do when it is 1), so neither probabilities
// nor logits are kept between the two. The loss is f32 for f32 and 16-bit logits (whose arithmetic
// is f32) and f64 for f64; the gradient has the logits' dtype. Logits handed over (a temporary or
// std::move) whose memory nothing else holds are overwritten by their gradient, so that a training
// step holds one [N, V] tensor where it held two. A second backward through it is refused.
Tensor fused_cross_entropy(Tensor logits, const Tensor& targets, int64_t ignore_index = -100);
// Inverted dropout: zeroes with probability p and scales the rest by 1/(1-p). `gen` is advanced.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

// ---- joining and splitting (core/ops/join.cpp) ----
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);

// ---- indexing (core/ops/index.cpp) ----
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx);

// ---- fused optimizer updates, in place (core/ops/adam_update.cpp) ----
// One Adam/AdamW step of one parameter, as PyTorch's single-tensor path; `step` is the count
// after increment, from the host. max_exp_avg_sq is undefined unless p.amsgrad.
void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, double step, const AdamParams& p);
// The same step over many parameters of one device in one pass; `steps` are one-element f32
// counters on that device, incremented by the kernel (the host never reads them). `copies`, empty
// or one per parameter: where defined, a bf16 or f16 tensor of an f32 parameter's shape that
// receives the updated parameter rounded to nearest even, in the same pass (the 16-bit weights a
// mixed-precision forward reads, without a cast pass after the step).
void adam_update_multi(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                       const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                       const AdamParams& p, const std::vector<Tensor>& copies = {});

// ---- operators ----
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }

// ---- checks shared by ops ----
// Throws unless every defined tensor is on one device; the message names the op and each device.
void check_same_device(const char* op, std::initializer_list<Tensor> ts);
void check_floating(const char* op, const Tensor& t, const char* what = "input");
// Throws unless an op of the op table with dtype class `dtypes` is defined for t's dtype.
void check_op_dtype(const char* op, OpDTypes dtypes, const Tensor& t);

}  // namespace lathe
