#include "nn/functional.h"

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe::nn {

namespace {

bool is_16bit(DType t) { return t == DType::bf16 || t == DType::f16; }

// The parameter the kernels read: p itself, or its copy in the product's dtype `dt`.
Tensor operand(const char* op, const char* what, const Tensor& p, const Tensor& copy, DType dt) {
  if (!p.defined() || p.dtype() == dt) return p.defined() ? p.detach() : Tensor();
  if (!copy.defined()) return p.detach().to(dt);
  LATHE_CHECK(copy.dtype() == dt && copy.shape() == p.shape() && copy.device() == p.device(), op, ": the copy ",
              copy.desc(), " of ", what, " ", p.desc(), " is not its ", dtype_name(dt), " copy");
  return copy.detach();
}

Tensor linear_with(const char* op, LinearEpilogue epilogue, const Tensor& x, const Tensor& weight,
                   const Tensor& bias, const WeightCopies& copies) {
  check_same_device(op, {x, weight, bias});
  check_floating(op, x);
  LATHE_CHECK(weight.dim() == 2, op, ": weight must be 2-D [out, in], got ", weight.desc());
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  LATHE_CHECK(x.dim() >= 1 && x.shape().back() == in_f, op, ": input ", x.desc(), " does not end in ", in_f,
              " features (weight ", weight.desc(), ")");
  LATHE_CHECK(x.dtype() == weight.dtype() || (is_16bit(x.dtype()) && weight.dtype() == DType::f32), op, ": input ",
              x.desc(), " and weight ", weight.desc(), " differ in dtype (a 16-bit input takes f32 master weights)");
  LATHE_CHECK(!bias.defined() || (bias.shape() == Shape{out_f} && bias.dtype() == weight.dtype()), op, ": bias ",
              bias.defined() ? bias.desc() : "", " must be ", dtype_name(weight.dtype()), "[", out_f, "]");

  const DType dt = x.dtype();
  const Tensor w = operand(op, "weight", weight, copies.weight, dt);
  const Tensor b = operand(op, "bias", bias, copies.bias, dt);
  const int64_t rows = in_f ? x.numel() / in_f : 0;
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  Tensor x2 = x.detach().reshape({rows, in_f});
  if (x2.strides()[1] != 1) x2 = x2.contiguous();
  const bool gelu = epilogue == LinearEpilogue::gelu;
  Tensor y = Tensor::empty({rows, out_f}, dt, x.device());
  const Tensor pre = gelu ? Tensor::empty({rows, out_f}, dt, x.device()) : Tensor();
  if (y.numel() > 0) backend_for(y.device()).linear(x2, w.contiguous(), b, epilogue, y, pre);
  y = y.view(out_shape);

  return record(op, y, {x, weight, bias},
                [x2, w, pre, rows, out_f, x_shape = x.shape(), w_dtype = weight.dtype(), nx = x.requires_grad(),
                 nw = weight.requires_grad(), nb = bias.defined() && bias.requires_grad()](const Tensor& g) {
    Tensor g2 = g.reshape({rows, out_f}).contiguous();
    if (pre.defined() && g2.numel() > 0) {  // through the GELU first: g * gelu'(pre)
      Tensor gpre = Tensor::empty(g2.shape(), g2.dtype(), g2.device());
      backend_for(g2.device()).binary(BinaryOp::gelu_backward, pre, g2, gpre);
      g2 = gpre;
    }
    Tensor gx = nx ? matmul(g2, w).view(x_shape) : Tensor();  // [rows, out] @ [out, in]
    Tensor gw = nw ? Tensor::empty(w.shape(), w_dtype, w.device()) : Tensor();
    Tensor gb = nb ? Tensor::empty({out_f}, w_dtype, w.device()) : Tensor();
    if (gw.defined() || gb.defined()) backend_for(g2.device()).linear_backward_weight(g2, x2, gw, gb);
    return std::vector<Tensor>{gx, gw, gb};
  });
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const WeightCopies& copies) {
  return linear_with("linear", LinearEpilogue::none, x, weight, bias, copies);
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias, const WeightCopies& copies) {
  return linear_with("linear_gelu", LinearEpilogue::gelu, x, weight, bias, copies);
}

}  // namespace lathe::nn
