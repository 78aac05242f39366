// Optimizer update kernels: Adam/AdamW for one parameter (the plain path) and for many in one
// launch (the fused path, which also writes an f32 parameter's 16-bit copy when given one), in
// place.
//
// The per-element arithmetic is core/cpu/optim.cpp's, operation for operation, in the same
// order and compute type (f32, or f64 when parameter or moments are f64); the two backends then
// differ only where one compiler fuses a multiply-add the other does not. The step's scalars are
// core/adam_step.h's: the plain path computes them on the host exactly as the CPU does; the fused
// path keeps each step counter on the GPU, increments it there and computes the scalars there, so
// the host never reads it.
#include <cmath>

#include "core/adam_step.h"
#include "cuda/device_common.cuh"

namespace lathe::cuda {

namespace {

template <class T, class S>
using adam_compute_t = std::conditional_t<std::is_same_v<T, double> || std::is_same_v<S, double>, double, float>;

// Returns the updated parameter as stored.
template <class T, class S>
__device__ __forceinline__ T adam_element(T* param, const T* grad, S* m_, S* v_, S* vmax_, int64_t i,
                                          const AdamStepScalars& s) {
  using C = adam_compute_t<T, S>;
  const C beta1 = C(s.beta1), omb1 = C(s.one_minus_beta1), beta2 = C(s.beta2), omb2 = C(s.one_minus_beta2);
  const C eps = C(s.eps), wd = C(s.weight_decay), decay = C(s.decay_factor);
  const C neg_step = C(s.neg_step_size), bc2_sqrt = C(s.bc2_sqrt);
  C p = C(to_c(param[i]));
  C g = C(to_c(grad[i]));
  if (s.maximize) g = -g;
  if (s.decoupled) p = p * decay;
  else if (s.weight_decay != 0) g = g + wd * p;
  C m = C(to_c(m_[i]));
  C v = C(to_c(v_[i]));
  m = m * beta1 + omb1 * g;
  v = v * beta2 + omb2 * g * g;
  C vv = v;
  if (s.amsgrad) {
    const C prev = C(to_c(vmax_[i]));
    vv = prev > v ? prev : v;
    if (v != v) vv = v;  // NaN propagates, as torch.maximum
    vmax_[i] = from_c<S>(vv);
  }
  const C denom = m_sqrt(vv) / bc2_sqrt + eps;
  p = p + neg_step * m / denom;
  m_[i] = from_c<S>(m);
  v_[i] = from_c<S>(v);
  const T stored = from_c<T>(p);
  param[i] = stored;
  return stored;
}

template <class T, class S>
__global__ void adam_kernel(T* __restrict__ param, const T* __restrict__ grad, S* __restrict__ exp_avg,
                            S* __restrict__ exp_avg_sq, S* __restrict__ max_sq, int64_t n, AdamStepScalars s) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    adam_element(param, grad, exp_avg, exp_avg_sq, max_sq, i, s);
}

// ---- fused: up to kMultiTensors parameters per launch, described by value ----
constexpr int kMultiTensors = 40;
constexpr int64_t kMultiChunk = 8192;  // elements per block

struct MultiBatch {
  AdamTensorPtrs t[kMultiTensors];
  int64_t first_block[kMultiTensors + 1];  // blocks [first_block[i], first_block[i + 1]) update tensor i
  int count;
};

__global__ void increment_steps_kernel(MultiBatch b) {
  const int i = threadIdx.x;
  if (i < b.count) *b.t[i].step += 1.0f;
}

template <class T, class S>
__global__ void adam_multi_kernel(MultiBatch b, AdamArgs a) {
  __shared__ AdamStepScalars scalars;
  int k = 0;
  while (k + 1 < b.count && int64_t(blockIdx.x) >= b.first_block[k + 1]) ++k;
  const AdamTensorPtrs& t = b.t[k];
  if (threadIdx.x == 0) scalars = adam_step_scalars(a, double(*t.step));
  __syncthreads();
  const int64_t begin = (int64_t(blockIdx.x) - b.first_block[k]) * kMultiChunk;
  const int64_t end = begin + kMultiChunk < t.numel ? begin + kMultiChunk : t.numel;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const T p = adam_element(static_cast<T*>(t.param), static_cast<const T*>(t.grad), static_cast<S*>(t.exp_avg),
                             static_cast<S*>(t.exp_avg_sq), static_cast<S*>(t.max_exp_avg_sq), i, scalars);
    // The 16-bit copy the next forward reads (an f32 parameter's, checked by the op layer): the
    // stored value rounded once to nearest even, as a cast after the step would.
    if constexpr (std::is_same_v<T, float>) {
      if (t.copy && t.copy_dtype == DT::bf16) static_cast<bf16_t*>(t.copy)[i] = from_c<bf16_t>(p);
      else if (t.copy) static_cast<f16_t*>(t.copy)[i] = from_c<f16_t>(p);
    }
  }
}

// The CPU supports moments in f32, f64 or the parameter's own dtype.
template <class T, class S>
constexpr bool supported_pair() {
  return std::is_same_v<S, float> || std::is_same_v<S, double> || std::is_same_v<S, T>;
}

}  // namespace

void launch_adam(DT dtype, DT state_dtype, void* param, const void* grad, void* exp_avg, void* exp_avg_sq,
                 void* max_exp_avg_sq, int64_t n, const AdamArgs& a, cudaStream_t s) {
  if (n == 0) return;
  const AdamStepScalars sc = adam_step_scalars(a, a.step);
  LATHE_CUDA_DISPATCH_FLOAT(dtype, "adam_update", [&]<class T>() {
    LATHE_CUDA_DISPATCH_FLOAT(state_dtype, "adam_update (state)", [&]<class S>() {
      if constexpr (supported_pair<T, S>())
        adam_kernel<T, S><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(param), static_cast<const T*>(grad),
                                                           static_cast<S*>(exp_avg), static_cast<S*>(exp_avg_sq),
                                                           static_cast<S*>(max_exp_avg_sq), n, sc);
      else
        fail_dtype("adam_update (moments must be f32, f64 or the parameter's dtype)", state_dtype);
    });
  });
  check_launch("adam_update");
}

void launch_adam_multi(DT dtype, DT state_dtype, const AdamTensorPtrs* tensors, int count, const AdamArgs& a,
                       cudaStream_t s) {
  for (int base = 0; base < count; base += kMultiTensors) {
    MultiBatch b{};
    b.count = count - base < kMultiTensors ? count - base : kMultiTensors;
    int64_t blocks = 0;
    for (int i = 0; i < b.count; ++i) {
      b.t[i] = tensors[base + i];
      b.first_block[i] = blocks;
      blocks += (b.t[i].numel + kMultiChunk - 1) / kMultiChunk;
    }
    b.first_block[b.count] = blocks;
    increment_steps_kernel<<<1, 64, 0, s>>>(b);
    if (blocks == 0) continue;
    LATHE_CUDA_DISPATCH_FLOAT(dtype, "adam_update_multi", [&]<class T>() {
      LATHE_CUDA_DISPATCH_FLOAT(state_dtype, "adam_update_multi (state)", [&]<class S>() {
        if constexpr (supported_pair<T, S>())
          adam_multi_kernel<T, S><<<unsigned(blocks), kThreads, 0, s>>>(b, a);
        else
          fail_dtype("adam_update_multi (moments must be f32, f64 or the parameter's dtype)", state_dtype);
      });
    });
  }
  check_launch("adam_update_multi");
}

}  // namespace lathe::cuda
