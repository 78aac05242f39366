// Selection: where(cond, a, b) and masked_fill, with broadcasting.
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", {cond, a, b});
  LATHE_CHECK(cond.dtype() == DType::b8, "where: condition must be bool, got ", cond.desc());
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  DType t = promote(a.dtype(), b.dtype());
  Tensor out = Tensor::empty(shape, t, a.device());
  if (out.numel() > 0)
    backend_for(out.device()).where(cond.detach().expand(shape), a.detach().to(t).expand(shape),
                                    b.detach().to(t).expand(shape), out);
  return record("where", out, {a, b}, [c = cond.detach(), a = a.detach(), b = b.detach(),
                                       na = a.requires_grad(), nb = b.requires_grad()](const Tensor& g) {
    Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
    std::vector<Tensor> grads(2);
    if (na) grads[0] = sum_to(where(c, g, zero), a.shape()).to(a.dtype());
    if (nb) grads[1] = sum_to(where(c, zero, g), b.shape()).to(b.dtype());
    return grads;
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  LATHE_CHECK(mask.dtype() == DType::b8, "masked_fill: mask must be bool, got ", mask.desc());
  Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  LATHE_CHECK(shape == x.shape(), "masked_fill: mask ", mask.desc(), " does not broadcast to ", x.desc());
  return where(mask, Tensor::scalar(value, x.dtype(), x.device()), x);
}

}  // namespace lathe
