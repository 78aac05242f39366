// Elementwise map kernels shared by copy.cu and elementwise.cu: out[i] = f(in...) over a
// Geometry, with a vectorised path (16-byte packs) when every operand is one contiguous, aligned
// run, and a strided path otherwise. f is a functor on raw element values.
#pragma once

#include "cuda/device_common.cuh"

namespace lathe::cuda {

// Widest pack both element types can use with 16-byte loads of the wider one.
template <class TO, class TI>
constexpr int pack_for() {
  return int(16 / (sizeof(TO) > sizeof(TI) ? sizeof(TO) : sizeof(TI)));
}

template <int V, class TO, class TI, class F>
__global__ void map1_flat(int64_t n, TO* __restrict__ out, const TI* __restrict__ in, F f) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nv = n / V;
  for (int64_t i = tid; i < nv; i += stride) {
    const Pack<TI, V> a = reinterpret_cast<const Pack<TI, V>*>(in)[i];
    Pack<TO, V> o;
#pragma unroll
    for (int k = 0; k < V; ++k) o.v[k] = f(a.v[k]);
    reinterpret_cast<Pack<TO, V>*>(out)[i] = o;
  }
  for (int64_t i = nv * V + tid; i < n; i += stride) out[i] = f(in[i]);
}

template <class TO, class TI, class F>
__global__ void map1_strided(Geometry<2> g, TO* __restrict__ out, const TI* __restrict__ in, F f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < g.numel; i += stride) {
    int64_t off[2];
    offsets_of(g, i, off);
    out[off[0]] = f(in[off[1]]);
  }
}

template <class TO, class TI, class F>
void run_map1(const Geometry<2>& g, TO* out, const TI* in, F f, cudaStream_t s) {
  if (g.numel == 0) return;
  constexpr int V = pack_for<TO, TI>();
  if (is_flat(g)) {
    if (V > 1 && aligned_to(out, sizeof(TO) * V) && aligned_to(in, sizeof(TI) * V))
      map1_flat<V><<<grid_for(g.numel / V + 1), kThreads, 0, s>>>(g.numel, out, in, f);
    else
      map1_flat<1><<<grid_for(g.numel), kThreads, 0, s>>>(g.numel, out, in, f);
  } else {
    map1_strided<<<grid_for(g.numel), kThreads, 0, s>>>(g, out, in, f);
  }
}

// Two inputs; in the flat path an input may also be a single broadcast element (stride 0).
template <int V, class TO, class TI, class F>
__global__ void map2_flat(int64_t n, TO* __restrict__ out, const TI* __restrict__ a, const TI* __restrict__ b,
                          bool a_scalar, bool b_scalar, F f) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nv = n / V;
  const TI a0 = a[0], b0 = b[0];
  for (int64_t i = tid; i < nv; i += stride) {
    Pack<TI, V> x, y;
    if (a_scalar) {
#pragma unroll
      for (int k = 0; k < V; ++k) x.v[k] = a0;
    } else {
      x = reinterpret_cast<const Pack<TI, V>*>(a)[i];
    }
    if (b_scalar) {
#pragma unroll
      for (int k = 0; k < V; ++k) y.v[k] = b0;
    } else {
      y = reinterpret_cast<const Pack<TI, V>*>(b)[i];
    }
    Pack<TO, V> o;
#pragma unroll
    for (int k = 0; k < V; ++k) o.v[k] = f(x.v[k], y.v[k]);
    reinterpret_cast<Pack<TO, V>*>(out)[i] = o;
  }
  for (int64_t i = nv * V + tid; i < n; i += stride) out[i] = f(a_scalar ? a0 : a[i], b_scalar ? b0 : b[i]);
}

template <class TO, class TI, class F>
__global__ void map2_strided(Geometry<3> g, TO* __restrict__ out, const TI* __restrict__ a,
                             const TI* __restrict__ b, F f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < g.numel; i += stride) {
    int64_t off[3];
    offsets_of(g, i, off);
    out[off[0]] = f(a[off[1]], b[off[2]]);
  }
}

template <class TO, class TI, class F>
void run_map2(const Geometry<3>& g, TO* out, const TI* a, const TI* b, F f, cudaStream_t s) {
  if (g.numel == 0) return;
  // Flat: one run where the output is contiguous and each input is contiguous or one element.
  bool flat = g.ndim <= 1;
  bool a_scalar = false, b_scalar = false;
  if (g.ndim == 1) {
    flat = g.strides[0][0] == 1 && (g.strides[1][0] == 1 || g.strides[1][0] == 0) &&
           (g.strides[2][0] == 1 || g.strides[2][0] == 0);
    a_scalar = g.strides[1][0] == 0;
    b_scalar = g.strides[2][0] == 0;
  }
  if (!flat) {
    map2_strided<<<grid_for(g.numel), kThreads, 0, s>>>(g, out, a, b, f);
    return;
  }
  constexpr int V = pack_for<TO, TI>();
  const bool aligned = aligned_to(out, sizeof(TO) * V) && (a_scalar || aligned_to(a, sizeof(TI) * V)) &&
                       (b_scalar || aligned_to(b, sizeof(TI) * V));
  if (V > 1 && aligned)
    map2_flat<V><<<grid_for(g.numel / V + 1), kThreads, 0, s>>>(g.numel, out, a, b, a_scalar, b_scalar, f);
  else
    map2_flat<1><<<grid_for(g.numel), kThreads, 0, s>>>(g.numel, out, a, b, a_scalar, b_scalar, f);
}

}  // namespace lathe::cuda
