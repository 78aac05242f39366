// Layer normalisation over the last dim, with optional elementwise weight and bias; backward beside.
// An f32 input may be normalised into a 16-bit output (the next product's input in a 16-bit run):
// the backward then reads a 16-bit gradient and gives the input an f32 one, with no cast between.
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  std::optional<DType> out_dtype) {
  check_same_device("layer_norm", {x, weight, bias});
  check_floating("layer_norm", x);
  LATHE_CHECK(x.dim() >= 1 && x.shape().back() > 0, "layer_norm: input needs a non-empty last dim, got ",
              x.desc());
  const int64_t D = x.shape().back();
  for (const auto& [p, what] : {std::pair{weight, "weight"}, std::pair{bias, "bias"}}) {
    if (!p.defined()) continue;
    LATHE_CHECK(p.shape() == Shape{D}, "layer_norm: ", what, " ", p.desc(), " does not match the last dim of ",
                x.desc(), " (expected [", D, "])");
    LATHE_CHECK(p.dtype() == x.dtype(), "layer_norm: ", what, " ", p.desc(), " has another dtype than the input ",
                x.desc());
  }
  LATHE_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got ", eps);
  const DType out_dt = out_dtype.value_or(x.dtype());
  LATHE_CHECK(out_dt == x.dtype() || (x.dtype() == DType::f32 && (out_dt == DType::bf16 || out_dt == DType::f16)),
              "layer_norm: a ", dtype_name(out_dt), " output is for an f32 input (its 16-bit copy); got ", x.desc());

  Tensor xc = x.detach().contiguous();
  Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  // f64 inputs keep f64 statistics so that gradchecks see no f32 rounding.
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Shape rows(x.shape().begin(), x.shape().end() - 1);
  Tensor out = Tensor::empty(x.shape(), out_dt, x.device());
  Tensor mean = Tensor::empty(rows, stat, x.device()), rstd = Tensor::empty(rows, stat, x.device());
  if (out.numel() > 0) backend_for(x.device()).layer_norm(xc, w, b, eps, out, mean, rstd);

  const bool need_w = weight.defined() && weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  return record("layer_norm", out, {x, weight, bias}, [=](const Tensor& g) {
    Tensor gx = Tensor::empty(xc.shape(), xc.dtype(), xc.device());
    Tensor gw = need_w ? Tensor::empty({D}, w.dtype(), w.device()) : Tensor();
    Tensor gb = need_b ? Tensor::empty({D}, b.dtype(), b.device()) : Tensor();
    if (gx.numel() > 0) {
      backend_for(g.device()).layer_norm_backward(xc, w, mean, rstd, g.to(out_dt).contiguous(), gx, gw, gb);
    } else {  // no rows: the parameter gradients are empty sums
      if (gw.defined()) gw.zero_();
      if (gb.defined()) gb.zero_();
    }
    return std::vector<Tensor>{gx, gw, gb};
  });
}

}  // namespace lathe
