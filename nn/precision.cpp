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

// The policy table (nn/precision.h): true where an op class runs in the run's 16-bit type.
namespace {
struct OpClassRule {
  OpClass op;
  bool low;  // runs in bf16/f16 in a 16-bit run; f32 otherwise
};
constexpr OpClassRule kPolicyTable[] = {
    {OpClass::matmul, true},      {OpClass::activation, true}, {OpClass::softmax, false},
    {OpClass::layer_norm, false}, {OpClass::residual, false},  {OpClass::embedding, false},
    {OpClass::loss, false},
};
}  // namespace

DType PrecisionPolicy::dtype(OpClass c) const {
  for (const OpClassRule& r : kPolicyTable)
    if (r.op == c) return r.low ? low_dtype(precision_) : DType::f32;
  LATHE_FAIL("precision policy: no rule for op class ", int(c));
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
    // What a 16-bit step runs: casts both ways, a Linear's product and bias, the activations (GELU,
    // ReLU^2, SwiGLU's SiLU and product), rotary embeddings and QK-norm on q, the q scale, and their
    // backward (products, the bias gradient's sum) on a tiny operand.
    Tensor x = Tensor::ones({2, 4}, DType::f32, device);
    Tensor w = Tensor::ones({4, 4}, DType::f32, device);
    Tensor b = Tensor::zeros({4}, DType::f32, device);
    x.requires_grad_();
    w.requires_grad_();
    b.requires_grad_();
    Tensor h = linear(x.to(dt), w.to(dt), b.to(dt));
    Tensor y = add(add(gelu(h), squared_relu(h)), mul(silu(h), h));
    const Tensor angles = Tensor::zeros({2, 2}, DType::f32, device);
    y = rms_norm(rope(y.view({1, 1, 2, 4}), angles, angles), Tensor(), 1e-5).view({2, 4});
    y = matmul(mul(y, 0.5), y.transpose(0, 1));
    sum(y.to(DType::f32)).backward();
  } catch (const Error& e) {
    LATHE_FAIL(what, " ", precision_name(p), ": the ", device.str(), " device has no ", dtype_name(dt),
               " path for a kernel the policy needs: ", e.what());
  }
}

}  // namespace lathe::nn
