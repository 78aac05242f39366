// The scalars of one Adam/AdamW step of one parameter, from its hyperparameters and step count,
// computed once in double and cast to the compute type by the element loop. One definition for both
// backends: the CPU (core/cpu/optim.cpp) computes them on the host for each parameter, the CUDA
// fused path (cuda/optim.cu) on the GPU from the step counter it keeps there, and the plain CUDA
// path on the host. The same expressions in double give the same scalars everywhere.
//
// The element loop, in PyTorch's single-tensor order (each operation rounded to the compute type):
//   [AdamW] p = p * decay_factor         [Adam, wd != 0] g = g + wd * p
//   m = m * beta1 + (1 - beta1) * g       v = v * beta2 + (1 - beta2) * g * g
//   [amsgrad] vmax = max(vmax, v)         denom = sqrt(v or vmax) / bc2_sqrt + eps
//   p = p + neg_step_size * m / denom
#pragma once

#include <cmath>

// nvcc compiles the function for the GPU as well; every other compiler sees plain C++.
#if defined(__CUDACC__)
#define LATHE_HOST_DEVICE __host__ __device__
#else
#define LATHE_HOST_DEVICE
#endif

namespace lathe {

struct AdamStepScalars {
  double beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  double decay_factor;   // 1 - lr * wd (AdamW)
  double neg_step_size;  // -lr / (1 - beta1^step)
  double bc2_sqrt;       // sqrt(1 - beta2^step)
  bool decoupled, amsgrad, maximize;
};

// `Hyper` has lr, beta1, beta2, eps, weight_decay, decoupled_weight_decay, amsgrad and maximize:
// AdamParams (core/backend.h) on the host, cuda/kernels.h's AdamArgs on the GPU. `step` counts this
// step (1 for the first).
template <class Hyper>
LATHE_HOST_DEVICE inline AdamStepScalars adam_step_scalars(const Hyper& p, double step) {
  AdamStepScalars s{};
  s.beta1 = p.beta1;
  s.one_minus_beta1 = 1 - p.beta1;
  s.beta2 = p.beta2;
  s.one_minus_beta2 = 1 - p.beta2;
  s.eps = p.eps;
  s.weight_decay = p.weight_decay;
  s.decay_factor = 1 - p.lr * p.weight_decay;
  const double bc1 = 1 - ::pow(p.beta1, step);
  const double bc2 = 1 - ::pow(p.beta2, step);
  s.neg_step_size = -(p.lr / bc1);
  s.bc2_sqrt = ::sqrt(bc2);
  s.decoupled = p.decoupled_weight_decay;
  s.amsgrad = p.amsgrad;
  s.maximize = p.maximize;
  return s;
}

}  // namespace lathe
