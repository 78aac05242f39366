// RMSNorm over the last dim, with an optional elementwise weight; backward beside. An f32 input may
// be normalised into a 16-bit output (the next product's input in a 16-bit run), as layer_norm's:
// the backward then reads a 16-bit gradient and gives the input an f32 one, with no cast between.
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps, std::optional<DType> out_dtype) {
  check_same_device("rms_norm", {x, weight});
  check_floating("rms_norm", x);
  LATHE_CHECK(x.dim() >= 1 && x.shape().back() > 0, "rms_norm: input needs a non-empty last dim, got ", x.desc());
  const int64_t D = x.shape().back();
  if (weight.defined()) {
    LATHE_CHECK(weight.shape() == Shape{D}, "rms_norm: weight ", weight.desc(), " does not match the last dim of ",
                x.desc(), " (expected [", D, "])");
    LATHE_CHECK(weight.dtype() == x.dtype(), "rms_norm: weight ", weight.desc(), " has another dtype than the input ",
                x.desc());
  }
  LATHE_CHECK(eps >= 0, "rms_norm: eps must be >= 0, got ", eps);
  const DType out_dt = out_dtype.value_or(x.dtype());
  LATHE_CHECK(out_dt == x.dtype() || (x.dtype() == DType::f32 && (out_dt == DType::bf16 || out_dt == DType::f16)),
              "rms_norm: a ", dtype_name(out_dt), " output is for an f32 input (its 16-bit copy); got ", x.desc());

  Tensor xc = x.detach().contiguous();
  Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  // f64 inputs keep an f64 statistic so that gradchecks see no f32 rounding.
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Shape rows(x.shape().begin(), x.shape().end() - 1);
  Tensor out = Tensor::empty(x.shape(), out_dt, x.device());
  Tensor rstd = Tensor::empty(rows, stat, x.device());
  if (out.numel() > 0) backend_for(x.device()).rms_norm(xc, w, eps, out, rstd);

  const bool need_w = weight.defined() && weight.requires_grad();
  return record("rms_norm", out, {x, weight}, [=](const Tensor& g) {
    Tensor gx = Tensor::empty(xc.shape(), xc.dtype(), xc.device());
    Tensor gw = need_w ? Tensor::empty({D}, w.dtype(), w.device()) : Tensor();
    if (gx.numel() > 0) backend_for(g.device()).rms_norm_backward(xc, w, rstd, g.to(out_dt).contiguous(), gx, gw);
    else if (gw.defined()) gw.zero_();  // no rows: the weight gradient is an empty sum
    return std::vector<Tensor>{gx, gw};
  });
}

}  // namespace lathe
