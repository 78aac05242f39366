// Reductions of a contiguous tensor viewed as rows [K, R] (reduce the trailing R) or columns
// [R, K] (reduce the leading R); the host permutes any other layout into rows first, as the CPU
// backend does.
//
// Determinism: no atomics. Every output is reduced by a fixed tree (per-thread strided partials,
// warp shuffles, then warps in order), and long reductions are split into a fixed number of parts
// whose partial results a second pass combines in order. The split depends only on the shape and
// the GPU's SM count, so a run repeats bit for bit on the same GPU.
//
// Sums accumulate floats in f64 and integers in i64, as the CPU does. max/min/argmax/argmin carry
// (value, index) pairs combined by a rule that is independent of the order: NaN beats numbers, the
// larger (smaller) value wins, ties go to the lower index. That gives exactly the CPU's answer
// (first NaN, else first extreme).
#include "cuda/device_common.cuh"

namespace lathe::cuda {

namespace {

template <class C>
struct ValIdx {
  C v;
  int64_t i;  // -1: empty
};

template <class C>
__device__ __forceinline__ ValIdx<C> shfl_xor(ValIdx<C> a, int m) {
  return {__shfl_xor_sync(0xffffffffu, a.v, m), __shfl_xor_sync(0xffffffffu, a.i, m)};
}

template <class T>
struct SumR {
  using Acc = std::conditional_t<IsFloat<T>::value, double, int64_t>;
  __device__ __forceinline__ static Acc empty() { return Acc(0); }
  __device__ __forceinline__ static Acc lift(T v, int64_t) { return Acc(to_c(v)); }
  __device__ __forceinline__ static Acc combine(Acc a, Acc b) { return a + b; }
  __device__ __forceinline__ static void store(void* out, int64_t k, Acc a, bool) {
    static_cast<T*>(out)[k] = from_c<T>(a);
  }
};

template <class T, bool kMax>
struct ExtremeR {
  using C = compute_t<T>;
  using Acc = ValIdx<C>;
  __device__ __forceinline__ static Acc empty() { return {C(0), -1}; }
  __device__ __forceinline__ static Acc lift(T v, int64_t i) { return {to_c(v), i}; }
  __device__ __forceinline__ static Acc combine(Acc a, Acc b) {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = m_isnan(a.v), bn = m_isnan(b.v);
    if (an || bn) {
      if (an && bn) return a.i < b.i ? a : b;
      return an ? a : b;
    }
    if (a.v == b.v) return a.i < b.i ? a : b;
    return (kMax ? a.v > b.v : a.v < b.v) ? a : b;
  }
  // arg: write the index (i64 output) instead of the value.
  __device__ __forceinline__ static void store(void* out, int64_t k, Acc a, bool arg) {
    if (arg) static_cast<int64_t*>(out)[k] = a.i;
    else static_cast<T*>(out)[k] = from_c<T>(a.v);
  }
};

template <class R, bool kFirst, class In>
__device__ __forceinline__ typename R::Acc lift(const In& v, int64_t i) {
  if constexpr (kFirst) return R::lift(v, i);
  else return v;  // a partial result of the first pass
}

// One warp per row: short rows.
template <class R, bool kFirst, class In>
__global__ void rows_warp_kernel(const In* __restrict__ x, int64_t K, int64_t len, void* out, bool arg) {
  using Acc = typename R::Acc;
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t k = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; k < K; k += warps) {
    const In* row = x + k * len;
    Acc acc = R::empty();
    for (int64_t i = lane; i < len; i += 32) acc = R::combine(acc, lift<R, kFirst>(row[i], i));
    acc = warp_allreduce(acc, [](Acc a, Acc b) { return R::combine(a, b); });
    if (lane == 0) R::store(out, k, acc, arg);
  }
}

// One block per (row, part): long rows, split into `parts` parts of `part_len` when there are
// too few rows to fill the GPU. With parts > 1 the block writes its partial result.
template <class R, bool kFirst, class In>
__global__ void rows_block_kernel(const In* __restrict__ x, int64_t len, int64_t part_len, int64_t parts,
                                  void* out, typename R::Acc* partial, bool arg) {
  using Acc = typename R::Acc;
  __shared__ Acc shared[32];
  const int64_t b = blockIdx.x;
  const int64_t k = b / parts, p = b % parts;
  const In* row = x + k * len;
  const int64_t begin = p * part_len;
  const int64_t end = begin + part_len < len ? begin + part_len : len;
  Acc acc = R::empty();
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc = R::combine(acc, lift<R, kFirst>(row[i], i));
  acc = block_allreduce(acc, [](Acc a, Acc c) { return R::combine(a, c); }, shared);
  if (threadIdx.x == 0) {
    if (parts == 1) R::store(out, k, acc, arg);
    else partial[b] = acc;
  }
}

// Columns: blocks of 32 columns x 8 row lanes; blockIdx.y picks a part of the rows. Each thread
// walks its rows in order, the 8 lanes are combined in order, then (parts > 1) a second pass
// combines the parts in order.
constexpr int kColLanes = 8;
template <class R, bool kFirst, class In>
__global__ void cols_kernel(const In* __restrict__ x, int64_t len, int64_t K, int64_t part_len, void* out,
                            typename R::Acc* partial, bool arg) {
  using Acc = typename R::Acc;
  __shared__ Acc shared[kColLanes][32];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t p = blockIdx.y, parts = gridDim.y;
  const int64_t begin = p * part_len;
  const int64_t end = begin + part_len < len ? begin + part_len : len;
  Acc acc = R::empty();
  if (col < K)
    for (int64_t r = begin + threadIdx.y; r < end; r += kColLanes)
      acc = R::combine(acc, lift<R, kFirst>(x[r * K + col], r));
  shared[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < K) {
    for (int l = 1; l < kColLanes; ++l) acc = R::combine(acc, shared[l][threadIdx.x]);
    if (parts == 1) R::store(out, col, acc, arg);
    else partial[p * K + col] = acc;
  }
}

struct Plan {
  bool warp_rows = false;
  int64_t parts = 1, part_len = 0;
};

// How a reduction is split; reduce_scratch_bytes and launch_reduce must agree, so both use this.
Plan plan(int64_t K, int64_t R, bool rows, int sm_count) {
  Plan p;
  const int64_t target_blocks = int64_t(sm_count > 0 ? sm_count : 1) * 4;
  if (rows) {
    if (R <= 1024) {
      p.warp_rows = true;
      p.part_len = R;
      return p;
    }
    // Each part keeps at least 4096 elements; enough parts to give the GPU target_blocks blocks.
    int64_t parts = (target_blocks + K - 1) / K;
    const int64_t max_parts = (R + 4095) / 4096;
    if (parts > max_parts) parts = max_parts;
    if (parts < 1) parts = 1;
    p.part_len = (R + parts - 1) / parts;
    p.parts = (R + p.part_len - 1) / p.part_len;
    return p;
  }
  const int64_t col_blocks = (K + 31) / 32;
  int64_t parts = (target_blocks + col_blocks - 1) / col_blocks;
  const int64_t max_parts = (R + 255) / 256;  // at least 256 rows per part
  if (parts > max_parts) parts = max_parts;
  if (parts > 65535) parts = 65535;
  if (parts < 1) parts = 1;
  p.part_len = (R + parts - 1) / parts;
  p.parts = R == 0 ? 1 : (R + p.part_len - 1) / p.part_len;
  if (p.part_len == 0) p.part_len = 1;
  return p;
}

template <class T, class R>
void reduce_with(const T* x, int64_t K, int64_t len, bool rows, void* out, void* scratch, int sm_count, bool arg,
                 cudaStream_t s) {
  using Acc = typename R::Acc;
  const Plan p = plan(K, len, rows, sm_count);
  Acc* partial = static_cast<Acc*>(scratch);
  if (rows) {
    if (p.warp_rows) {
      rows_warp_kernel<R, true><<<grid_for(K * 32), kThreads, 0, s>>>(x, K, len, out, arg);
      return;
    }
    const int threads = 512;
    rows_block_kernel<R, true><<<unsigned(K * p.parts), threads, 0, s>>>(x, len, p.part_len, p.parts, out, partial,
                                                                        arg);
    if (p.parts > 1) {
      if (p.parts <= 1024)
        rows_warp_kernel<R, false><<<grid_for(K * 32), kThreads, 0, s>>>(partial, K, p.parts, out, arg);
      else
        rows_block_kernel<R, false><<<unsigned(K), threads, 0, s>>>(partial, p.parts, p.parts, 1, out, nullptr, arg);
    }
    return;
  }
  const dim3 block(32, kColLanes);
  const unsigned col_blocks = unsigned((K + 31) / 32);
  cols_kernel<R, true><<<dim3(col_blocks, unsigned(p.parts)), block, 0, s>>>(x, len, K, p.part_len, out, partial,
                                                                             arg);
  if (p.parts > 1)
    cols_kernel<R, false><<<dim3(col_blocks, 1), block, 0, s>>>(partial, p.parts, K, p.parts, out, nullptr, arg);
}

}  // namespace

size_t reduce_scratch_bytes(ReduceOp op, DT dtype, int64_t K, int64_t R, bool rows, int sm_count) {
  const Plan p = plan(K, R, rows, sm_count);
  if (p.parts <= 1) return 0;
  size_t acc_bytes = 16;  // ValIdx<double> is the largest partial
  if (op == ReduceOp::sum) acc_bytes = 8;
  (void)dtype;
  return size_t(K) * size_t(p.parts) * acc_bytes;
}

void launch_reduce(ReduceOp op, DT dtype, const void* x, int64_t K, int64_t R, bool rows, void* out, void* scratch,
                   int sm_count, cudaStream_t s) {
  if (K == 0) return;
  if (dtype == DT::b8) fail_dtype("reduce (cast bool tensors first)", dtype);
  LATHE_CUDA_DISPATCH_ALL(dtype, "reduce", [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* xt = static_cast<const T*>(x);
      const bool arg = op == ReduceOp::argmax || op == ReduceOp::argmin;
      switch (op) {
        case ReduceOp::sum: reduce_with<T, SumR<T>>(xt, K, R, rows, out, scratch, sm_count, false, s); break;
        case ReduceOp::max:
        case ReduceOp::argmax: reduce_with<T, ExtremeR<T, true>>(xt, K, R, rows, out, scratch, sm_count, arg, s); break;
        case ReduceOp::min:
        case ReduceOp::argmin: reduce_with<T, ExtremeR<T, false>>(xt, K, R, rows, out, scratch, sm_count, arg, s); break;
      }
    }
  });
  check_launch("reduce");
}

}  // namespace lathe::cuda
