// Device-side building blocks shared by the .cu files: element types and their compute types,
// casts that round exactly as the CPU backend does, strided offsets, vector packs, warp and block
// reductions, dtype dispatch, launch sizes.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/kernels.h"

namespace lathe::cuda {

using bf16_t = __nv_bfloat16;
using f16_t = __half;

// ---- compute types: 16-bit floats compute in f32, as on the CPU ----
template <class T> struct Compute { using type = T; };
template <> struct Compute<bf16_t> { using type = float; };
template <> struct Compute<f16_t> { using type = float; };
template <class T> using compute_t = typename Compute<T>::type;

template <class T> struct IsFloat : std::is_floating_point<T> {};
template <> struct IsFloat<bf16_t> : std::true_type {};
template <> struct IsFloat<f16_t> : std::true_type {};

template <class T>
__device__ __forceinline__ compute_t<T> to_c(T v) { return v; }
__device__ __forceinline__ float to_c(bf16_t v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_c(f16_t v) { return __half2float(v); }

// Narrowing to T. Like Eigen's bfloat16/half constructors, anything goes through f32 first, then
// rounds to nearest even, so a double gives the same 16-bit value on both backends.
template <class T> struct FromC {
  template <class C>
  __device__ __forceinline__ static T cast(C v) { return static_cast<T>(v); }
};
template <> struct FromC<bf16_t> {
  template <class C>
  __device__ __forceinline__ static bf16_t cast(C v) { return __float2bfloat16_rn(static_cast<float>(v)); }
};
template <> struct FromC<f16_t> {
  template <class C>
  __device__ __forceinline__ static f16_t cast(C v) { return __float2half_rn(static_cast<float>(v)); }
};
template <class T, class C>
__device__ __forceinline__ T from_c(C v) { return FromC<T>::cast(v); }

// dst = cast(src) through src's compute type, as core/cpu/copy.cpp does.
template <class D, class S>
__device__ __forceinline__ D convert(S v) { return from_c<D>(to_c(v)); }

// ---- float math overloads on the compute type ----
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
// The math library of the op table's formulas (core/op_table.h) on the GPU. Host and device, as
// the formulas are: nvcc compiles them for both sides.
struct CudaMath {
  static __host__ __device__ __forceinline__ float exp(float x) { return expf(x); }
  static __host__ __device__ __forceinline__ double exp(double x) { return ::exp(x); }
  static __host__ __device__ __forceinline__ float log(float x) { return logf(x); }
  static __host__ __device__ __forceinline__ double log(double x) { return ::log(x); }
  static __host__ __device__ __forceinline__ float log1p(float x) { return log1pf(x); }
  static __host__ __device__ __forceinline__ double log1p(double x) { return ::log1p(x); }
  static __host__ __device__ __forceinline__ float sqrt(float x) { return sqrtf(x); }
  static __host__ __device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
  static __host__ __device__ __forceinline__ float tanh(float x) { return tanhf(x); }
  static __host__ __device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
  static __host__ __device__ __forceinline__ float erf(float x) { return erff(x); }
  static __host__ __device__ __forceinline__ double erf(double x) { return ::erf(x); }
  static __host__ __device__ __forceinline__ float pow(float x, float y) { return powf(x, y); }
  static __host__ __device__ __forceinline__ double pow(double x, double y) { return ::pow(x, y); }
};

template <class C>
__device__ __forceinline__ bool m_isnan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}
template <class C>
__device__ __forceinline__ C m_lowest() {
  if constexpr (std::is_same_v<C, float>) return -__int_as_float(0x7f800000);
  else return -__longlong_as_double(0x7ff0000000000000LL);
}

// ---- strided offsets ----
// Element offsets (per operand) of flat index `linear` in g. 32-bit division when the index
// space allows: 64-bit integer division is many instructions on a GPU.
template <int N>
__device__ __forceinline__ void offsets_of(const Geometry<N>& g, int64_t linear, int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  if (g.numel <= int64_t(0xffffffffu)) {
    uint32_t rem = uint32_t(linear);
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d >= g.ndim) continue;
      const uint32_t size = uint32_t(g.shape[d]);
      const uint32_t q = rem / size;
      const int64_t i = int64_t(rem - q * size);
      rem = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += i * g.strides[k][d];
    }
  } else {
    int64_t rem = linear;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d >= g.ndim) continue;
      const int64_t size = g.shape[d];
      const int64_t q = rem / size;
      const int64_t i = rem - q * size;
      rem = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += i * g.strides[k][d];
    }
  }
}

// ---- vector packs: 16-byte loads and stores for contiguous runs ----
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
template <class T>
constexpr int pack_width() {
  return int(16 / sizeof(T)) > 0 ? int(16 / sizeof(T)) : 1;
}
inline bool aligned_to(const void* p, size_t bytes) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; }

// ---- launch sizes ----
constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n items: enough to fill the GPU, never more than needed.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > (int64_t(1) << 20)) b = int64_t(1) << 20;
  return unsigned(b);
}

// Threads for a kernel that gives one block to each row of `len` elements (softmax, the norms,
// cross-entropy): about 4 elements per thread, a multiple of 32, at most 1024.
inline int row_threads(int64_t len) {
  int64_t t = (len + 3) / 4;
  t = (t + 31) / 32 * 32;
  if (t < 32) t = 32;
  if (t > 1024) t = 1024;
  return int(t);
}

// ---- warp and block reductions (fixed shapes, so results are reproducible run to run) ----
template <class V>
__device__ __forceinline__ V shfl_xor(V v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
template <class V, class F>
__device__ __forceinline__ V warp_allreduce(V v, F combine) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = combine(v, shfl_xor(v, m));
  return v;
}
// Every thread of the block gets the result. `shared` holds 32 values; blockDim.x is a multiple
// of 32. Callers that reuse `shared` right after must __syncthreads() first.
template <class V, class F>
__device__ __forceinline__ V block_allreduce(V v, F combine, V* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_allreduce(v, combine);
  if (warps == 1) return v;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  V r = shared[0];
  for (int w = 1; w < warps; ++w) r = combine(r, shared[w]);
  __syncthreads();
  return r;
}

// ---- online softmax statistics ----
// Running (max, sum of exp(x - max)) of part of a row; -inf entries add nothing, so a partly
// masked row works and a fully masked one ends with sum 0 (then NaN, as on the CPU).
template <class C>
struct MaxSum {
  C m, s;
};
template <class C>
__device__ __forceinline__ MaxSum<C> shfl_xor(MaxSum<C> a, int lane_mask) {
  return {__shfl_xor_sync(0xffffffffu, a.m, lane_mask), __shfl_xor_sync(0xffffffffu, a.s, lane_mask)};
}
template <class C>
__device__ __forceinline__ MaxSum<C> combine_ms(MaxSum<C> a, MaxSum<C> b) {
  const C m = a.m > b.m ? a.m : b.m;
  if (m == m_lowest<C>()) return {m, a.s + b.s};
  const C sa = a.m == m_lowest<C>() ? C(0) : a.s * m_exp(a.m - m);
  const C sb = b.m == m_lowest<C>() ? C(0) : b.s * m_exp(b.m - m);
  return {m, sa + sb};
}
template <class C>
__device__ __forceinline__ MaxSum<C> add_ms(MaxSum<C> a, C v) {
  if (v > a.m) return {v, (a.m == m_lowest<C>() ? C(0) : a.s * m_exp(a.m - v)) + C(1)};
  if (v == m_lowest<C>()) return a;
  return {a.m, a.s + m_exp(v - a.m)};  // NaN lands here and poisons the sum, as on the CPU
}

// ---- recording a bad index without trapping ----
__device__ __forceinline__ void report_index_error(DeviceErrorInfo* err, int32_t code, int64_t value,
                                                   int64_t position, int64_t limit) {
  if (atomicCAS(err->lock, 0, 1) == 0) {
    err->value = value;
    err->position = position;
    err->limit = limit;
    __threadfence_system();
    err->code = code;
  }
}

// Reads index i of an i32 or i64 index array as i64.
__device__ __forceinline__ int64_t load_index(const void* p, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t*>(p)[i] : int64_t(static_cast<const int32_t*>(p)[i]);
}

}  // namespace lathe::cuda

// ---- dtype dispatch in .cu files: LATHE_CUDA_DISPATCH_FLOAT(dt, "op", [&]<class T>() { ... }) ----
#define LATHE_CUDA_CASE_(enumv, type, body)               \
  case ::lathe::cuda::DT::enumv:                          \
    return body.template operator()<type>();

#define LATHE_CUDA_DISPATCH_FLOAT(dt, name, ...)          \
  [&]() {                                                 \
    auto&& body = __VA_ARGS__;                            \
    switch (dt) {                                         \
      LATHE_CUDA_CASE_(f32, float, body)                  \
      LATHE_CUDA_CASE_(f64, double, body)                 \
      LATHE_CUDA_CASE_(bf16, ::lathe::cuda::bf16_t, body) \
      LATHE_CUDA_CASE_(f16, ::lathe::cuda::f16_t, body)   \
      default: break;                                     \
    }                                                     \
    ::lathe::cuda::fail_dtype(name, dt);                  \
  }()

#define LATHE_CUDA_DISPATCH_ALL(dt, name, ...)            \
  [&]() {                                                 \
    auto&& body = __VA_ARGS__;                            \
    switch (dt) {                                         \
      LATHE_CUDA_CASE_(f32, float, body)                  \
      LATHE_CUDA_CASE_(f64, double, body)                 \
      LATHE_CUDA_CASE_(bf16, ::lathe::cuda::bf16_t, body) \
      LATHE_CUDA_CASE_(f16, ::lathe::cuda::f16_t, body)   \
      LATHE_CUDA_CASE_(i32, int32_t, body)                \
      LATHE_CUDA_CASE_(i64, int64_t, body)                \
      LATHE_CUDA_CASE_(b8, bool, body)                    \
    }                                                     \
    ::lathe::cuda::fail_dtype(name, dt);                  \
  }()
