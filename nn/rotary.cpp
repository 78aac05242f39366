#include "nn/rotary.h"

#include <cmath>

#include "core/autograd.h"
#include "core/error.h"

namespace lathe::nn {

RotaryTables::RotaryTables(int64_t positions, int64_t head_size, double base)
    : positions_(positions), half_(head_size / 2) {
  LATHE_CHECK(positions > 0 && head_size > 0 && head_size % 2 == 0, "rotary embeddings: need positions > 0 and an "
              "even head size, got ", positions, " positions of head size ", head_size);
  LATHE_CHECK(base > 1 && std::isfinite(base), "rotary embeddings: the base must be finite and above 1, got ", base);
  cos_.resize(size_t(positions * half_));
  sin_.resize(size_t(positions * half_));
  for (int64_t i = 0; i < half_; ++i) {
    const double inv_freq = std::pow(base, -double(2 * i) / double(head_size));
    for (int64_t t = 0; t < positions; ++t) {
      cos_[size_t(t * half_ + i)] = std::cos(double(t) * inv_freq);
      sin_[size_t(t * half_ + i)] = std::sin(double(t) * inv_freq);
    }
  }
}

std::pair<Tensor, Tensor> RotaryTables::rows(int64_t pos0, int64_t T, DType dtype, Device device) const {
  LATHE_CHECK(pos0 >= 0 && T >= 0 && pos0 + T <= positions_, "rotary embeddings: positions ", pos0, "..",
              pos0 + T - 1, " exceed the ", positions_, " the tables hold");
  const DType table = dtype == DType::f64 ? DType::f64 : DType::f32;
  if (!kept_cos_.defined() || kept_cos_.dtype() != table || kept_cos_.device() != device) {
    NoGradGuard no_grad;
    kept_cos_ = Tensor::from_vector(cos_, {positions_, half_}).to(table).to(device);
    kept_sin_ = Tensor::from_vector(sin_, {positions_, half_}).to(table).to(device);
  }
  return {kept_cos_.narrow(0, pos0, T), kept_sin_.narrow(0, pos0, T)};
}

}  // namespace lathe::nn
