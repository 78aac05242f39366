// Kernels indexed by token ids: embedding (ids pick rows) and cross-entropy (targets pick
// classes), forward and backward, and the fused classifier, following core/cpu/tokens.cpp.
//
// Ids out of range are recorded in the device's error flag (never read out of bounds); the host
// raises the error at its next synchronisation. The embedding gradient is deterministic without
// float atomics: positions are bucketed by id (integer atomics only), each bucket is sorted, and
// one block per vocabulary row adds its positions in increasing order, as the CPU does.
#include <climits>

#include "cuda/device_common.cuh"

namespace lathe::cuda {

namespace {

// ---- embedding forward: one block per token, the row copied in the widest unit that fits ----
template <class U>
__global__ void embedding_kernel(const U* __restrict__ weight, int64_t vocab, int64_t row_units, const void* ids,
                                 bool ids64, U* __restrict__ out, DeviceErrorInfo* err) {
  const int64_t n = blockIdx.x;
  const int64_t id = load_index(ids, ids64, n);
  U* dst = out + n * row_units;
  if (id < 0 || id >= vocab) {
    if (threadIdx.x == 0) report_index_error(err, kEmbeddingId, id, n, vocab);
    for (int64_t i = threadIdx.x; i < row_units; i += blockDim.x) dst[i] = U{};
    return;
  }
  const U* src = weight + id * row_units;
  for (int64_t i = threadIdx.x; i < row_units; i += blockDim.x) dst[i] = src[i];
}

template <class U>
void run_embedding(const void* weight, int64_t vocab, int64_t row_bytes, const void* ids, bool ids64, int64_t n,
                   void* out, DeviceErrorInfo* err, cudaStream_t s) {
  const int64_t units = row_bytes / int64_t(sizeof(U));
  int threads = int((units + 31) / 32 * 32);
  if (threads > 256) threads = 256;
  if (threads < 32) threads = 32;
  embedding_kernel<U><<<unsigned(n), threads, 0, s>>>(static_cast<const U*>(weight), vocab, units, ids, ids64,
                                                      static_cast<U*>(out), err);
}

// ---- embedding backward ----
__global__ void count_ids_kernel(const void* ids, bool ids64, int64_t n, int64_t vocab, int* counts,
                                 DeviceErrorInfo* err) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t id = load_index(ids, ids64, i);
    if (id < 0 || id >= vocab) report_index_error(err, kEmbeddingId, id, i, vocab);
    else atomicAdd(counts + id, 1);
  }
}

// starts[v] = sum of counts[0, v) for v in [0, vocab]: one block, each thread a contiguous segment.
constexpr int kScanThreads = 1024;
__global__ void exclusive_scan_kernel(const int* counts, int64_t vocab, int* starts) {
  __shared__ int sums[kScanThreads];
  const int64_t seg = (vocab + kScanThreads - 1) / kScanThreads;
  const int64_t b = threadIdx.x * seg;
  const int64_t e = b + seg < vocab ? b + seg : vocab;
  int local = 0;
  for (int64_t v = b; v < e; ++v) local += counts[v];
  sums[threadIdx.x] = local;
  __syncthreads();
  // Hillis-Steele inclusive scan of the per-thread sums.
  for (int off = 1; off < kScanThreads; off <<= 1) {
    const int add = int(threadIdx.x) >= off ? sums[threadIdx.x - off] : 0;
    __syncthreads();
    sums[threadIdx.x] += add;
    __syncthreads();
  }
  int run = sums[threadIdx.x] - local;
  for (int64_t v = b; v < e; ++v) {
    starts[v] = run;
    run += counts[v];
  }
  if (threadIdx.x == kScanThreads - 1) starts[vocab] = sums[kScanThreads - 1];
}

// Bucket positions by id; the order inside a bucket is arbitrary here and sorted later.
__global__ void fill_buckets_kernel(const void* ids, bool ids64, int64_t n, int64_t vocab, int* cursor, int* order) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t id = load_index(ids, ids64, i);
    if (id >= 0 && id < vocab) order[atomicAdd(cursor + id, 1)] = int(i);
  }
}

constexpr int kAccThreads = 256;
constexpr int kSortCap = 2048;       // buckets up to this size are sorted in shared memory
constexpr int kColsPerThread = 4;

// One block per vocabulary row v: gweight[v] += sum of gout[p] over the positions p with id v, in
// increasing p. Small buckets are sorted in shared memory (bitonic); a large bucket is instead
// rebuilt in order by scanning the ids a block-width at a time.
template <class T>
__global__ void embedding_accumulate_kernel(const void* ids, bool ids64, int64_t n, const int* starts,
                                            const int* order, const T* __restrict__ gout, T* __restrict__ gw,
                                            int64_t dim) {
  using C = compute_t<T>;
  __shared__ int pos[kSortCap];
  __shared__ int warp_counts[kAccThreads / 32];
  const int64_t v = blockIdx.x;
  const int b = starts[v], k = starts[v + 1] - b;
  if (k == 0) return;
  const int tid = threadIdx.x;
  const bool small = k <= kSortCap;
  if (small) {
    int p2 = 1;
    while (p2 < k) p2 <<= 1;
    for (int i = tid; i < p2; i += blockDim.x) pos[i] = i < k ? order[b + i] : INT_MAX;
    __syncthreads();
    for (int size = 2; size <= p2; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        for (int i = tid; i < p2; i += blockDim.x) {
          const int j = i ^ stride;
          if (j > i) {
            const bool up = (i & size) == 0;
            const int a = pos[i], c = pos[j];
            if ((a > c) == up) {
              pos[i] = c;
              pos[j] = a;
            }
          }
        }
        __syncthreads();
      }
    }
  }
  T* row = gw + v * dim;
  for (int64_t c0 = 0; c0 < dim; c0 += int64_t(blockDim.x) * kColsPerThread) {
    C acc[kColsPerThread];
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) {
      const int64_t col = c0 + int64_t(j) * blockDim.x + tid;
      acc[j] = col < dim ? to_c(row[col]) : C(0);
    }
    auto add_rows = [&](int count) {
      for (int p = 0; p < count; ++p) {
        const T* src = gout + int64_t(pos[p]) * dim;
#pragma unroll
        for (int j = 0; j < kColsPerThread; ++j) {
          const int64_t col = c0 + int64_t(j) * blockDim.x + tid;
          if (col < dim) acc[j] += to_c(src[col]);
        }
      }
    };
    if (small) {
      add_rows(k);
    } else {
      const int lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
      for (int64_t base = 0; base < n; base += blockDim.x) {
        const int64_t i = base + tid;
        const bool hit = i < n && load_index(ids, ids64, i) == v;
        const unsigned mask = __ballot_sync(0xffffffffu, hit);
        if (lane == 0) warp_counts[warp] = __popc(mask);
        __syncthreads();
        int before = 0, total = 0;
        for (int w = 0; w < warps; ++w) {
          if (w < warp) before += warp_counts[w];
          total += warp_counts[w];
        }
        if (hit) pos[before + __popc(mask & ((1u << lane) - 1u))] = int(i);
        __syncthreads();
        add_rows(total);
        __syncthreads();  // pos and warp_counts are rewritten next round
      }
    }
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) {
      const int64_t col = c0 + int64_t(j) * blockDim.x + tid;
      if (col < dim) row[col] = from_c<T>(acc[j]);
    }
  }
}

// ---- cross-entropy: one block per row ----
template <class T>
__device__ __forceinline__ MaxSum<compute_t<T>> row_max_sum(const T* xr, int64_t len) {
  using C = compute_t<T>;
  __shared__ MaxSum<C> shared[32];
  MaxSum<C> ms{m_lowest<C>(), C(0)};
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) ms = add_ms(ms, to_c(xr[i]));
  return block_allreduce(ms, [](MaxSum<C> a, MaxSum<C> b) { return combine_ms(a, b); }, shared);
}

// loss[n] = log(sum(exp(x - m))) + m - x[t]
template <class T>
__global__ void cross_entropy_kernel(const T* __restrict__ logits, int64_t classes, const void* targets, bool t64,
                                     int64_t ignore_index, T* __restrict__ losses, DeviceErrorInfo* err) {
  using C = compute_t<T>;
  const int64_t row = blockIdx.x;
  const int64_t t = load_index(targets, t64, row);
  if (t == ignore_index) {
    if (threadIdx.x == 0) losses[row] = from_c<T>(C(0));
    return;
  }
  if (t < 0 || t >= classes) {
    if (threadIdx.x == 0) {
      report_index_error(err, kCrossEntropyTarget, t, row, classes);
      losses[row] = from_c<T>(C(__int_as_float(0x7fc00000)));  // NaN
    }
    return;
  }
  const T* xr = logits + row * classes;
  const MaxSum<C> ms = row_max_sum(xr, classes);
  if (threadIdx.x == 0) losses[row] = from_c<T>(m_log(ms.s) + (ms.m - to_c(xr[t])));
}

// glogits[n] = (softmax(logits[n]) - onehot(t)) * gloss[n], recomputed from the logits.
template <class T>
__global__ void cross_entropy_backward_kernel(const T* __restrict__ logits, int64_t classes, const void* targets,
                                              bool t64, int64_t ignore_index, const T* __restrict__ gloss,
                                              int64_t gloss_stride, T* __restrict__ glogits, DeviceErrorInfo* err) {
  using C = compute_t<T>;
  const int64_t row = blockIdx.x;
  const int64_t t = load_index(targets, t64, row);
  T* o = glogits + row * classes;
  if (t == ignore_index || t < 0 || t >= classes) {
    if (t != ignore_index && threadIdx.x == 0) report_index_error(err, kCrossEntropyTarget, t, row, classes);
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) o[i] = from_c<T>(C(0));
    return;
  }
  const T* xr = logits + row * classes;
  const C gl = to_c(gloss[row * gloss_stride]);
  const MaxSum<C> ms = row_max_sum(xr, classes);
  const C scale = gl / ms.s;
  for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) {
    C g = m_exp(to_c(xr[i]) - ms.m) * scale;
    if (i == t) g -= gl;
    o[i] = from_c<T>(g);
  }
}

// ---- the fused classifier: one block per row, its loss and (optionally) its gradient row ----
// Pass 1 reads the row for its max and sum of exponentials (online per thread, then over the
// block); pass 2 reads it again (from L2 mostly: a row of GPT-2's 50,304 classes is 100 KB in
// bf16) and writes (exp(x - m) / s - onehot(t)) * w, as the CPU does. Rows are read in packs of
// V elements (16 bytes) where the row length and the pointers allow. x[t] is read before the block
// reduction, whose barriers order every read of pass 1 before any write of pass 2, so the
// gradient may overwrite the logits (glogits == logits: no __restrict__ on either).
template <class T, int V>
__global__ void cross_entropy_fused_kernel(const T* logits, int64_t classes, const void* targets, bool t64,
                                           int64_t ignore_index, const compute_t<T>* weight,
                                           compute_t<T>* __restrict__ losses, T* glogits, DeviceErrorInfo* err) {
  using C = compute_t<T>;
  __shared__ MaxSum<C> shared[32];
  const int64_t row = blockIdx.x;
  const int64_t t = load_index(targets, t64, row);
  T* o = glogits ? glogits + row * classes : nullptr;
  if (t == ignore_index || t < 0 || t >= classes) {
    if (threadIdx.x == 0) {
      if (t != ignore_index) report_index_error(err, kCrossEntropyTarget, t, row, classes);
      losses[row] = t == ignore_index ? C(0) : C(__int_as_float(0x7fc00000));  // NaN for a bad target
    }
    if (o)
      for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) o[i] = from_c<T>(C(0));
    return;
  }
  const T* xr = logits + row * classes;
  const C xt = to_c(xr[t]);
  const int64_t packs = classes / V;
  MaxSum<C> ms{m_lowest<C>(), C(0)};
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const Pack<T, V> p = reinterpret_cast<const Pack<T, V>*>(xr)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) ms = add_ms(ms, to_c(p.v[k]));
  }
  ms = block_allreduce(ms, [](MaxSum<C> a, MaxSum<C> b) { return combine_ms(a, b); }, shared);
  if (threadIdx.x == 0) losses[row] = m_log(ms.s) + (ms.m - xt);
  if (!o) return;
  const C w = *weight;
  const C scale = w / ms.s;
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const Pack<T, V> p = reinterpret_cast<const Pack<T, V>*>(xr)[i];
    Pack<T, V> g;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      C v = m_exp(to_c(p.v[k]) - ms.m) * scale;
      if (i * V + k == t) v -= w;
      g.v[k] = from_c<T>(v);
    }
    reinterpret_cast<Pack<T, V>*>(o)[i] = g;
  }
}

template <class T, int V>
void run_cross_entropy_fused(const void* logits, int64_t rows, int64_t classes, const void* targets, bool t64,
                             int64_t ignore_index, const void* weight, void* losses, void* glogits,
                             DeviceErrorInfo* err, cudaStream_t s) {
  using C = compute_t<T>;
  cross_entropy_fused_kernel<T, V><<<unsigned(rows), row_threads(classes / V), 0, s>>>(
      static_cast<const T*>(logits), classes, targets, t64, ignore_index, static_cast<const C*>(weight),
      static_cast<C*>(losses), static_cast<T*>(glogits), err);
}

}  // namespace

void launch_embedding(DT dtype, const void* weight, int64_t vocab, int64_t dim, DT idx_dtype, const void* idx,
                      int64_t n, void* out, DeviceErrorInfo* err, cudaStream_t s) {
  if (n == 0 || dim == 0) return;
  static const int sizes[] = {4, 8, 2, 2, 4, 8, 1};
  const int64_t row_bytes = dim * sizes[int(dtype)];
  const bool ids64 = idx_dtype == DT::i64;
  auto fits = [&](int64_t unit) {
    return row_bytes % unit == 0 && aligned_to(weight, size_t(unit)) && aligned_to(out, size_t(unit));
  };
  if (fits(16)) run_embedding<uint4>(weight, vocab, row_bytes, idx, ids64, n, out, err, s);
  else if (fits(8)) run_embedding<uint2>(weight, vocab, row_bytes, idx, ids64, n, out, err, s);
  else if (fits(4)) run_embedding<uint32_t>(weight, vocab, row_bytes, idx, ids64, n, out, err, s);
  else if (fits(2)) run_embedding<uint16_t>(weight, vocab, row_bytes, idx, ids64, n, out, err, s);
  else run_embedding<uint8_t>(weight, vocab, row_bytes, idx, ids64, n, out, err, s);
  check_launch("embedding");
}

// counts [vocab] | starts [vocab + 1] | order [n], all int32.
size_t embedding_backward_scratch_bytes(int64_t vocab, int64_t n) {
  return size_t(2 * vocab + 1 + n) * sizeof(int);
}

void launch_embedding_backward(DT dtype, DT idx_dtype, const void* idx, int64_t n, const void* gout, void* gweight,
                               int64_t vocab, int64_t dim, void* scratch, DeviceErrorInfo* err, cudaStream_t s) {
  if (n == 0 || dim == 0 || vocab == 0) {
    // Still validate the ids, as the CPU does.
    if (n > 0 && vocab == 0) {
      int* counts = static_cast<int*>(scratch);
      count_ids_kernel<<<grid_for(n), kThreads, 0, s>>>(idx, idx_dtype == DT::i64, n, vocab, counts, err);
      check_launch("embedding_backward");
    }
    return;
  }
  const bool ids64 = idx_dtype == DT::i64;
  int* counts = static_cast<int*>(scratch);
  int* starts = counts + vocab;
  int* order = starts + vocab + 1;
  check_cuda(cudaMemsetAsync(counts, 0, size_t(vocab) * sizeof(int), s), "embedding_backward");
  count_ids_kernel<<<grid_for(n), kThreads, 0, s>>>(idx, ids64, n, vocab, counts, err);
  exclusive_scan_kernel<<<1, kScanThreads, 0, s>>>(counts, vocab, starts);
  // counts becomes the fill cursor: a copy of starts[0, vocab).
  check_cuda(cudaMemcpyAsync(counts, starts, size_t(vocab) * sizeof(int), cudaMemcpyDeviceToDevice, s),
             "embedding_backward");
  fill_buckets_kernel<<<grid_for(n), kThreads, 0, s>>>(idx, ids64, n, vocab, counts, order);
  LATHE_CUDA_DISPATCH_FLOAT(dtype, "embedding_backward", [&]<class T>() {
    embedding_accumulate_kernel<T><<<unsigned(vocab), kAccThreads, 0, s>>>(
        idx, ids64, n, starts, order, static_cast<const T*>(gout), static_cast<T*>(gweight), dim);
  });
  check_launch("embedding_backward");
}

void launch_cross_entropy(DT dtype, const void* logits, int64_t rows, int64_t classes, DT t_dtype, const void* targets,
                          int64_t ignore_index, void* losses, DeviceErrorInfo* err, cudaStream_t s) {
  if (rows == 0) return;
  LATHE_CUDA_DISPATCH_FLOAT(dtype, "cross_entropy", [&]<class T>() {
    cross_entropy_kernel<T><<<unsigned(rows), row_threads(classes), 0, s>>>(
        static_cast<const T*>(logits), classes, targets, t_dtype == DT::i64, ignore_index, static_cast<T*>(losses),
        err);
  });
  check_launch("cross_entropy");
}

void launch_cross_entropy_backward(DT dtype, const void* logits, int64_t rows, int64_t classes, DT t_dtype,
                                   const void* targets, int64_t ignore_index, const void* gloss, int64_t gloss_stride,
                                   void* glogits, DeviceErrorInfo* err, cudaStream_t s) {
  if (rows == 0) return;
  LATHE_CUDA_DISPATCH_FLOAT(dtype, "cross_entropy_backward", [&]<class T>() {
    cross_entropy_backward_kernel<T><<<unsigned(rows), row_threads(classes), 0, s>>>(
        static_cast<const T*>(logits), classes, targets, t_dtype == DT::i64, ignore_index,
        static_cast<const T*>(gloss), gloss_stride, static_cast<T*>(glogits), err);
  });
  check_launch("cross_entropy_backward");
}

void launch_cross_entropy_fused(DT dtype, const void* logits, int64_t rows, int64_t classes, DT t_dtype,
                                const void* targets, int64_t ignore_index, const void* weight, void* losses,
                                void* glogits, DeviceErrorInfo* err, cudaStream_t s) {
  if (rows == 0) return;
  const bool t64 = t_dtype == DT::i64;
  LATHE_CUDA_DISPATCH_FLOAT(dtype, "cross_entropy_fused", [&]<class T>() {
    // Packs of 16 bytes when every row starts on one: the row length a multiple of the pack.
    constexpr int V = pack_width<T>();
    const bool packed = classes % V == 0 && aligned_to(logits, 16) && (!glogits || aligned_to(glogits, 16));
    if (packed)
      run_cross_entropy_fused<T, V>(logits, rows, classes, targets, t64, ignore_index, weight, losses, glogits, err, s);
    else
      run_cross_entropy_fused<T, 1>(logits, rows, classes, targets, t64, ignore_index, weight, losses, glogits, err, s);
  });
  check_launch("cross_entropy_fused");
}

}  // namespace lathe::cuda
