#include "optim/clip.h"

#include <cmath>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/ops.h"

namespace lathe::optim {

Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  LATHE_CHECK(std::isfinite(max_norm) && max_norm >= 0, "clip_grad_norm: invalid max_norm = ", max_norm,
              " (must be >= 0)");
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return Tensor::zeros({});
  const Device device = grads[0].device();
  // As torch: the norm of each gradient, then the norm of those norms (on the first device).
  Tensor total_sq;
  for (const Tensor& g : grads) {
    const Tensor norm_sq = square(sqrt(sum(square(g))).to(device).to(DType::f32));
    total_sq = total_sq.defined() ? add(total_sq, norm_sq) : norm_sq;
  }
  const Tensor total = sqrt(total_sq);
  const Tensor coef = clamp(div(Tensor::scalar(max_norm, DType::f32, device), add(total, 1e-6)), std::nullopt, 1.0);
  // Scaled in place: one pass over each gradient, no temporary.
  for (Tensor& g : grads)
    backend_for(g.device()).binary(BinaryOp::mul, g, coef.to(g.device()).to(g.dtype()).expand(g.shape()), g);
  return total;
}

}  // namespace lathe::optim
