#include "examples/lib/train_options.h"

#include <cmath>

#include "core/error.h"

namespace lathe::app {

void validate(const TrainOptions& o) {
  LATHE_CHECK(o.steps > 0, "--steps must be positive, got ", o.steps);
  LATHE_CHECK(o.batch >= 0, "--batch must be positive, got ", o.batch);
  LATHE_CHECK(std::isfinite(o.lr) && o.lr > 0, "--lr must be positive, got ", o.lr);
  LATHE_CHECK(std::isfinite(o.min_lr) && o.effective_min_lr() <= o.lr, "--min-lr must be at most --lr (",
              o.lr, "), got ", o.min_lr);
  LATHE_CHECK(o.warmup >= 0, "--warmup must be >= 0, got ", o.warmup);
  LATHE_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "--weight-decay must be >= 0, got ",
              o.weight_decay);
  LATHE_CHECK(std::isfinite(o.grad_clip) && o.grad_clip >= 0, "--grad-clip must be >= 0 (0 disables), got ",
              o.grad_clip);
  LATHE_CHECK(o.optimizer == "adamw" || o.optimizer == "adam" || o.optimizer == "sgd" || o.optimizer == "prodigy",
              "--optimizer must be adamw, adam, sgd or prodigy, got \"", o.optimizer, "\"");
  LATHE_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "--beta1 and --beta2 must be in [0, 1), got ",
              o.beta1, " and ", o.beta2);
  LATHE_CHECK(o.eval_interval >= 0, "--eval-interval must be >= 0, got ", o.eval_interval);
  LATHE_CHECK(o.eval_iters > 0, "--eval-iters must be positive, got ", o.eval_iters);
  LATHE_CHECK(o.ckpt_interval >= 0, "--ckpt-interval must be >= 0, got ", o.ckpt_interval);
  LATHE_CHECK(o.threads >= 0, "--threads must be >= 0, got ", o.threads);
  LATHE_CHECK(o.sample_tokens >= 0, "--sample-tokens must be >= 0, got ", o.sample_tokens);
}

}  // namespace lathe::app
