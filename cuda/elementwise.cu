// Elementwise kernels: unary, binary (operands already broadcast), where. The arithmetic is the op
// table's (core/op_table.h), the same formulas the CPU backend compiles.
//
// The op is a kernel argument, not a template parameter: the switch is uniform across a warp and
// costs nothing next to the memory traffic, and it keeps one kernel per dtype instead of one per
// (op, dtype).
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

}  // namespace lathe::cuda
