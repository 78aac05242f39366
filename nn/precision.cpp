#include "nn/precision.h"

#include "core/autograd.h"
#include "core/error.h"
#include "core/ops.h"
#include "nn/functional.h"

namespace lathe::nn {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::f32: return "f32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

Precision parse_precision(const std::string& name, const std::string& what) {
  for (Precision p : {Precision::f32, Precision::bf16, Precision::fp16})
    if (name == precision_name(p)) return p;
  LATHE_FAIL(what, " must be f32, bf16 or fp16, got \"", name, "\"");
}

DType low_dtype(Precision p) {
  switch (p) {
    case Precision::bf16: return DType::bf16;
    case Precision::fp16: return DType::f16;
    default: return DType::f32;
  }
}

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::matmul: return "matmul";
    case OpClass::activation: return "activation";
    case OpClass::softmax: return "softmax";
    case OpClass::layer_norm: return "layer_norm";
    case OpClass::residual: return "residual";
    case OpClass::embedding: return "embedding";
    case OpClass::loss: return "loss";
  }
  return "?";
}

// The policy table (nn/precision.h): where an op class writes the run's 16-bit type.
namespace {
struct OpClassRule {
  OpClass op;
  bool bf16, fp16;  // writes bf16 in a bf16 run, f16 in an fp16 run; f32 otherwise
};
constexpr OpClassRule kPolicyTable[] = {
    {OpClass::matmul, true, true},
    {OpClass::activation, true, true},
    {OpClass::softmax, false, false},
    {OpClass::layer_norm, true, true},
    {OpClass::residual, false, false},
    {OpClass::embedding, false, false},
    // The fused classifier keeps the gradient for an upstream gradient of 1, before fp16's loss
    // scale multiplies it: probabilities over the rows (about 1e-9 at GPT-2's sizes) lie far below
    // f16's smallest normal (6e-5), while bf16 has f32's range.
    {OpClass::loss, true, false},
};
}  // namespace

DType PrecisionPolicy::dtype(OpClass c) const {
  for (const OpClassRule& r : kPolicyTable) {
    if (r.op != c) continue;
    const bool low = precision_ == Precision::bf16 ? r.bf16 : precision_ == Precision::fp16 ? r.fp16 : false;
    return low ? low_dtype(precision_) : DType::f32;
  }
  LATHE_FAIL("precision policy: no rule for op class ", int(c));
}

DType PrecisionPolicy::output_dtype(OpClass c, DType natural) const {
  return precision_ == Precision::f32 ? natural : dtype(c);
}

Tensor PrecisionPolicy::weight(const Tensor& p) const {
  if (!p.defined() || precision_ == Precision::f32) return Tensor();
  return weights_.get(p, dtype(OpClass::matmul));
}

Tensor WeightCastCache::get(const Tensor& p, DType dtype) {
  Entry& e = entries_[p.id()];
  const bool fresh =
      e.holds_copy_of(p) && e.version == p.version() && e.copy.dtype() == dtype && e.copy.shape() == p.shape();
  if (!fresh) {
    NoGradGuard no_grad;
    e = Entry{p.impl_ptr(), p.storage(), p.version(), p.detach().to(dtype)};
  }
  return e.copy;
}

Tensor WeightCastCache::fresh_copy(const Tensor& p) const {
  auto it = entries_.find(p.id());
  if (it == entries_.end() || !it->second.holds_copy_of(p)) return Tensor();
  return Tensor::empty(p.shape(), it->second.copy.dtype(), p.device());
}

void WeightCastCache::put(const Tensor& p, Tensor copy) {
  LATHE_CHECK(copy.shape() == p.shape() && copy.device() == p.device(), "weight cast cache: the copy ", copy.desc(),
              " does not fit the parameter ", p.desc());
  entries_[p.id()] = Entry{p.impl_ptr(), p.storage(), p.version(), std::move(copy)};
}

Tensor PrecisionPolicy::cast(OpClass c, const Tensor& x) const {
  // f32 casts nothing: the model computes in its parameters' dtype (f64 for gradchecks).
  if (!x.defined() || precision_ == Precision::f32) return x;
  const DType want = dtype(c);
  return x.dtype() == want ? x : x.to(want);
}

void check_precision_supported(Precision p, Device device, const std::string& what) {
  if (p == Precision::f32) return;
  const DType dt = low_dtype(p);
  try {
    // What a 16-bit step runs, on tiny operands: LayerNorm and RMSNorm from the f32 stream into 16
    // bits, the products on f32 master weights (with the bias and GELU epilogues), the activations
    // (ReLU^2, SwiGLU's SiLU and product), rotary embeddings and QK-norm on q, the q scale and a
    // batched product, the widening residual add, soft-capped 16-bit logits into the fused
    // classifier, and all their backward kernels.
    const PrecisionPolicy policy(p);
    auto param = [&](const Shape& shape, double v) { return Tensor::full(shape, v, DType::f32, device).requires_grad_(); };
    const Tensor x = param({2, 4}, 1.0), ln_w = param({4}, 1.0), ln_b = param({4}, 0.0);
    const Tensor w1 = param({4, 4}, 0.5), b1 = param({4}, 0.0), w2 = param({4, 4}, 0.5), b2 = param({4}, 0.0);
    Tensor h = linear_gelu(layer_norm(x, ln_w, ln_b, 1e-5, dt), w1, b1, {policy.weight(w1), policy.weight(b1)});
    const Tensor g = linear(rms_norm(x, ln_w, 1e-5, dt), w1);
    h = add(add(h, squared_relu(g)), mul(silu(g), g));
    const Tensor angles = Tensor::zeros({2, 2}, DType::f32, device);
    h = rms_norm(rope(h.view({1, 1, 2, 4}), angles, angles), Tensor(), 1e-5).view({2, 4});
    h = matmul(mul(h, 0.5), h.transpose(0, 1));
    Tensor s = add(x, linear(matmul(h, linear(layer_norm(x, ln_w, ln_b, 1e-5, dt), w1)), w2, b2));
    Tensor logits = softcap(policy.cast(OpClass::loss, linear(layer_norm(s, ln_w, ln_b, 1e-5, dt), w1)), 30.0);
    fused_cross_entropy(std::move(logits), Tensor::zeros({2}, DType::i64, device)).backward();
  } catch (const Error& e) {
    LATHE_FAIL(what, " ", precision_name(p), ": the ", device.str(), " device has no ", dtype_name(dt),
               " path for a kernel the policy needs: ", e.what());
  }
}

}  // namespace lathe::nn
