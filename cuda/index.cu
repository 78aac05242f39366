// Indexing kernels: index_select, index_add, gather, scatter_add.
//
// The accumulating ones are deterministic without float atomics: each thread owns one output
// line (every coordinate but the indexed one) and adds its entries in index order, so no two
// threads ever write the same element and the sum order is the CPU's.
#include "cuda/device_common.cuh"

namespace lathe::cuda {

namespace {

// out[o, j, i] = x[o, idx[j], i]
template <class T>
__global__ void index_select_kernel(const T* __restrict__ x, IndexShape sh, const void* idx, bool idx64,
                                    T* __restrict__ out, DeviceErrorInfo* err) {
  const int64_t n = sh.outer * sh.idx_size * sh.inner;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t i = e % sh.inner;
    const int64_t j = (e / sh.inner) % sh.idx_size;
    const int64_t o = e / (sh.inner * sh.idx_size);
    const int64_t r = load_index(idx, idx64, j);
    if (r < 0 || r >= sh.src_size) {
      report_index_error(err, kIndexSelect, r, j, sh.src_size);
      out[e] = T{};
      continue;
    }
    out[e] = x[(o * sh.src_size + r) * sh.inner + i];
  }
}

// One thread per (o, i) line: out[o, idx[j], i] += src[o, j, i] for j in order.
template <class T>
__global__ void index_add_kernel(T* __restrict__ out, IndexShape sh, const void* idx, bool idx64,
                                 const T* __restrict__ src, DeviceErrorInfo* err) {
  using C = compute_t<T>;
  const int64_t lines = sh.outer * sh.inner;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t l = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; l < lines; l += stride) {
    const int64_t o = l / sh.inner, i = l % sh.inner;
    for (int64_t j = 0; j < sh.idx_size; ++j) {
      const int64_t r = load_index(idx, idx64, j);
      if (r < 0 || r >= sh.src_size) {
        if (l == 0) report_index_error(err, kIndexAdd, r, j, sh.src_size);
        continue;
      }
      T* dst = out + (o * sh.src_size + r) * sh.inner + i;
      *dst = from_c<T>(C(to_c(*dst) + to_c(src[(o * sh.idx_size + j) * sh.inner + i])));
    }
  }
}

template <class T>
__global__ void gather_kernel(Geometry<3> g, int64_t x_dim_stride, int64_t x_dim_size, const void* idx, bool idx64,
                              T* __restrict__ out, const T* __restrict__ x, DeviceErrorInfo* err) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < g.numel; e += stride) {
    int64_t off[3];
    offsets_of(g, e, off);
    const int64_t r = load_index(idx, idx64, off[1]);
    if (r < 0 || r >= x_dim_size) {
      report_index_error(err, kGather, r, e, x_dim_size);
      out[off[0]] = T{};
      continue;
    }
    out[off[0]] = x[off[2] + r * x_dim_stride];
  }
}

template <class T>
__global__ void scatter_add_kernel(Geometry<3> lines, ScatterLine line, const void* idx, bool idx64,
                                   const T* __restrict__ src, T* __restrict__ out, DeviceErrorInfo* err) {
  using C = compute_t<T>;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t l = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; l < lines.numel; l += stride) {
    int64_t off[3];
    offsets_of(lines, l, off);
    for (int64_t j = 0; j < line.len; ++j) {
      const int64_t r = load_index(idx, idx64, off[0] + j * line.idx_stride);
      if (r < 0 || r >= line.out_size) {
        report_index_error(err, kScatterAdd, r, off[0] + j * line.idx_stride, line.out_size);
        continue;
      }
      T* dst = out + off[2] + r * line.out_stride;
      *dst = from_c<T>(C(to_c(*dst) + to_c(src[off[1] + j * line.src_stride])));
    }
  }
}

}  // namespace

void launch_index_select(DT dtype, const void* x, const IndexShape& sh, DT idx_dtype, const void* idx, void* out,
                         DeviceErrorInfo* err, cudaStream_t s) {
  const int64_t n = sh.outer * sh.idx_size * sh.inner;
  if (n == 0) return;
  LATHE_CUDA_DISPATCH_ALL(dtype, "index_select", [&]<class T>() {
    index_select_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), sh, idx, idx_dtype == DT::i64,
                                                            static_cast<T*>(out), err);
  });
  check_launch("index_select");
}

void launch_index_add(DT dtype, void* out, const IndexShape& sh, DT idx_dtype, const void* idx, const void* src,
                      DeviceErrorInfo* err, cudaStream_t s) {
  const int64_t lines = sh.outer * sh.inner;
  if (lines == 0 || sh.idx_size == 0) return;
  LATHE_CUDA_DISPATCH_ALL(dtype, "index_add", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      fail_dtype("index_add", dtype);
    } else {
      index_add_kernel<T><<<grid_for(lines), kThreads, 0, s>>>(static_cast<T*>(out), sh, idx, idx_dtype == DT::i64,
                                                               static_cast<const T*>(src), err);
    }
  });
  check_launch("index_add");
}

void launch_gather(DT dtype, const Geometry<3>& g, int64_t x_dim_stride, int64_t x_dim_size, DT idx_dtype, void* out,
                   const void* idx, const void* x, DeviceErrorInfo* err, cudaStream_t s) {
  if (g.numel == 0) return;
  LATHE_CUDA_DISPATCH_ALL(dtype, "gather", [&]<class T>() {
    gather_kernel<T><<<grid_for(g.numel), kThreads, 0, s>>>(g, x_dim_stride, x_dim_size, idx, idx_dtype == DT::i64,
                                                            static_cast<T*>(out), static_cast<const T*>(x), err);
  });
  check_launch("gather");
}

void launch_scatter_add(DT dtype, const Geometry<3>& lines, const ScatterLine& line, DT idx_dtype, const void* idx,
                        const void* src, void* out, DeviceErrorInfo* err, cudaStream_t s) {
  if (lines.numel == 0 || line.len == 0) return;
  LATHE_CUDA_DISPATCH_ALL(dtype, "scatter_add", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      fail_dtype("scatter_add", dtype);
    } else {
      scatter_add_kernel<T><<<grid_for(lines.numel), kThreads, 0, s>>>(
          lines, line, idx, idx_dtype == DT::i64, static_cast<const T*>(src), static_cast<T*>(out), err);
    }
  });
  check_launch("scatter_add");
}

}  // namespace lathe::cuda
