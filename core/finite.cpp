#include "core/finite.h"

#include <cmath>

#include "core/autograd.h"

namespace lathe {

int64_t first_non_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return -1;
  NoGradGuard no_grad;
  Tensor h = t.detach();
  if (!h.device().is_cpu()) h = h.to(Device::cpu());
  if (h.dtype() != DType::f32 && h.dtype() != DType::f64) h = h.to(DType::f32);
  h = h.contiguous();
  auto first = [](const auto* p, int64_t n) -> int64_t {
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) return i;
    return -1;
  };
  return h.dtype() == DType::f64 ? first(h.data<double>(), h.numel()) : first(h.data<float>(), h.numel());
}

}  // namespace lathe
