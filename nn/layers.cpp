#include "nn/layers.h"

#include "core/autograd.h"
#include "core/ops.h"
#include "nn/functional.h"

namespace lathe::nn {

// ---------------------------------------------------------------- Linear

Linear::Linear(int64_t in, int64_t out, bool with_bias, LayerOptions opt)
    : in_features(in), out_features(out), precision_(opt.precision) {
  LATHE_CHECK(in > 0 && out > 0, "Linear: sizes must be positive, got in_features ", in, ", out_features ", out);
  weight = Tensor::zeros({out, in}, opt.dtype, opt.device);
  register_parameter("weight", &weight);
  if (with_bias) {
    bias = Tensor::zeros({out}, opt.dtype, opt.device);
    register_parameter("bias", &bias);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  return linear(precision_.cast(OpClass::matmul, x), weight, bias, copies());
}

Tensor Linear::forward_gelu(const Tensor& x) const {
  return linear_gelu(precision_.cast(OpClass::matmul, x), weight, bias, copies());
}

void Linear::tie_weight(const Tensor& w) {
  LATHE_CHECK(w.shape() == weight.shape(), "Linear::tie_weight: weight ", w.desc(), " does not match ",
              weight.desc());
  weight = w;  // the registered address now holds a handle to the shared tensor
}

// ---------------------------------------------------------------- Embedding

Embedding::Embedding(int64_t num, int64_t dim, LayerOptions opt) : num_embeddings(num), embedding_dim(dim) {
  LATHE_CHECK(num > 0 && dim > 0, "Embedding: sizes must be positive, got num_embeddings ", num,
              ", embedding_dim ", dim);
  weight = Tensor::zeros({num, dim}, opt.dtype, opt.device);
  register_parameter("weight", &weight);
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

// ---------------------------------------------------------------- LayerNorm

LayerNorm::LayerNorm(int64_t d, bool with_bias, double e, LayerOptions opt) : dim(d), eps(e), precision_(opt.precision) {
  LATHE_CHECK(d > 0, "LayerNorm: dim must be positive, got ", d);
  weight = Tensor::ones({d}, opt.dtype, opt.device);
  register_parameter("weight", &weight);
  if (with_bias) {
    bias = Tensor::zeros({d}, opt.dtype, opt.device);
    register_parameter("bias", &bias);
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  LATHE_CHECK(x.dim() >= 1 && x.shape().back() == dim, "LayerNorm: input ", x.desc(), " must end in dim ", dim);
  const Tensor stream = precision_.cast(OpClass::residual, x);
  return layer_norm(stream, weight, bias, eps, precision_.output_dtype(OpClass::layer_norm, stream.dtype()));
}

// ---------------------------------------------------------------- Dropout, GELU

Dropout::Dropout(double p_, std::shared_ptr<Generator> gen) : p(p_), gen_(std::move(gen)) {
  LATHE_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got ", p);
  LATHE_CHECK(gen_ != nullptr, "Dropout: needs a generator");
}

Tensor Dropout::forward(const Tensor& x) const {
  if (!is_training() || p == 0.0) return x;
  return dropout(x, p, true, *gen_);
}

Tensor GELU::forward(const Tensor& x) const { return gelu(x); }

}  // namespace lathe::nn
