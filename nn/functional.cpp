#include "nn/functional.h"

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe::nn {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_same_device("linear", {x, weight, bias});
  check_floating("linear", x);
  LATHE_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out, in], got ", weight.desc());
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  LATHE_CHECK(x.dim() >= 1 && x.shape().back() == in_f, "linear: input ", x.desc(), " does not end in ", in_f,
              " features (weight ", weight.desc(), ")");
  LATHE_CHECK(x.dtype() == weight.dtype(), "linear: input ", x.desc(), " and weight ", weight.desc(),
              " differ in dtype");
  LATHE_CHECK(!bias.defined() || (bias.shape() == Shape{out_f} && bias.dtype() == weight.dtype()), "linear: bias ",
              bias.defined() ? bias.desc() : "", " must be ", dtype_name(weight.dtype()), "[", out_f, "]");

  const int64_t rows = in_f ? x.numel() / in_f : 0;
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  Tensor x2 = x.detach().reshape({rows, in_f});
  Tensor y;
  {
    NoGradGuard no_grad;
    y = matmul(x2, weight.detach().t());
    // The bias is added in place: an elementwise kernel reads each element before writing it, so
    // the output may alias its first operand, and this saves allocating a second [rows, out].
    if (bias.defined() && y.numel() > 0)
      backend_for(y.device()).binary(BinaryOp::add, y, bias.detach().expand(y.shape()), y);
  }
  y = y.view(out_shape);

  return record("linear", y, {x, weight, bias},
                [x2, w = weight.detach(), rows, out_f, x_shape = x.shape(), nx = x.requires_grad(),
                 nw = weight.requires_grad(), nb = bias.defined() && bias.requires_grad()](const Tensor& g) {
    Tensor g2 = g.reshape({rows, out_f});
    Tensor gx = nx ? matmul(g2, w).view(x_shape) : Tensor();  // [rows, out] @ [out, in]
    Tensor gw = nw ? matmul(g2.t(), x2) : Tensor();           // [out, rows] @ [rows, in]
    Tensor gb = nb ? sum(g2, {0}) : Tensor();
    return std::vector<Tensor>{gx, gw, gb};
  });
}

}  // namespace lathe::nn
