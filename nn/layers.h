// The basic layers, with PyTorch's parameter names and layouts so that state dicts match:
// Linear (weight [out, in], bias [out]), Embedding (weight [num, dim]), the norms LayerNorm
// (weight, bias [dim]) and RMSNorm (weight [dim]), Dropout and GELU (no parameters).
//
// Constructors create parameters with placeholder values (zeros, the norms' ones); the model
// that owns a layer initialises it (GPT does GPT-2's init), so random numbers come from one place.
#pragma once

#include <memory>

#include "core/ops.h"
#include "core/random.h"
#include "nn/functional.h"
#include "nn/module.h"
#include "nn/precision.h"

namespace lathe::nn {

// The mixed-precision policy a layer follows (nn/precision.h), shared by every layer of a model so
// that GPT::set_precision changes them all; a layer without one (the default) casts nothing.
class PolicyRef {
 public:
  PolicyRef() = default;
  explicit PolicyRef(std::shared_ptr<const PrecisionPolicy> p) : p_(std::move(p)) {}
  Tensor cast(OpClass c, const Tensor& x) const { return p_ ? p_->cast(c, x) : x; }
  DType output_dtype(OpClass c, DType natural) const { return p_ ? p_->output_dtype(c, natural) : natural; }
  // The parameter's copy in the products' dtype (PrecisionPolicy::weight); undefined without one.
  Tensor weight(const Tensor& p) const { return p_ ? p_->weight(p) : Tensor(); }

 private:
  std::shared_ptr<const PrecisionPolicy> p_;
};

struct LayerOptions {
  DType dtype = DType::f32;  // the parameters' dtype
  Device device = Device::cpu();
  PolicyRef precision;       // where the forward casts (none: computes in the inputs' dtype)
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, LayerOptions opt = {});
  // x [..., in] -> [..., out]
  Tensor forward(const Tensor& x) const;
  // GELU(forward(x)) in one pass over the output (the product's epilogue, nn/functional.h).
  Tensor forward_gelu(const Tensor& x) const;

  // Makes this layer's weight the same tensor as `w` (weight tying, e.g. lm_head and wte).
  void tie_weight(const Tensor& w);

  int64_t in_features, out_features;
  Tensor weight;  // [out, in]
  Tensor bias;    // [out], undefined without bias

 private:
  // The product runs in the policy's matmul dtype: the input cast, the weight and bias read from
  // their copies in the weight cast cache (once per step), the gradients f32 for the f32 masters.
  PolicyRef precision_;
  WeightCopies copies() const { return {precision_.weight(weight), precision_.weight(bias)}; }
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, LayerOptions opt = {});
  // ids (i32/i64, any shape) -> ids.shape + [dim]
  Tensor forward(const Tensor& ids) const;

  int64_t num_embeddings, embedding_dim;
  Tensor weight;  // [num, dim]
};

// A normalisation over the last dim, so that a model's norms (GPT's ln_1, ln_2, ln_f) may be either
// kind behind one interface. Both read the f32 stream, keep f32 statistics, and write the policy's
// layer_norm dtype: 16 bits in a 16-bit run, the dtype of the product that reads the output.
// The residual stream with the last branch not yet added to it, so that the add runs inside the
// norm that reads the stream next (add_layer_norm, add_rms_norm): stream + branch is the stream.
struct Residual {
  Tensor stream;
  Tensor branch;  // undefined: nothing pending
  // The stream itself, for a reader other than a norm.
  Tensor sum() const;
  // Positions [start, start + length) of dim `d` of both parts.
  Residual narrow(int64_t d, int64_t start, int64_t length) const;
};

class Norm : public Module {
 public:
  virtual Tensor forward(const Tensor& x) const = 0;
  // The stream with its pending branch added, and its norm: both in one pass over the rows, each
  // bitwise what add and forward give.
  virtual SumAndNorm forward(const Residual& r) const = 0;

  int64_t dim;
  double eps;
  Tensor weight;  // [dim], ones; undefined without weight

 protected:
  // Registers the weight (unless `with_weight` is false); checks dim.
  Norm(const char* kind, int64_t dim, double eps, bool with_weight, LayerOptions opt);
  // x, after checking that it ends in dim, as the residual stream (the policy's residual dtype).
  Tensor input(const char* kind, const Tensor& x) const;
  // The dtype the norm writes for that stream (the policy's layer_norm class).
  DType output_dtype(const Tensor& stream) const;

 private:
  PolicyRef precision_;  // reads the f32 stream, writes the policy's layer_norm dtype (the next product's)
};

class LayerNorm : public Norm {
 public:
  // Without `weight`, the norm is not scaled (no weight parameter at all).
  LayerNorm(int64_t dim, bool bias = true, double eps = 1e-5, LayerOptions opt = {}, bool weight = true);
  Tensor forward(const Tensor& x) const override;
  SumAndNorm forward(const Residual& r) const override;

  Tensor bias;  // [dim], zeros; undefined without bias
};

// x / sqrt(mean(x^2) + eps) * weight (Llama, nanochat, modded-nanogpt); no bias, no centring.
class RMSNorm : public Norm {
 public:
  RMSNorm(int64_t dim, bool weight = true, double eps = 1e-5, LayerOptions opt = {});
  Tensor forward(const Tensor& x) const override;
  SumAndNorm forward(const Residual& r) const override;
};

enum class NormKind { layer_norm, rms_norm };
const char* norm_kind_name(NormKind k);  // "layer_norm", "rms_norm"
// The norm of a kind, eps 1e-5 for both (nanoGPT's LayerNorm; Llama 2's RMSNorm); `bias` applies
// to LayerNorm only.
std::unique_ptr<Norm> make_norm(NormKind kind, int64_t dim, bool weight, bool bias, LayerOptions opt);

// Inverted dropout. Its random numbers come from a Generator shared with the model that owns it,
// so a model's dropout masks are reproducible from one seed (and a checkpoint's two integers).
class Dropout : public Module {
 public:
  Dropout(double p, std::shared_ptr<Generator> gen);
  // The identity in eval mode or when p == 0 (and then the generator does not advance).
  Tensor forward(const Tensor& x) const;

  double p;

 private:
  std::shared_ptr<Generator> gen_;
};

// GELU with the tanh approximation, as GPT-2.
class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) const;
};

}  // namespace lathe::nn
