// Inverted dropout: keep each element with probability 1 - p and scale it by 1 / (1 - p), so the
// expected value is unchanged and evaluation needs no rescaling.
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_floating("dropout", x);
  LATHE_CHECK(p >= 0 && p < 1, "dropout: probability p must be in [0, 1), got p = ", p);
  if (!training || p == 0) return x;

  // Element i (row-major) is kept when philox_uniform(seed, offset + i) >= p: the mask depends
  // only on the generator state, on every device and for every thread count.
  const uint64_t offset = gen.advance(uint64_t(x.numel()));
  Tensor u = Tensor::empty(x.shape(), DType::f32, x.device());
  if (u.numel() > 0) backend_for(x.device()).random_uniform(u, gen.seed(), offset, 0.0, 1.0);
  Tensor keep_scaled;
  {
    NoGradGuard ng;
    keep_scaled = mul(ge(u, Tensor::scalar(p, DType::f32, x.device())).to(x.dtype()), 1.0 / (1.0 - p));
  }
  // mul records the backward: g * keep_scaled, the same mask and scale.
  return mul(x, keep_scaled);
}

}  // namespace lathe
