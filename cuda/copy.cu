// Kernels that move or create data: strided copy with casts among all dtypes, fill, arange, and
// the counter-based random numbers of core/random.cpp, element for element.
#include "cuda/map.cuh"

namespace lathe::cuda {

namespace {

template <class D, class S>
struct CastFn {
  __device__ __forceinline__ D operator()(S v) const { return convert<D>(v); }
};

template <class U>
void copy_bits(const Geometry<2>& g, void* dst, const void* src, cudaStream_t s) {
  run_map1(g, static_cast<U*>(dst), static_cast<const U*>(src), CastFn<U, U>{}, s);
}

// ---- fill and arange: out[i] = f(i) over a contiguous run ----
template <int V, class T, class F>
__global__ void generate_flat(int64_t n, T* __restrict__ out, F f) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nv = n / V;
  for (int64_t i = tid; i < nv; i += stride) {
    Pack<T, V> o;
#pragma unroll
    for (int k = 0; k < V; ++k) o.v[k] = f(i * V + k);
    reinterpret_cast<Pack<T, V>*>(out)[i] = o;
  }
  for (int64_t i = nv * V + tid; i < n; i += stride) out[i] = f(i);
}

template <class T, class F>
void run_generate(T* out, int64_t n, F f, cudaStream_t s) {
  if (n == 0) return;
  constexpr int V = pack_width<T>();
  if (aligned_to(out, sizeof(T) * V))
    generate_flat<V><<<grid_for(n / V + 1), kThreads, 0, s>>>(n, out, f);
  else
    generate_flat<1><<<grid_for(n), kThreads, 0, s>>>(n, out, f);
}

template <class U>
struct ConstantFn {
  U bits;
  __device__ __forceinline__ U operator()(int64_t) const { return bits; }
};

// start + i * step in f64 without a fused multiply-add, as the CPU computes it.
template <class T>
struct ArangeFn {
  double start, step;
  __device__ __forceinline__ T operator()(int64_t i) const {
    return from_c<T>(__dadd_rn(start, __dmul_rn(double(i), step)));
  }
};

// ---- Philox 4x32-10, exactly as core/random.cpp ----
__device__ __forceinline__ uint4 philox4x32(uint64_t counter_lo, uint64_t counter_hi, uint64_t key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = uint32_t(counter_lo), c1 = uint32_t(counter_lo >> 32);
  uint32_t c2 = uint32_t(counter_hi), c3 = uint32_t(counter_hi >> 32);
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return make_uint4(c0, c1, c2, c3);
}

// Element i: u = (r0 >> 8) * 2^-24 as f32, then lo + (hi - lo) * u in f64 (no FMA, as the CPU).
template <class T>
struct UniformFn {
  uint64_t seed, offset;
  double lo, hi;
  __device__ __forceinline__ T operator()(int64_t i) const {
    const uint4 r = philox4x32(offset + uint64_t(i), 0, seed);
    const float u = float(r.x >> 8) * (1.0f / 16777216.0f);
    return from_c<T>(__dadd_rn(lo, __dmul_rn(__dsub_rn(hi, lo), double(u))));
  }
};

// Box-Muller on r0, r1 in f64, rounded to f32, then mean + std * z in f64.
template <class T>
struct NormalFn {
  uint64_t seed, offset;
  double mean, std;
  __device__ __forceinline__ T operator()(int64_t i) const {
    const uint4 r = philox4x32(offset + uint64_t(i), 0, seed);
    constexpr double kTwoPi = 2.0 * 3.14159265358979323846;
    const double u1 = __dmul_rn(__dadd_rn(double(r.x), 1.0), 1.0 / 4294967296.0);
    const double u2 = __dmul_rn(double(r.y), 1.0 / 4294967296.0);
    const float z = float(__dmul_rn(sqrt(__dmul_rn(-2.0, log(u1))), cos(__dmul_rn(kTwoPi, u2))));
    return from_c<T>(__dadd_rn(mean, __dmul_rn(std, double(z))));
  }
};

}  // namespace

void launch_copy(const Geometry<2>& g, void* dst, DT dst_dtype, const void* src, DT src_dtype, cudaStream_t s) {
  if (dst_dtype == src_dtype) {  // a strided copy without a cast moves bits, whatever the dtype
    switch (dst_dtype) {
      case DT::b8: copy_bits<uint8_t>(g, dst, src, s); break;
      case DT::bf16:
      case DT::f16: copy_bits<uint16_t>(g, dst, src, s); break;
      case DT::f32:
      case DT::i32: copy_bits<uint32_t>(g, dst, src, s); break;
      default: copy_bits<uint64_t>(g, dst, src, s); break;
    }
    check_launch("copy");
    return;
  }
  LATHE_CUDA_DISPATCH_ALL(dst_dtype, "copy", [&]<class D>() {
    LATHE_CUDA_DISPATCH_ALL(src_dtype, "copy", [&]<class S>() {
      run_map1(g, static_cast<D*>(dst), static_cast<const S*>(src), CastFn<D, S>{}, s);
    });
  });
  check_launch("copy");
}

void launch_fill(void* dst, int64_t n, int elem_size, uint64_t bits, cudaStream_t s) {
  switch (elem_size) {
    case 1: run_generate(static_cast<uint8_t*>(dst), n, ConstantFn<uint8_t>{uint8_t(bits)}, s); break;
    case 2: run_generate(static_cast<uint16_t*>(dst), n, ConstantFn<uint16_t>{uint16_t(bits)}, s); break;
    case 4: run_generate(static_cast<uint32_t*>(dst), n, ConstantFn<uint32_t>{uint32_t(bits)}, s); break;
    default: run_generate(static_cast<uint64_t*>(dst), n, ConstantFn<uint64_t>{bits}, s); break;
  }
  check_launch("fill");
}

void launch_arange(void* dst, DT dtype, int64_t n, double start, double step, cudaStream_t s) {
  LATHE_CUDA_DISPATCH_ALL(dtype, "arange", [&]<class T>() {
    run_generate(static_cast<T*>(dst), n, ArangeFn<T>{start, step}, s);
  });
  check_launch("arange");
}

void launch_random(void* dst, DT dtype, int64_t n, uint64_t seed, uint64_t offset, double a, double b, bool normal,
                   cudaStream_t s) {
  LATHE_CUDA_DISPATCH_FLOAT(dtype, normal ? "randn" : "rand", [&]<class T>() {
    if (normal)
      run_generate(static_cast<T*>(dst), n, NormalFn<T>{seed, offset, a, b}, s);
    else
      run_generate(static_cast<T*>(dst), n, UniformFn<T>{seed, offset, a, b}, s);
  });
  check_launch(normal ? "randn" : "rand");
}

}  // namespace lathe::cuda
