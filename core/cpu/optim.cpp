// Optimizer updates on the CPU: Adam/AdamW for one parameter (the plain path) and for many in one
// threaded pass (the fused path), which also writes an f32 parameter's 16-bit copy when given one.
//
// Both paths run every element through the same non-inlined chunk function with the same scalars,
// so the fused path gives the same bits as the plain one. The arithmetic follows PyTorch's
// single-tensor Adam step for step (core/adam_step.h, with the step's scalars), each operation
// rounded to the compute type as PyTorch's in-place tensor ops round.
#include <cmath>
#include <type_traits>

#include "core/adam_step.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/loops.h"
#include "core/kernel_profile.h"

namespace lathe {

namespace {

struct AdamPointers {
  void* param;
  const void* grad;
  void* exp_avg;
  void* exp_avg_sq;
  void* max_exp_avg_sq;  // null unless amsgrad
  DType param_dtype, state_dtype;
  void* copy = nullptr;  // the fused path's 16-bit copy of an f32 parameter, or null
  DType copy_dtype = DType::bf16;
};

template <class T, class S>
__attribute__((noinline)) void adam_chunk(const AdamPointers& ptr, int64_t begin, int64_t end,
                                          const AdamStepScalars& s) {
  using C = std::conditional_t<std::is_same_v<T, double> || std::is_same_v<S, double>, double, float>;
  T* param = static_cast<T*>(ptr.param);
  const T* grad = static_cast<const T*>(ptr.grad);
  S* m_ = static_cast<S*>(ptr.exp_avg);
  S* v_ = static_cast<S*>(ptr.exp_avg_sq);
  S* vmax_ = static_cast<S*>(ptr.max_exp_avg_sq);
  const C beta1 = C(s.beta1), omb1 = C(s.one_minus_beta1), beta2 = C(s.beta2), omb2 = C(s.one_minus_beta2);
  const C eps = C(s.eps), wd = C(s.weight_decay), decay = C(s.decay_factor);
  const C neg_step = C(s.neg_step_size), bc2_sqrt = C(s.bc2_sqrt);
  for (int64_t i = begin; i < end; ++i) {
    C p = C(cpu::load(param + i));
    C g = C(cpu::load(grad + i));
    if (s.maximize) g = -g;
    if (s.decoupled) p = p * decay;
    else if (s.weight_decay != 0) g = g + wd * p;
    C m = C(cpu::load(m_ + i));
    C v = C(cpu::load(v_ + i));
    m = m * beta1 + omb1 * g;
    v = v * beta2 + omb2 * g * g;
    C vv = v;
    if (s.amsgrad) {
      C prev = C(cpu::load(vmax_ + i));
      vv = prev > v ? prev : v;
      // NaN propagates as torch.maximum does
      if (std::isnan(v)) vv = v;
      cpu::store(vmax_ + i, vv);
    }
    const C denom = std::sqrt(vv) / bc2_sqrt + eps;
    p = p + neg_step * m / denom;
    cpu::store(m_ + i, m);
    cpu::store(v_ + i, v);
    cpu::store(param + i, p);
  }
}

void run_adam_chunk(const AdamPointers& ptr, int64_t begin, int64_t end, const AdamStepScalars& s) {
  LATHE_DISPATCH_FLOAT(ptr.param_dtype, "adam_update", [&]<class T>() {
    LATHE_DISPATCH_FLOAT(ptr.state_dtype, "adam_update (state)", [&]<class S>() {
      if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double> || std::is_same_v<S, T>)
        adam_chunk<T, S>(ptr, begin, end, s);
      else
        LATHE_FAIL("adam_update: state dtype ", dtype_name(ptr.state_dtype), " with parameter dtype ",
                   dtype_name(ptr.param_dtype), " is not supported");
    });
  });
  // The updated f32 parameter rounded into its 16-bit copy while the chunk is still in cache.
  if (!ptr.copy) return;
  const float* param = static_cast<const float*>(ptr.param) + begin;
  if (ptr.copy_dtype == DType::bf16) cpu::narrow(param, static_cast<bf16*>(ptr.copy) + begin, end - begin);
  else cpu::narrow(param, static_cast<f16*>(ptr.copy) + begin, end - begin);
}

AdamPointers adam_pointers(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const Tensor& max_exp_avg_sq, bool amsgrad) {
  return AdamPointers{param.data_ptr(), grad.data_ptr(), exp_avg.data_ptr(), exp_avg_sq.data_ptr(),
                      amsgrad ? max_exp_avg_sq.data_ptr() : nullptr, param.dtype(), exp_avg.dtype()};
}

}  // namespace

void CpuBackend::adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                             const Tensor& max_exp_avg_sq, double step, const AdamParams& p) {
  profile::KernelScope scope("adam_update");
  const AdamPointers ptr = adam_pointers(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, p.amsgrad);
  const AdamStepScalars s = adam_step_scalars(p, step);
  cpu::parallel_for(param.numel(), kParallelGrain,
                    [&](int64_t b, int64_t e) { run_adam_chunk(ptr, b, e, s); });
}

void CpuBackend::adam_update_multi(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                                   const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                                   const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                                   const AdamParams& p, const std::vector<Tensor>& copies) {
  profile::KernelScope scope("adam_update");
  const size_t n = params.size();
  // Per parameter: advance its step counter (it lives with the parameter, here in host-readable
  // memory) and compute the step's scalars exactly as the plain path does.
  std::vector<AdamPointers> ptrs;
  std::vector<AdamStepScalars> scalars;
  struct Chunk {
    size_t tensor;
    int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& st = steps[i];
    ptrs.push_back(adam_pointers(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                                 p.amsgrad ? max_exp_avg_sqs[i] : Tensor(), p.amsgrad));
    if (copies[i].defined()) {
      ptrs.back().copy = copies[i].data_ptr();
      ptrs.back().copy_dtype = copies[i].dtype();
    }
    float* step = static_cast<float*>(st.data_ptr());
    *step += 1.0f;
    scalars.push_back(adam_step_scalars(p, double(*step)));
    const int64_t numel = params[i].numel();
    for (int64_t b = 0; b < numel; b += kParallelGrain) chunks.push_back({i, b, std::min(numel, b + kParallelGrain)});
  }
  // One threaded pass over every chunk of every parameter.
  cpu::parallel_for(int64_t(chunks.size()), 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const Chunk& ch = chunks[size_t(c)];
      run_adam_chunk(ptrs[ch.tensor], ch.begin, ch.end, scalars[ch.tensor]);
    }
  });
}

}  // namespace lathe
