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

// ---------------------------------------------------------------- LayerNorm, RMSNorm

Tensor Residual::sum() const { return branch.defined() ? add(stream, branch) : stream; }

Residual Residual::narrow(int64_t d, int64_t start, int64_t length) const {
  return {stream.narrow(d, start, length), branch.defined() ? branch.narrow(d, start, length) : Tensor()};
}

Norm::Norm(const char* kind, int64_t d, double e, bool with_weight, LayerOptions opt)
    : dim(d), eps(e), precision_(opt.precision) {
  LATHE_CHECK(d > 0, kind, ": dim must be positive, got ", d);
  if (with_weight) {
    weight = Tensor::ones({d}, opt.dtype, opt.device);
    register_parameter("weight", &weight);
  }
}

Tensor Norm::input(const char* kind, const Tensor& x) const {
  LATHE_CHECK(x.dim() >= 1 && x.shape().back() == dim, kind, ": input ", x.desc(), " must end in dim ", dim);
  return precision_.cast(OpClass::residual, x);
}

DType Norm::output_dtype(const Tensor& stream) const {
  return precision_.output_dtype(OpClass::layer_norm, stream.dtype());
}

LayerNorm::LayerNorm(int64_t d, bool with_bias, double e, LayerOptions opt, bool with_weight)
    : Norm("LayerNorm", d, e, with_weight, opt) {
  if (with_bias) {
    bias = Tensor::zeros({d}, opt.dtype, opt.device);
    register_parameter("bias", &bias);
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  const Tensor stream = input("LayerNorm", x);
  return layer_norm(stream, weight, bias, eps, output_dtype(stream));
}

SumAndNorm LayerNorm::forward(const Residual& r) const {
  const Tensor stream = input("LayerNorm", r.stream);
  if (!r.branch.defined()) return {stream, layer_norm(stream, weight, bias, eps, output_dtype(stream))};
  return add_layer_norm(stream, r.branch, weight, bias, eps, output_dtype(stream));
}

RMSNorm::RMSNorm(int64_t d, bool with_weight, double e, LayerOptions opt) : Norm("RMSNorm", d, e, with_weight, opt) {}

Tensor RMSNorm::forward(const Tensor& x) const {
  const Tensor stream = input("RMSNorm", x);
  return rms_norm(stream, weight, eps, output_dtype(stream));
}

SumAndNorm RMSNorm::forward(const Residual& r) const {
  const Tensor stream = input("RMSNorm", r.stream);
  if (!r.branch.defined()) return {stream, rms_norm(stream, weight, eps, output_dtype(stream))};
  return add_rms_norm(stream, r.branch, weight, eps, output_dtype(stream));
}

const char* norm_kind_name(NormKind k) { return k == NormKind::rms_norm ? "rms_norm" : "layer_norm"; }

std::unique_ptr<Norm> make_norm(NormKind kind, int64_t dim, bool weight, bool bias, LayerOptions opt) {
  if (kind == NormKind::rms_norm) return std::make_unique<RMSNorm>(dim, weight, 1e-5, opt);
  return std::make_unique<LayerNorm>(dim, bias, 1e-5, opt, weight);
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
