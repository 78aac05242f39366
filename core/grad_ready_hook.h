// A callback for the moment a leaf's gradient is complete during a backward pass.
//
// run_backward (core/autograd.h) visits tensors in reverse topological order, so when it reaches a
// leaf every contribution to that leaf's gradient has been summed: its `.grad` is final for this
// pass. Data parallel training (train/distributed/data_parallel.h) starts reducing a bucket of
// gradients across processes as soon as the bucket's leaves are final, while the backward pass goes
// on with the rest of the graph. The hook is per thread and scoped, so nothing outside its scope
// pays for it.
#pragma once

#include <functional>

#include "core/tensor.h"

namespace lathe {

// `leaf`: the parameter whose gradient is final; `grad`: its accumulated `.grad`.
using GradReadyFn = std::function<void(const Tensor& leaf, const Tensor& grad)>;

// Installs `fn` for this thread while the guard lives; the previous hook comes back afterwards.
class GradReadyHook {
 public:
  explicit GradReadyHook(GradReadyFn fn);
  ~GradReadyHook();
  GradReadyHook(const GradReadyHook&) = delete;
  GradReadyHook& operator=(const GradReadyHook&) = delete;

 private:
  GradReadyFn previous_;
};

// Called by run_backward for each leaf that requires grad, once its gradient is complete.
void notify_grad_ready(const Tensor& leaf, const Tensor& grad);

}  // namespace lathe
