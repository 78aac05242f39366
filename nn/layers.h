// The basic layers, with PyTorch's parameter names and layouts so that state dicts match:
// Linear (weight [out, in], bias [out]), Embedding (weight [num, dim]), LayerNorm (weight, bias
// [dim]), Dropout and GELU (no parameters).
//
// Constructors create parameters with placeholder values (zeros, LayerNorm's ones); the model
// that owns a layer initialises it (GPT does GPT-2's init), so random numbers come from one place.
#pragma once

#include <memory>

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

class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, bool bias = true, double eps = 1e-5, LayerOptions opt = {});
  Tensor forward(const Tensor& x) const;

  int64_t dim;
  double eps;
  Tensor weight;  // [dim], ones
  Tensor bias;    // [dim], zeros; undefined without bias

 private:
  PolicyRef precision_;  // reads the f32 stream, writes the policy's layer_norm dtype (the next product's)
};

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
