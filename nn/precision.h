// The mixed-precision policy: which dtype each class of the model's ops writes, in one table.
//
// Parameters always stay f32 (master weights); so do their gradients and the optimizer state. In a
// 16-bit run (bf16 or fp16) the matrix products and the activations between them are 16-bit (each
// 16-bit op computes in f32 from its 16-bit inputs and rounds its result once, on every backend),
// while the residual stream, the embeddings, the LayerNorm statistics and softmax stay f32:
//
//   op class           f32    bf16   fp16    where the model asks
//   matmul             f32    bf16   f16     Linear (input; weight and bias read from f32 copies cast
//                                            once per step, an untied lm_head's too); attention's
//                                            q, k, v, RoPE and QK-norm on that q and k
//   activation         f32    bf16   f16     GELU (the epilogue of c_fc's product), ReLU^2, SwiGLU
//   softmax            f32    f32    f32     attention scores and softmax (inside the fused kernel), sampling
//   layer_norm         f32    bf16   f16     ln_1, ln_2, ln_f (LayerNorm or RMSNorm): statistics in f32
//                                            from the f32 stream, output written in the dtype of the
//                                            product that reads it
//   residual           f32    f32    f32     the residual stream: x + attn(...), x + mlp(...), each
//                                            branch's 16-bit output widened as the add reads it
//   embedding          f32    f32    f32     wte(idx) + wpe(pos)
//   loss               f32    bf16   f32     logits, and their soft-capping, handed to the fused
//                                            classifier (f32 arithmetic inside); fp16 keeps f32 logits,
//                                            since its unscaled gradient (probabilities / rows, ~1e-9)
//                                            underflows f16
//
// Fused attention (core/ops/nn_attention.cpp) takes q, k, v in the matmul dtype and computes the
// scores, softmax and accumulators in f32, rounding its output once: both classes in one kernel.
// Only attention dropout, or a backend without the kernel, composes it with the casts above.
//
// The model's forward asks the table at each of those places (`policy.cast(OpClass::matmul, x)`,
// `policy.output_dtype(...)` for an op that writes the dtype itself), so the dtypes are decided here
// and nowhere else. A cast is an autograd op whose backward casts the gradient back to the source
// dtype; the products take the f32 master weights themselves as autograd inputs (their 16-bit
// copies from `weight()`), so the weights' gradients are f32 sums, never rounded to 16 bits.
//
// The policy is a property of a run, not of the model: it is not part of GPTConfig (a model file
// or checkpoint is the same model in any precision); `lathe train` stores it with the run's
// options, and `lathe sample --precision` picks it for generation.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

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

// Parameters cast to a 16-bit dtype once per version of their memory (Storage::version): an
// optimizer step, a checkpoint load or a move makes the next use cast again, and nothing else does.
// So a step casts each weight once however many products read it (the tied wte / lm_head weight
// once for both), and generation casts nothing after its first token; a fused AdamW connected to
// the cache (train::connect_weight_copies) writes the new copies itself, and training casts none
// after its first step. Entries hold no parameter alive and never match another parameter at a
// freed one's address.
class WeightCastCache {
 public:
  // p in `dtype` (not an autograd node); cast now unless the copy of this version is kept.
  Tensor get(const Tensor& p, DType dtype);
  size_t size() const { return entries_.size(); }
  // For an update that writes p's copy as it writes p (the fused AdamW, through optim::ParamCopies):
  // a new tensor of the kept copy's dtype and p's shape, or undefined when no copy of p is kept.
  // A new tensor, not the kept one: a graph that still holds the old copy keeps the old values.
  Tensor fresh_copy(const Tensor& p) const;
  // Keeps `copy` as p's copy of p's current version (after the update that wrote both).
  void put(const Tensor& p, Tensor copy);

 private:
  struct Entry {
    std::weak_ptr<TensorImpl> param;
    std::weak_ptr<Storage> storage;
    uint64_t version = 0;
    Tensor copy;
    // A copy of p itself (not of another parameter since freed at the same address), of any version.
    bool holds_copy_of(const Tensor& p) const {
      return param.lock() == p.impl_ptr() && storage.lock() == p.storage() && copy.defined();
    }
  };
  std::unordered_map<const TensorImpl*, Entry> entries_;
};

class PrecisionPolicy {
 public:
  PrecisionPolicy(Precision p = Precision::f32) : precision_(p) {}
  Precision precision() const { return precision_; }
  // The table above: the dtype op class `c` writes.
  DType dtype(OpClass c) const;
  // x in the dtype of `c` (x itself when it already is; an autograd cast otherwise). Undefined
  // tensors (an absent bias) pass through. The f32 policy casts nothing: a model computes in its
  // parameters' dtype (f32, or f64 for gradchecks), exactly as without a policy.
  Tensor cast(OpClass c, const Tensor& x) const;
  // The dtype an op of class `c` that writes its own output (LayerNorm into 16 bits) writes, for an
  // op that would write `natural` without a policy: the table's, or `natural` under f32.
  DType output_dtype(OpClass c, DType natural) const;
  // The parameter p as the products read it: its copy in the matmul dtype, from the weight cast
  // cache. Undefined under f32 (the products read p itself) and for an undefined p.
  Tensor weight(const Tensor& p) const;
  // The cache behind weight(), for tests that count its casts, and for an optimizer that writes the
  // copies itself (the trainer connects the two).
  const WeightCastCache& weight_cache() const { return weights_; }
  WeightCastCache& weight_cache() { return weights_; }

 private:
  Precision precision_;
  mutable WeightCastCache weights_;
};

// Runs every 16-bit kernel the table needs (products, LayerNorm, the fused classifier, elementwise,
// copies) once on a tiny tensor on `device`, so that a backend without a 16-bit path is one clear
// error before a run starts:
// "<what> fp16: the cuda backend has no f16 path for <kernel> (...)". Nothing to check for f32.
void check_precision_supported(Precision p, Device device, const std::string& what = "--precision");

}  // namespace lathe::nn
