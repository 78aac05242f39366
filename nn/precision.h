// The mixed-precision policy: which dtype each class of the model's ops runs in, in one table.
//
// Parameters always stay f32 (master weights); so do their gradients and the optimizer state. In a
// 16-bit run (bf16 or fp16) the matrix products and the activations between them run in the
// 16-bit type (each 16-bit op computes in f32 from its 16-bit inputs and rounds its result once,
// on every backend), while LayerNorm, softmax, cross-entropy, the residual stream and the
// embeddings stay f32:
//
//   op class           f32    bf16   fp16    where the model asks
//   matmul             f32    bf16   f16     Linear (input, weight, bias); attention's q, k, v,
//                                            RoPE and QK-norm on that q and k
//   activation         f32    bf16   f16     GELU, ReLU^2, SwiGLU (between c_fc and c_proj)
//   softmax            f32    f32    f32     attention scores and softmax (inside the fused kernel)
//   layer_norm         f32    f32    f32     ln_1, ln_2, ln_f, LayerNorm or RMSNorm (statistics in f32)
//   residual           f32    f32    f32     the residual stream: x + attn(...), x + mlp(...)
//   embedding          f32    f32    f32     wte(idx) + wpe(pos)
//   loss               f32    f32    f32     logits handed to cross-entropy and to sampling (and their
//                                            soft-capping)
//
// Fused attention (core/ops/nn_attention.cpp) takes q, k, v in the matmul dtype and computes the
// scores, softmax and accumulators in f32, rounding its output once: both classes in one kernel.
// Only attention dropout, or a backend without the kernel, composes it with the casts above.
//
// The model's forward asks the table at each of those places (`policy.cast(OpClass::matmul, x)`),
// so the casts are here and nowhere else; the cast is an autograd op whose backward casts the
// gradient back to the source dtype, so the f32 master weights receive f32 gradients.
//
// The policy is a property of a run, not of the model: it is not part of GPTConfig (a model file
// or checkpoint is the same model in any precision); `lathe train` stores it with the run's
// options, and `lathe sample --precision` picks it for generation.
#pragma once

#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace lathe::nn {

enum class Precision { f32, bf16, fp16 };

// "f32", "bf16", "fp16"; parse throws an Error naming `what` (e.g. "--precision") and the choices.
const char* precision_name(Precision p);
Precision parse_precision(const std::string& name, const std::string& what = "precision");
// The 16-bit storage type of a precision (f32 for f32).
DType low_dtype(Precision p);
// Whether the precision needs a loss scaler (fp16's narrow exponent range; bf16 has f32's).
inline bool needs_loss_scaling(Precision p) { return p == Precision::fp16; }

enum class OpClass { matmul, activation, softmax, layer_norm, residual, embedding, loss };
const char* op_class_name(OpClass c);

class PrecisionPolicy {
 public:
  PrecisionPolicy(Precision p = Precision::f32) : precision_(p) {}
  Precision precision() const { return precision_; }
  // The table above: the dtype op class `c` runs in.
  DType dtype(OpClass c) const;
  // x in the dtype of `c` (x itself when it already is; an autograd cast otherwise). Undefined
  // tensors (an absent bias) pass through. The f32 policy casts nothing: a model computes in its
  // parameters' dtype (f32, or f64 for gradchecks), exactly as without a policy.
  Tensor cast(OpClass c, const Tensor& x) const;

 private:
  Precision precision_;
};

// Runs every 16-bit kernel the table needs (matmul, elementwise, copies) once on a tiny tensor on
// `device`, so that a backend without a 16-bit path is one clear error before a run starts:
// "<what> fp16: the cuda backend has no f16 path for <kernel> (...)". Nothing to check for f32.
void check_precision_supported(Precision p, Device device, const std::string& what = "--precision");

}  // namespace lathe::nn
