// Elementwise kernels: unary, binary (operands already broadcast), where. The arithmetic mirrors
// core/cpu/elementwise.cpp and core/cpu/scalar_math.h expression for expression (NaN handling of
// maximum/minimum and clamp included); 16-bit floats compute in f32.
//
// The op is a kernel argument, not a template parameter: the switch is uniform across a warp and
// costs nothing next to the memory traffic, and it keeps one kernel per dtype instead of one per
// (op, dtype).
#include "cuda/map.cuh"

namespace lathe::cuda {

namespace {

// ---- scalar definitions (core/cpu/scalar_math.h) ----
template <class C>
__device__ __forceinline__ C gelu(C x) {
  const C k = C(0.7978845608028654);
  const C c = C(0.044715);
  return C(0.5) * x * (C(1) + m_tanh(k * (x + c * x * x * x)));
}

template <class C>
__device__ __forceinline__ C gelu_backward(C x, C g) {
  const C k = C(0.7978845608028654);
  const C c = C(0.044715);
  const C u = k * (x + c * x * x * x);
  const C th = m_tanh(u);
  const C sech2 = C(1) - th * th;
  const C du = k * (C(1) + C(3) * c * x * x);
  return g * (C(0.5) * (C(1) + th) + C(0.5) * x * sech2 * du);
}

template <class C>
__device__ __forceinline__ C sigmoid(C x) {
  return C(1) / (C(1) + m_exp(-x));
}

template <class T>
struct UnaryFn {
  using C = compute_t<T>;
  UOp op;
  C a, b;              // p0, p1 in the compute type
  bool has_lo, has_hi;  // clamp: NaN bounds mean "no bound"

  __device__ __forceinline__ T operator()(T in) const { return from_c<T>(apply(to_c(in))); }

  __device__ __forceinline__ C apply(C v) const {
    switch (op) {
      case UOp::neg: return C(-v);
      case UOp::abs: return v < C(0) ? C(-v) : v;
      case UOp::square: return C(v * v);
      case UOp::sign: return C((C(0) < v) - (v < C(0)));
      case UOp::relu: return v > C(0) ? v : C(0);
      case UOp::affine: return C(v * a + b);
      case UOp::clamp:
        if (has_lo && v < a) v = a;
        if (has_hi && v > b) v = b;
        return v;
      default: break;
    }
    if constexpr (std::is_floating_point_v<C>) {
      switch (op) {
        case UOp::exp: return m_exp(v);
        case UOp::log: return m_log(v);
        case UOp::sqrt: return m_sqrt(v);
        case UOp::rsqrt: return C(1) / m_sqrt(v);
        case UOp::tanh: return m_tanh(v);
        case UOp::gelu: return gelu(v);
        case UOp::sigmoid: return sigmoid(v);
        case UOp::reciprocal: return C(1) / v;
        case UOp::pow_scalar: return m_pow(v, a);
        default: break;
      }
    }
    return v;  // unreachable: the host refuses ops a dtype lacks
  }
};

template <class T>
struct ArithFn {
  using C = compute_t<T>;
  BOp op;

  __device__ __forceinline__ T operator()(T xa, T xb) const {
    const C x = to_c(xa), y = to_c(xb);
    switch (op) {
      case BOp::add: return from_c<T>(C(x + y));
      case BOp::sub: return from_c<T>(C(x - y));
      case BOp::mul: return from_c<T>(C(x * y));
      case BOp::maximum: return from_c<T>((x != x || x > y) ? x : y);
      case BOp::minimum: return from_c<T>((x != x || x < y) ? x : y);
      case BOp::relu_backward: return from_c<T>(x > C(0) ? y : C(0));
      default: break;
    }
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
      if (op == BOp::div) return from_c<T>(y == 0 ? C(0) : C(x / y));
    }
    if constexpr (std::is_floating_point_v<C>) {
      switch (op) {
        case BOp::div: return from_c<T>(x / y);
        case BOp::pow: return from_c<T>(m_pow(x, y));
        case BOp::gelu_backward: return from_c<T>(gelu_backward(x, y));
        case BOp::tanh_backward: return from_c<T>(y * (C(1) - x * x));
        case BOp::sigmoid_backward: return from_c<T>(y * x * (C(1) - x));
        default: break;
      }
    }
    return xa;  // unreachable: the host refuses ops a dtype lacks
  }
};

template <class T>
struct CompareFn {
  using C = compute_t<T>;
  BOp op;

  __device__ __forceinline__ bool operator()(T xa, T xb) const {
    const C x = to_c(xa), y = to_c(xb);
    switch (op) {
      case BOp::eq: return x == y;
      case BOp::ne: return x != y;
      case BOp::lt: return x < y;
      case BOp::le: return x <= y;
      case BOp::gt: return x > y;
      default: return x >= y;
    }
  }
};

// where works on raw bits: U is an unsigned type of the element's size.
template <class U>
__global__ void where_kernel(Geometry<4> g, U* __restrict__ out, const bool* __restrict__ cond,
                             const U* __restrict__ a, const U* __restrict__ b) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < g.numel; i += stride) {
    int64_t off[4];
    offsets_of(g, i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

template <class U>
void run_where(const Geometry<4>& g, void* out, const void* cond, const void* a, const void* b, cudaStream_t s) {
  where_kernel<U><<<grid_for(g.numel), kThreads, 0, s>>>(g, static_cast<U*>(out), static_cast<const bool*>(cond),
                                                         static_cast<const U*>(a), static_cast<const U*>(b));
}

}  // namespace

void launch_unary(UOp op, DT dtype, const Geometry<2>& g, void* out, const void* x, double p0, double p1,
                  cudaStream_t s) {
  LATHE_CUDA_DISPATCH_ALL(dtype, "unary", [&]<class T>() {
    using C = compute_t<T>;
    // NaN bounds mean "no bound" (p0 != p0 is the NaN test).
    const UnaryFn<T> f{op, static_cast<C>(p0), static_cast<C>(p1), !(p0 != p0), !(p1 != p1)};
    run_map1(g, static_cast<T*>(out), static_cast<const T*>(x), f, s);
  });
  check_launch("unary");
}

void launch_binary(BOp op, DT dtype, const Geometry<3>& g, void* out, const void* a, const void* b,
                   cudaStream_t s) {
  const bool comparison = op >= BOp::eq && op <= BOp::ge;
  LATHE_CUDA_DISPATCH_ALL(dtype, "binary", [&]<class T>() {
    if (comparison)
      run_map2(g, static_cast<bool*>(out), static_cast<const T*>(a), static_cast<const T*>(b), CompareFn<T>{op}, s);
    else
      run_map2(g, static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), ArithFn<T>{op}, s);
  });
  check_launch("binary");
}

void launch_where(DT dtype, const Geometry<4>& g, void* out, const void* cond, const void* a, const void* b,
                  cudaStream_t s) {
  if (g.numel == 0) return;
  switch (dtype) {
    case DT::b8: run_where<uint8_t>(g, out, cond, a, b, s); break;
    case DT::bf16:
    case DT::f16: run_where<uint16_t>(g, out, cond, a, b, s); break;
    case DT::f32:
    case DT::i32: run_where<uint32_t>(g, out, cond, a, b, s); break;
    default: run_where<uint64_t>(g, out, cond, a, b, s); break;
  }
  check_launch("where");
}

}  // namespace lathe::cuda
