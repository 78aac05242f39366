#include "optim/schedule.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace lathe::optim {

ConstantLr::ConstantLr(double lr) : lr_(lr) {
  LATHE_CHECK(std::isfinite(lr) && lr >= 0, "ConstantLr: invalid lr = ", lr, " (must be >= 0)");
}

WarmupCosineLr::WarmupCosineLr(double lr, int64_t warmup_iters, int64_t lr_decay_iters, double min_lr)
    : lr_(lr), min_lr_(min_lr), warmup_iters_(warmup_iters), lr_decay_iters_(lr_decay_iters) {
  LATHE_CHECK(std::isfinite(lr) && lr >= 0, "WarmupCosineLr: invalid lr = ", lr, " (must be >= 0)");
  LATHE_CHECK(std::isfinite(min_lr) && min_lr >= 0, "WarmupCosineLr: invalid min_lr = ", min_lr, " (must be >= 0)");
  LATHE_CHECK(warmup_iters >= 0, "WarmupCosineLr: invalid warmup_iters = ", warmup_iters, " (must be >= 0)");
  LATHE_CHECK(lr_decay_iters > warmup_iters, "WarmupCosineLr: lr_decay_iters = ", lr_decay_iters,
              " must be greater than warmup_iters = ", warmup_iters);
}

double WarmupCosineLr::lr(int64_t it) const {
  if (it < warmup_iters_) return lr_ * double(it + 1) / double(warmup_iters_ + 1);
  if (it > lr_decay_iters_) return min_lr_;
  const double decay_ratio = double(it - warmup_iters_) / double(lr_decay_iters_ - warmup_iters_);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * decay_ratio));
  return min_lr_ + coeff * (lr_ - min_lr_);
}

StepDecayLr::StepDecayLr(double lr, int64_t step_size, double gamma) : lr_(lr), gamma_(gamma), step_size_(step_size) {
  LATHE_CHECK(std::isfinite(lr) && lr >= 0, "StepDecayLr: invalid lr = ", lr, " (must be >= 0)");
  LATHE_CHECK(step_size >= 1, "StepDecayLr: invalid step_size = ", step_size, " (must be >= 1)");
  LATHE_CHECK(gamma > 0, "StepDecayLr: invalid gamma = ", gamma, " (must be > 0)");
}

double StepDecayLr::lr(int64_t it) const {
  LATHE_CHECK(it >= 0, "StepDecayLr: negative iteration ", it);
  return lr_ * std::pow(gamma_, double(it / step_size_));
}

}  // namespace lathe::optim
