// Row kernels over the last dim of contiguous tensors: softmax, log-softmax, layer norm and RMSNorm,
// with their backward passes. One block per row; the block size follows the row length.
//
// The arithmetic follows core/cpu/norm.cpp, except that the norms' statistics are summed in the
// compute type (f32, or f64 for f64 rows; the CPU sums them in f64), as PyTorch's CUDA kernels do:
// softmax sums in the compute type, layer-norm statistics in two passes, 16-bit rows computed in
// f32; a norm may write an f32 row into 16 bits (and read its 16-bit gradient back into f32). The
// norms read and write their rows 16 bytes at a time where every row is aligned. Reductions
// run in a fixed tree, so results repeat run to run; the layer-norm weight and bias gradients
// are summed per fixed chunk of rows and the chunks combined in order (no atomics). The norms may
// add a residual branch into their rows as they read them, and their backwards the gradient the
// rows already hold into their own (the residual stream's add and gradient sum, fused).
#include <initializer_list>

#include "cuda/device_common.cuh"

namespace lathe::cuda {

namespace {

template <class T>
__global__ void softmax_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t len, bool log) {
  using C = compute_t<T>;
  __shared__ MaxSum<C> shared[32];
  const T* xr = x + int64_t(blockIdx.x) * len;
  T* yr = y + int64_t(blockIdx.x) * len;
  MaxSum<C> ms{m_lowest<C>(), C(0)};
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) ms = add_ms(ms, to_c(xr[i]));
  ms = block_allreduce(ms, [](MaxSum<C> a, MaxSum<C> b) { return combine_ms(a, b); }, shared);
  const C m = ms.m;
  if (log) {
    const C log_s = m_log(ms.s);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) yr[i] = from_c<T>((to_c(xr[i]) - m) - log_s);
  } else {
    const C inv = C(1) / ms.s;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) yr[i] = from_c<T>(m_exp(to_c(xr[i]) - m) * inv);
  }
}

// softmax:     gx = y * (gy - sum(gy * y))
// log_softmax: gx = gy - exp(y) * sum(gy)
template <class T>
__global__ void softmax_backward_kernel(const T* __restrict__ y, const T* __restrict__ gy, T* __restrict__ gx,
                                        int64_t len, bool log) {
  using C = compute_t<T>;
  __shared__ C shared[32];
  const int64_t base = int64_t(blockIdx.x) * len;
  C acc = 0;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
    acc += log ? to_c(gy[base + i]) : to_c(gy[base + i]) * to_c(y[base + i]);
  const C s = block_allreduce(acc, [](C a, C b) { return a + b; }, shared);
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    const C yv = to_c(y[base + i]), g = to_c(gy[base + i]);
    gx[base + i] = from_c<T>(log ? g - m_exp(yv) * s : yv * (g - s));
  }
}

// ---- rows, V elements at a time ----
// A thread takes V consecutive elements at a time, the block striding over the row: one 16-byte
// load of the row's type where the launcher found every row of every operand aligned (V =
// pack_width<T>()), else V = 1. Any operand (the rows, the branch, a weight, a gradient, the
// output) is read and written V elements at a time alike, converted to and from the compute type.
template <int V, class E, class C>
__device__ __forceinline__ void load_v(const E* p, C (&v)[V]) {
  const Pack<E, V> k = *reinterpret_cast<const Pack<E, V>*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = C(to_c(k.v[j]));
}
// Elements [i, i + V) of an operand that may be absent (null: `fill` everywhere, a norm without
// weight or bias).
template <int V, class E, class C>
__device__ __forceinline__ void load_or(const E* p, int64_t i, C fill, C (&v)[V]) {
  if (p) {
    load_v<V>(p + i, v);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = fill;
  }
}
template <int V, class E, class C>
__device__ __forceinline__ void store_v(E* p, const C (&v)[V]) {
  Pack<E, V> k;
#pragma unroll
  for (int j = 0; j < V; ++j) k.v[j] = from_c<E>(v[j]);
  *reinterpret_cast<Pack<E, V>*>(p) = k;
}

// a + b rounded once, never contracted with a product before it into a fused multiply-add.
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

// The rows a norm reads: x's, or with a branch (of type B), x + branch rounded to T as add rounds
// it, stored into `sum` and read back from there (each element by the thread that wrote it).
template <int V, class T, class B>
__device__ const T* norm_row(const T* x, const B* branch, T* sum, int64_t row, int64_t len) {
  using C = compute_t<T>;
  const T* xr = x + row * len;
  if (!branch) return xr;
  const B* br = branch + row * len;
  T* sr = sum + row * len;
  for (int64_t i = int64_t(threadIdx.x) * V; i < len; i += int64_t(blockDim.x) * V) {
    C a[V], b[V];
    load_v<V>(xr + i, a);
    load_v<V>(br + i, b);
#pragma unroll
    for (int j = 0; j < V; ++j) a[j] += b[j];
    store_v<V>(sr + i, a);
  }
  return sr;
}

// The input's gradient o (the norm's own) plus the gradient x already holds (`gathered`, null:
// none), as autograd's separate add would sum them: o rounded to T, then one rounded add.
template <int V, class T>
__device__ __forceinline__ void fold_gathered(const T* gathered, int64_t i, compute_t<T> (&o)[V]) {
  if (!gathered) return;
  compute_t<T> a[V];
  load_v<V>(gathered + i, a);
#pragma unroll
  for (int j = 0; j < V; ++j) o[j] = add_rn(a[j], to_c(from_c<T>(o[j])));
}

// What both passes of a norm's backward read at [i, i + V): the rows x and g = gy * w (w absent:
// ones).
template <int V, class T, class G>
__device__ __forceinline__ void load_backward(const T* xr, const G* gr, const T* w, int64_t i, compute_t<T> (&xv)[V],
                                              compute_t<T> (&g)[V]) {
  using C = compute_t<T>;
  C wv[V];
  load_v<V>(xr + i, xv);
  load_v<V>(gr + i, g);
  load_or<V>(w, i, C(1), wv);
#pragma unroll
  for (int j = 0; j < V; ++j) g[j] *= wv[j];
}

// Statistics in the compute type (f32; f64 for f64 rows), in two passes: the centred variance does
// not cancel catastrophically. Y: the output's element type, T or (for an f32 x) 16 bits: the f32
// stream normalised straight into the dtype of the product that reads it. The saved mean and rstd
// are in the compute type.
template <class T, class Y, class B, int V>
__global__ void layer_norm_kernel(const T* __restrict__ x, const B* branch, T* sum, const T* __restrict__ w,
                                  const T* __restrict__ b, double eps, Y* __restrict__ y,
                                  compute_t<T>* __restrict__ mean, compute_t<T>* __restrict__ rstd, int64_t len) {
  using C = compute_t<T>;
  __shared__ C shared[32];
  const auto plus = [](C u, C v) { return u + v; };
  const int64_t row = blockIdx.x, first = int64_t(threadIdx.x) * V, step = int64_t(blockDim.x) * V;
  const T* xr = norm_row<V>(x, branch, sum, row, len);
  Y* yr = y + row * len;
  C acc = 0;
  for (int64_t i = first; i < len; i += step) {
    C v[V];
    load_v<V>(xr + i, v);
#pragma unroll
    for (int j = 0; j < V; ++j) acc += v[j];
  }
  const C mu = block_allreduce(acc, plus, shared) / C(len);
  acc = 0;
  for (int64_t i = first; i < len; i += step) {
    C v[V];
    load_v<V>(xr + i, v);
#pragma unroll
    for (int j = 0; j < V; ++j) acc += (v[j] - mu) * (v[j] - mu);
  }
  const C rs = C(1) / m_sqrt(block_allreduce(acc, plus, shared) / C(len) + C(eps));
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
  for (int64_t i = first; i < len; i += step) {
    C v[V], wv[V], bv[V];
    load_v<V>(xr + i, v);
    load_or<V>(w, i, C(1), wv);
    load_or<V>(b, i, C(0), bv);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = (v[j] - mu) * rs * wv[j] + bv[j];
    store_v<V>(yr + i, v);
  }
}

// gx = rstd * (g - mean(g) - xh * mean(g * xh)) with xh = (x - mean) * rstd and g = gy * w; gy of the
// forward output's element type G; the gradient x already holds folded in.
template <class T, class G, int V>
__global__ void layer_norm_backward_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                           const compute_t<T>* __restrict__ mean,
                                           const compute_t<T>* __restrict__ rstd, const G* __restrict__ gy,
                                           const T* __restrict__ gathered, T* __restrict__ gx, int64_t len) {
  using C = compute_t<T>;
  __shared__ C shared[32];
  const auto plus = [](C u, C v) { return u + v; };
  const int64_t row = blockIdx.x, first = int64_t(threadIdx.x) * V, step = int64_t(blockDim.x) * V;
  const T* xr = x + row * len;
  const G* gr = gy + row * len;
  const T* ar = gathered ? gathered + row * len : nullptr;
  T* gxr = gx + row * len;
  const C mu = mean[row], rs = rstd[row];
  C sum_g = 0, sum_gx = 0;
  for (int64_t i = first; i < len; i += step) {
    C xv[V], g[V];
    load_backward<V>(xr, gr, w, i, xv, g);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      sum_g += g[j];
      sum_gx += g[j] * ((xv[j] - mu) * rs);
    }
  }
  const C mean_g = block_allreduce(sum_g, plus, shared) / C(len);
  const C mean_gx = block_allreduce(sum_gx, plus, shared) / C(len);
  for (int64_t i = first; i < len; i += step) {
    C xv[V], g[V];
    load_backward<V>(xr, gr, w, i, xv, g);
#pragma unroll
    for (int j = 0; j < V; ++j) xv[j] = rs * (g[j] - mean_g - ((xv[j] - mu) * rs) * mean_gx);
    fold_gathered<V>(ar, i, xv);
    store_v<V>(gxr + i, xv);
  }
}

// The weight and bias gradients of LayerNorm and RMSNorm, in two passes over the rows.
// Pass 1: block (32 columns x 8 lanes) sums chunk blockIdx.y of the rows in the compute type,
// gy * xh into part_w and gy into part_b (each null where that gradient is not wanted), with
// xh = (x - mean) * rstd, or x * rstd for RMSNorm (mean null); partials are [chunks, len] each.
constexpr int kLnLanes = 8;
int64_t ln_chunk_rows(int64_t rows) {
  int64_t c = 64;
  if ((rows + c - 1) / c > 65535) c = (rows + 65534) / 65535;
  return c;
}
int64_t ln_chunks(int64_t rows) { return (rows + ln_chunk_rows(rows) - 1) / ln_chunk_rows(rows); }

template <class T, class G>
__global__ void norm_param_partials(const T* __restrict__ x, const compute_t<T>* __restrict__ mean,
                                    const compute_t<T>* __restrict__ rstd, const G* __restrict__ gy, int64_t rows,
                                    int64_t len, int64_t chunk_rows, compute_t<T>* __restrict__ part_w,
                                    compute_t<T>* __restrict__ part_b) {
  using C = compute_t<T>;
  __shared__ C sw[kLnLanes][32], sb[kLnLanes][32];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  C aw = 0, ab = 0;
  if (col < len) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kLnLanes) {
      const C g = to_c(gy[r * len + col]);
      if (part_w) aw += g * ((to_c(x[r * len + col]) - (mean ? mean[r] : C(0))) * rstd[r]);
      ab += g;
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && col < len) {
    for (int l = 1; l < kLnLanes; ++l) {
      aw += sw[l][threadIdx.x];
      ab += sb[l][threadIdx.x];
    }
    if (part_w) part_w[int64_t(blockIdx.y) * len + col] = aw;
    if (part_b) part_b[int64_t(blockIdx.y) * len + col] = ab;
  }
}

// Pass 2: each column adds its chunk partials in chunk order, in f64.
template <class T>
__global__ void norm_param_combine(const compute_t<T>* __restrict__ part, int64_t chunks, int64_t len,
                                   T* __restrict__ out) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= len) return;
  double acc = 0;
  for (int64_t c = 0; c < chunks; ++c) acc += double(part[c * len + col]);
  out[col] = from_c<T>(acc);
}

// Both passes, for gw and gb where given; scratch holds the weight's partials, then the bias's
// (norm_param_scratch_bytes).
template <class T, class G>
void launch_norm_param_grads(const T* x, const compute_t<T>* mean, const compute_t<T>* rstd, const G* gy,
                             int64_t rows, int64_t len, void* scratch, void* gw, void* gb, cudaStream_t s) {
  using C = compute_t<T>;
  if (!gw && !gb) return;
  const int64_t chunks = ln_chunks(rows);
  C* part_w = gw ? static_cast<C*>(scratch) : nullptr;
  C* part_b = gb ? static_cast<C*>(scratch) + chunks * len : nullptr;
  norm_param_partials<T, G><<<dim3(unsigned((len + 31) / 32), unsigned(chunks)), dim3(32, kLnLanes), 0, s>>>(
      x, mean, rstd, gy, rows, len, ln_chunk_rows(rows), part_w, part_b);
  const unsigned blocks = unsigned((len + kThreads - 1) / kThreads);
  if (gw) norm_param_combine<T><<<blocks, kThreads, 0, s>>>(part_w, chunks, len, static_cast<T*>(gw));
  if (gb) norm_param_combine<T><<<blocks, kThreads, 0, s>>>(part_b, chunks, len, static_cast<T*>(gb));
}

// The partials of `gradients` (1: the weight's, 2: the bias's too) in the compute type.
size_t norm_param_scratch_bytes(DT dtype, int64_t rows, int64_t len, int gradients) {
  return size_t(gradients) * size_t(ln_chunks(rows)) * size_t(len) * (dtype == DT::f64 ? 8 : 4);
}

// Calls fn.template operator()<T, Y>() for x's element type T and the element type Y of the layer
// norm's output (or of its gradient): T itself, or 16 bits for an f32 x.
template <class Fn>
void dispatch_layer_norm(const char* op, DT dtype, DT y_dtype, Fn&& fn) {
  LATHE_CUDA_DISPATCH_FLOAT(dtype, op, [&]<class T>() {
    if (y_dtype == dtype) return fn.template operator()<T, T>();
    if constexpr (std::is_same_v<T, float>) {
      if (y_dtype == DT::bf16) return fn.template operator()<T, bf16_t>();
      if (y_dtype == DT::f16) return fn.template operator()<T, f16_t>();
    }
    fail_dtype(op, y_dtype);
  });
}

// The same for a forward with its residual branch: fn.template operator()<T, Y, B>(), B the branch's
// element type (T, or 16 bits for an f32 x; T when there is no branch).
template <class Fn>
void dispatch_norm_forward(const char* op, DT dtype, DT y_dtype, NormBranch branch, Fn&& fn) {
  dispatch_layer_norm(op, dtype, y_dtype, [&]<class T, class Y>() {
    if (!branch.branch || branch.branch_dtype == dtype) return fn.template operator()<T, Y, T>();
    if constexpr (std::is_same_v<T, float>) {
      if (branch.branch_dtype == DT::bf16) return fn.template operator()<T, Y, bf16_t>();
      if (branch.branch_dtype == DT::f16) return fn.template operator()<T, Y, f16_t>();
    }
    fail_dtype(op, branch.branch_dtype);
  });
}

// One operand of a row kernel for the choice of V: its pointer (null: absent) and element size.
struct RowOperand {
  const void* p;
  size_t elem;
};
// Calls fn.template operator()<V>() with V = pack_width<T>() where every row of every operand may
// be read V elements at a time (len a multiple of V, each pointer aligned to V of its elements),
// else V = 1; the threads a row's block gets for that V: about one pack (or four elements) each.
template <class T, class Fn>
void with_row_packs(int64_t len, std::initializer_list<RowOperand> operands, Fn&& fn) {
  constexpr int V = pack_width<T>();
  bool packed = V > 1 && len % V == 0;
  for (const RowOperand& o : operands) packed = packed && (!o.p || aligned_to(o.p, o.elem * V));
  if (packed) fn.template operator()<V>(row_threads(len * 4 / V));
  else fn.template operator()<1>(row_threads(len));
}

}  // namespace

void launch_softmax(DT dtype, const void* x, void* y, int64_t rows, int64_t len, bool log, cudaStream_t s) {
  if (rows == 0) return;
  LATHE_CUDA_DISPATCH_FLOAT(dtype, log ? "log_softmax" : "softmax", [&]<class T>() {
    softmax_kernel<T><<<unsigned(rows), row_threads(len), 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), len,
                                                                  log);
  });
  check_launch(log ? "log_softmax" : "softmax");
}

void launch_softmax_backward(DT dtype, const void* y, const void* gy, void* gx, int64_t rows, int64_t len, bool log,
                             cudaStream_t s) {
  if (rows == 0) return;
  LATHE_CUDA_DISPATCH_FLOAT(dtype, "softmax_backward", [&]<class T>() {
    softmax_backward_kernel<T><<<unsigned(rows), row_threads(len), 0, s>>>(
        static_cast<const T*>(y), static_cast<const T*>(gy), static_cast<T*>(gx), len, log);
  });
  check_launch("softmax_backward");
}

void launch_layer_norm(DT dtype, DT y_dtype, const void* x, NormBranch branch, const void* w, const void* b,
                       double eps, void* y, void* mean, void* rstd, bool stat_f64, int64_t rows, int64_t len,
                       cudaStream_t s) {
  if (rows == 0) return;
  if (stat_f64 != (dtype == DT::f64)) fail_dtype("layer_norm (statistics must be f64 exactly for f64 input)", dtype);
  dispatch_norm_forward("layer_norm", dtype, y_dtype, branch, [&]<class T, class Y, class B>() {
    const std::initializer_list<RowOperand> operands{{x, sizeof(T)}, {branch.branch, sizeof(B)},
                                                     {branch.sum, sizeof(T)}, {w, sizeof(T)},
                                                     {b, sizeof(T)}, {y, sizeof(Y)}};
    with_row_packs<T>(len, operands, [&]<int V>(int threads) {
      layer_norm_kernel<T, Y, B, V><<<unsigned(rows), threads, 0, s>>>(
          static_cast<const T*>(x), static_cast<const B*>(branch.branch), static_cast<T*>(branch.sum),
          static_cast<const T*>(w), static_cast<const T*>(b), eps, static_cast<Y*>(y),
          static_cast<compute_t<T>*>(mean), static_cast<compute_t<T>*>(rstd), len);
    });
  });
  check_launch("layer_norm");
}

size_t layer_norm_backward_scratch_bytes(DT dtype, int64_t rows, int64_t len) {
  return norm_param_scratch_bytes(dtype, rows, len, 2);
}

void launch_layer_norm_backward(DT dtype, DT gy_dtype, const void* x, const void* w, const void* mean,
                                const void* rstd, bool stat_f64, const void* gy, const void* gathered, void* gx,
                                void* gw, void* gb, int64_t rows, int64_t len, void* scratch, cudaStream_t s) {
  if (rows == 0) return;
  if (stat_f64 != (dtype == DT::f64))
    fail_dtype("layer_norm_backward (statistics must be f64 exactly for f64 input)", dtype);
  dispatch_layer_norm("layer_norm_backward", dtype, gy_dtype, [&]<class T, class G>() {
    using C = compute_t<T>;
    const T* xt = static_cast<const T*>(x);
    const G* gyt = static_cast<const G*>(gy);
    const std::initializer_list<RowOperand> operands{
        {x, sizeof(T)}, {w, sizeof(T)}, {gy, sizeof(G)}, {gathered, sizeof(T)}, {gx, sizeof(T)}};
    with_row_packs<T>(len, operands, [&]<int V>(int threads) {
      layer_norm_backward_kernel<T, G, V><<<unsigned(rows), threads, 0, s>>>(
          xt, static_cast<const T*>(w), static_cast<const C*>(mean), static_cast<const C*>(rstd), gyt,
          static_cast<const T*>(gathered), static_cast<T*>(gx), len);
    });
    launch_norm_param_grads(xt, static_cast<const C*>(mean), static_cast<const C*>(rstd), gyt, rows, len, scratch,
                            gw, gb, s);
  });
  check_launch("layer_norm_backward");
}

// ---------------------------------------------------------------- RMSNorm

namespace {

// The mean square in the compute type. Y: the output's element type (T, or 16-bit for an f32 x).
template <class T, class Y, class B, int V>
__global__ void rms_norm_kernel(const T* __restrict__ x, const B* branch, T* sum, const T* __restrict__ w, double eps,
                                Y* __restrict__ y, compute_t<T>* __restrict__ rstd, int64_t len) {
  using C = compute_t<T>;
  __shared__ C shared[32];
  const int64_t row = blockIdx.x, first = int64_t(threadIdx.x) * V, step = int64_t(blockDim.x) * V;
  const T* xr = norm_row<V>(x, branch, sum, row, len);
  Y* yr = y + row * len;
  C acc = 0;
  for (int64_t i = first; i < len; i += step) {
    C v[V];
    load_v<V>(xr + i, v);
#pragma unroll
    for (int j = 0; j < V; ++j) acc += v[j] * v[j];
  }
  const C rs = C(1) / m_sqrt(block_allreduce(acc, [](C u, C v) { return u + v; }, shared) / C(len) + C(eps));
  if (threadIdx.x == 0) rstd[row] = rs;
  for (int64_t i = first; i < len; i += step) {
    C v[V], wv[V];
    load_v<V>(xr + i, v);
    load_or<V>(w, i, C(1), wv);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = v[j] * rs * wv[j];
    store_v<V>(yr + i, v);
  }
}

// gx = rstd * (g - xh * mean(g * xh)) with xh = x * rstd and g = gy * w. G: gy's element type (the
// forward output's); the gradient x already holds folded in.
template <class T, class G, int V>
__global__ void rms_norm_backward_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                         const compute_t<T>* __restrict__ rstd, const G* __restrict__ gy,
                                         const T* __restrict__ gathered, T* __restrict__ gx, int64_t len) {
  using C = compute_t<T>;
  __shared__ C shared[32];
  const int64_t row = blockIdx.x, first = int64_t(threadIdx.x) * V, step = int64_t(blockDim.x) * V;
  const T* xr = x + row * len;
  const G* gr = gy + row * len;
  const T* ar = gathered ? gathered + row * len : nullptr;
  T* gxr = gx + row * len;
  const C rs = rstd[row];
  C acc = 0;
  for (int64_t i = first; i < len; i += step) {
    C xv[V], g[V];
    load_backward<V>(xr, gr, w, i, xv, g);
#pragma unroll
    for (int j = 0; j < V; ++j) acc += g[j] * (xv[j] * rs);
  }
  const C mean_gx = block_allreduce(acc, [](C u, C v) { return u + v; }, shared) / C(len);
  for (int64_t i = first; i < len; i += step) {
    C xv[V], g[V];
    load_backward<V>(xr, gr, w, i, xv, g);
#pragma unroll
    for (int j = 0; j < V; ++j) xv[j] = rs * (g[j] - (xv[j] * rs) * mean_gx);
    fold_gathered<V>(ar, i, xv);
    store_v<V>(gxr + i, xv);
  }
}

}  // namespace

void launch_rms_norm(DT dtype, DT y_dtype, const void* x, NormBranch branch, const void* w, double eps, void* y,
                     void* rstd, bool stat_f64, int64_t rows, int64_t len, cudaStream_t s) {
  if (rows == 0) return;
  if (stat_f64 != (dtype == DT::f64)) fail_dtype("rms_norm (statistics must be f64 exactly for f64 input)", dtype);
  dispatch_norm_forward("rms_norm", dtype, y_dtype, branch, [&]<class T, class Y, class B>() {
    const std::initializer_list<RowOperand> operands{
        {x, sizeof(T)}, {branch.branch, sizeof(B)}, {branch.sum, sizeof(T)}, {w, sizeof(T)}, {y, sizeof(Y)}};
    with_row_packs<T>(len, operands, [&]<int V>(int threads) {
      rms_norm_kernel<T, Y, B, V><<<unsigned(rows), threads, 0, s>>>(
          static_cast<const T*>(x), static_cast<const B*>(branch.branch), static_cast<T*>(branch.sum),
          static_cast<const T*>(w), eps, static_cast<Y*>(y), static_cast<compute_t<T>*>(rstd), len);
    });
  });
  check_launch("rms_norm");
}

size_t rms_norm_backward_scratch_bytes(DT dtype, int64_t rows, int64_t len) {
  return norm_param_scratch_bytes(dtype, rows, len, 1);
}

void launch_rms_norm_backward(DT dtype, DT gy_dtype, const void* x, const void* w, const void* rstd, bool stat_f64,
                              const void* gy, const void* gathered, void* gx, void* gw, int64_t rows, int64_t len,
                              void* scratch, cudaStream_t s) {
  if (rows == 0) return;
  if (stat_f64 != (dtype == DT::f64))
    fail_dtype("rms_norm_backward (statistics must be f64 exactly for f64 input)", dtype);
  dispatch_layer_norm("rms_norm_backward", dtype, gy_dtype, [&]<class T, class G>() {
    using C = compute_t<T>;
    const T* xt = static_cast<const T*>(x);
    const G* gyt = static_cast<const G*>(gy);
    const std::initializer_list<RowOperand> operands{
        {x, sizeof(T)}, {w, sizeof(T)}, {gy, sizeof(G)}, {gathered, sizeof(T)}, {gx, sizeof(T)}};
    with_row_packs<T>(len, operands, [&]<int V>(int threads) {
      rms_norm_backward_kernel<T, G, V><<<unsigned(rows), threads, 0, s>>>(
          xt, static_cast<const T*>(w), static_cast<const C*>(rstd), gyt, static_cast<const T*>(gathered),
          static_cast<T*>(gx), len);
    });
    launch_norm_param_grads(xt, static_cast<const C*>(nullptr), static_cast<const C*>(rstd), gyt, rows, len, scratch,
                            gw, nullptr, s);
  });
  check_launch("rms_norm_backward");
}

}  // namespace lathe::cuda
