// Learning-rate schedules: lr as a function of the iteration number (0-based). Apply one with
// `opt.set_lr_all(schedule.lr(it))` before each step.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

namespace lathe::optim {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr(int64_t it) const = 0;
};

class ConstantLr final : public LrSchedule {
 public:
  explicit ConstantLr(double lr);
  double lr(int64_t) const override { return lr_; }

 private:
  double lr_;
};

// nanoGPT's get_lr: linear warmup lr * (it + 1) / (warmup_iters + 1) for it < warmup_iters, then
// cosine decay from lr to min_lr until lr_decay_iters, then min_lr.
class WarmupCosineLr final : public LrSchedule {
 public:
  WarmupCosineLr(double lr, int64_t warmup_iters, int64_t lr_decay_iters, double min_lr);
  double lr(int64_t it) const override;

 private:
  double lr_, min_lr_;
  int64_t warmup_iters_, lr_decay_iters_;
};

// torch's StepLR: lr * gamma ^ floor(it / step_size).
class StepDecayLr final : public LrSchedule {
 public:
  StepDecayLr(double lr, int64_t step_size, double gamma);
  double lr(int64_t it) const override;

 private:
  double lr_, gamma_;
  int64_t step_size_;
};

}  // namespace lathe::optim
