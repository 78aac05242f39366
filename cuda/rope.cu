// Rotary position embeddings: one thread per pair (x[i], x[i + D/2]) of a head vector, turned by its
// position's angle. The arithmetic is core/cpu/rope.cpp's; 16-bit elements compute in f32.
#include "cuda/device_common.cuh"

namespace lathe::cuda {

namespace {

template <class T>
__global__ void rope_kernel(const T* __restrict__ x, const compute_t<T>* __restrict__ cos,
                            const compute_t<T>* __restrict__ sin, compute_t<T> dir, T* __restrict__ out,
                            RopeShape sh) {
  using C = compute_t<T>;
  const int64_t half = sh.D / 2;
  const int64_t n = sh.B * sh.H * sh.T * half;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = p % half, row = p / half;
    const int64_t t = row % sh.T, h = (row / sh.T) % sh.H, b = row / (sh.T * sh.H);
    const T* xr = x + b * sh.x_strides[0] + h * sh.x_strides[1] + t * sh.x_strides[2];
    T* yr = out + b * sh.out_strides[0] + h * sh.out_strides[1] + t * sh.out_strides[2];
    const C c = cos[t * half + i], s = dir * sin[t * half + i];
    const C x1 = to_c(xr[i]), x2 = to_c(xr[i + half]);
    yr[i] = from_c<T>(x1 * c - x2 * s);
    yr[i + half] = from_c<T>(x2 * c + x1 * s);
  }
}

}  // namespace

void launch_rope(DT dtype, const void* x, const void* cos, const void* sin, bool inverse, void* out,
                 const RopeShape& shape, cudaStream_t s) {
  const int64_t n = shape.B * shape.H * shape.T * (shape.D / 2);
  if (n == 0) return;
  LATHE_CUDA_DISPATCH_FLOAT(dtype, inverse ? "rope_backward" : "rope", [&]<class T>() {
    using C = compute_t<T>;
    rope_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const C*>(cos),
                                                    static_cast<const C*>(sin), inverse ? C(-1) : C(1),
                                                    static_cast<T*>(out), shape);
  });
  check_launch(inverse ? "rope_backward" : "rope");
}

}  // namespace lathe::cuda
