#include "nn/rotary.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/error.h"

namespace lathe::nn {

RotaryTables::RotaryTables(int64_t positions, int64_t head_size, double base)
    : positions_(positions), half_(head_size / 2) {
  LATHE_CHECK(positions > 0 && head_size > 0 && head_size % 2 == 0, "rotary embeddings: need positions > 0 and an "
              "even head size, got ", positions, " positions of head size ", head_size);
  LATHE_CHECK(base > 1 && std::isfinite(base), "rotary embeddings: the base must be finite and above 1, got ", base);
  for (int64_t i = 0; i < half_; ++i) inv_freq_.push_back(std::pow(base, -double(2 * i) / double(head_size)));
}

void RotaryTables::extend(int64_t end) const {
  const int64_t computed = int64_t(cos_.size()) / half_;
  if (end <= computed) return;
  end = std::min(positions_, std::max(end, 2 * computed));  // doubling: a growing context costs amortised O(1)
  cos_.resize(size_t(end * half_));
  sin_.resize(size_t(end * half_));
  for (int64_t t = computed; t < end; ++t) {
    for (int64_t i = 0; i < half_; ++i) {
      cos_[size_t(t * half_ + i)] = std::cos(double(t) * inv_freq_[size_t(i)]);
      sin_[size_t(t * half_ + i)] = std::sin(double(t) * inv_freq_[size_t(i)]);
    }
  }
  kept_cos_ = kept_sin_ = Tensor();  // the device copy no longer holds every row
}

std::pair<Tensor, Tensor> RotaryTables::rows(int64_t pos0, int64_t T, DType dtype, Device device) const {
  LATHE_CHECK(pos0 >= 0 && T >= 0 && pos0 <= positions_ - T, "rotary embeddings: positions ", pos0, "..",
              pos0 + T - 1, " exceed the ", positions_, " the tables hold");
  extend(pos0 + T);
  const DType table = dtype == DType::f64 ? DType::f64 : DType::f32;
  if (!kept_cos_.defined() || kept_cos_.dtype() != table || kept_cos_.device() != device) {
    NoGradGuard no_grad;
    const int64_t computed = int64_t(cos_.size()) / half_;
    kept_cos_ = Tensor::from_vector(cos_, {computed, half_}).to(table).to(device);
    kept_sin_ = Tensor::from_vector(sin_, {computed, half_}).to(table).to(device);
  }
  return {kept_cos_.narrow(0, pos0, T), kept_sin_.narrow(0, pos0, T)};
}

}  // namespace lathe::nn
