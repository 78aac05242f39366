// Elementwise kernels: unary, binary (operands already broadcast), where, the widening add of a
// 16-bit operand into f32, and scaling in place by a scalar in device memory. The arithmetic is the
// op table's (core/op_table.h), the same formulas the CPU backend compiles.
//
// The op is a kernel argument, not a template parameter: the switch is uniform across a warp and
// costs nothing next to the memory traffic, and it keeps one kernel per dtype instead of one per
// (op, dtype).
#include <algorithm>

#include "cuda/map.cuh"

namespace lathe::cuda {

namespace {

// The op's formula comes from the op table; 16-bit elements compute in f32 and round once.
template <class T>
struct UnaryFn {
  using C = compute_t<T>;
  UnaryOp op;
  OpScalars<C> s;

  __device__ __forceinline__ T operator()(T in) const { return from_c<T>(apply(to_c(in))); }

  __device__ __forceinline__ C apply(C v) const {
    switch (op) {
#define LATHE_CUDA_UNARY_(entry)                                                    \
  case UnaryOp::entry:                                                              \
    if constexpr (op_table::defined_for<op_table::entry, C>())                      \
      return op_table::entry::template apply<CudaMath>(v, s);                       \
    break;
      LATHE_UNARY_OPS(LATHE_CUDA_UNARY_)
#undef LATHE_CUDA_UNARY_
    }
    return v;  // unreachable: the op layer refuses ops a dtype lacks
  }
};

// Ops that write the operands' dtype (Out = T) or bool (predicates: Out = bool); each functor
// compiles only the entries of its kind.
template <class T, class Out>
struct BinaryFn {
  using C = compute_t<T>;
  BinaryOp op;

  __device__ __forceinline__ Out operator()(T xa, T xb) const {
    const C x = to_c(xa), y = to_c(xb);
    switch (op) {
#define LATHE_CUDA_BINARY_(entry)                                                                   \
  case BinaryOp::entry:                                                                             \
    if constexpr (op_table::defined_for<op_table::entry, C>() &&                                    \
                  op_table::entry::predicate == std::is_same_v<Out, bool>)                         \
      return from_c<Out>(op_table::entry::template apply<CudaMath>(x, y));                          \
    break;
      LATHE_BINARY_OPS(LATHE_CUDA_BINARY_)
#undef LATHE_CUDA_BINARY_
    }
    return Out{};  // unreachable: the op layer refuses ops a dtype lacks
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

// The f32 stream plus a 16-bit branch, the branch widened as it is read (exactly).
template <class TB>
struct AddWidening {
  __device__ __forceinline__ float operator()(float a, TB b) const { return a + to_c(b); }
};

template <int V, class TB>
__global__ void add_widening_flat(int64_t n, float* __restrict__ out, const float* __restrict__ a,
                                  const TB* __restrict__ b) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nv = n / V;
  for (int64_t i = tid; i < nv; i += stride) {
    const Pack<float, V> x = reinterpret_cast<const Pack<float, V>*>(a)[i];
    const Pack<TB, V> y = reinterpret_cast<const Pack<TB, V>*>(b)[i];
    Pack<float, V> o;
#pragma unroll
    for (int k = 0; k < V; ++k) o.v[k] = AddWidening<TB>{}(x.v[k], y.v[k]);
    reinterpret_cast<Pack<float, V>*>(out)[i] = o;
  }
  for (int64_t i = nv * V + tid; i < n; i += stride) out[i] = AddWidening<TB>{}(a[i], b[i]);
}

template <class TB>
__global__ void add_widening_strided(Geometry<3> g, float* __restrict__ out, const float* __restrict__ a,
                                     const TB* __restrict__ b) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < g.numel; i += stride) {
    int64_t off[3];
    offsets_of(g, i, off);
    out[off[0]] = AddWidening<TB>{}(a[off[1]], b[off[2]]);
  }
}

template <class TB>
void run_add_widening(const Geometry<3>& g, float* out, const float* a, const TB* b, cudaStream_t s) {
  constexpr int V = 4;  // 16 bytes of f32, 8 of the 16-bit operand
  if (is_flat(g) && aligned_to(out, 16) && aligned_to(a, 16) && aligned_to(b, 8))
    add_widening_flat<V><<<grid_for(g.numel / V + 1), kThreads, 0, s>>>(g.numel, out, a, b);
  else if (is_flat(g))
    add_widening_flat<1><<<grid_for(g.numel), kThreads, 0, s>>>(g.numel, out, a, b);
  else
    add_widening_strided<<<grid_for(g.numel), kThreads, 0, s>>>(g, out, a, b);
}

// x *= scale in place. The scale is read on the device, first, by every block: when it is 1 (a
// backward from an unscaled loss) the launch costs a few microseconds and touches nothing.
template <int V, class T>
__global__ void scale_by_kernel(int64_t n, T* __restrict__ x, const compute_t<T>* __restrict__ scale) {
  using C = compute_t<T>;
  const C v = *scale;
  if (v == C(1)) return;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nv = n / V;
  for (int64_t i = tid; i < nv; i += stride) {
    Pack<T, V> p = reinterpret_cast<const Pack<T, V>*>(x)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) p.v[k] = from_c<T>(to_c(p.v[k]) * v);
    reinterpret_cast<Pack<T, V>*>(x)[i] = p;
  }
  for (int64_t i = nv * V + tid; i < n; i += stride) x[i] = from_c<T>(to_c(x[i]) * v);
}

// Blocks of a grid-stride pass over memory: enough to keep every SM busy, few enough that a launch
// which returns at once (scale 1) costs nothing measurable.
constexpr unsigned kScaleBlocks = 2048;

}  // namespace

void launch_unary(UnaryOp op, DT dtype, const Geometry<2>& g, void* out, const void* x, double p0, double p1,
                  cudaStream_t s) {
  LATHE_CUDA_DISPATCH_ALL(dtype, "unary", [&]<class T>() {
    const UnaryFn<T> f{op, op_scalars<compute_t<T>>(p0, p1)};
    run_map1(g, static_cast<T*>(out), static_cast<const T*>(x), f, s);
  });
  check_launch(op_name(op));
}

void launch_binary(BinaryOp op, DT dtype, const Geometry<3>& g, void* out, const void* a, const void* b,
                   cudaStream_t s) {
  LATHE_CUDA_DISPATCH_ALL(dtype, "binary", [&]<class T>() {
    if (is_predicate(op))
      run_map2(g, static_cast<bool*>(out), static_cast<const T*>(a), static_cast<const T*>(b),
               BinaryFn<T, bool>{op}, s);
    else
      run_map2(g, static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), BinaryFn<T, T>{op}, s);
  });
  check_launch(op_name(op));
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

void launch_add_widening(DT b_dtype, const Geometry<3>& g, float* out, const float* a, const void* b, cudaStream_t s) {
  if (g.numel == 0) return;
  switch (b_dtype) {
    case DT::bf16: run_add_widening(g, out, a, static_cast<const bf16_t*>(b), s); break;
    case DT::f16: run_add_widening(g, out, a, static_cast<const f16_t*>(b), s); break;
    default: fail_dtype("add (a 16-bit operand widened into f32)", b_dtype);
  }
  check_launch("add");
}

void launch_scale_by(DT dtype, void* x, int64_t n, const void* scale, cudaStream_t s) {
  if (n == 0) return;
  LATHE_CUDA_DISPATCH_FLOAT(dtype, "scale_by", [&]<class T>() {
    constexpr int V = pack_width<T>();
    T* p = static_cast<T*>(x);
    const auto* v = static_cast<const compute_t<T>*>(scale);
    const unsigned blocks = std::min(kScaleBlocks, grid_for(n / V + 1));
    if (aligned_to(x, 16)) scale_by_kernel<V><<<blocks, kThreads, 0, s>>>(n, p, v);
    else scale_by_kernel<1><<<blocks, kThreads, 0, s>>>(n, p, v);
  });
  check_launch("scale_by");
}

}  // namespace lathe::cuda
