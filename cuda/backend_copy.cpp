// CudaBackend: copy, fill, arange, random numbers.
#include <cstring>

#include "cuda/cuda_backend.h"

namespace lathe::cuda {

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  LATHE_CHECK(src.shape() == dst.shape(), "copy: source ", src.desc(), " and destination ", dst.desc(),
              " differ in shape");
  LATHE_CHECK(src.device() == dst.device(), "copy kernel: source ", src.desc(), " and destination ", dst.desc(),
              " are on different devices");
  DeviceContext& ctx = context_of(dst);
  if (dst.numel() == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    check_cuda(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, ctx.stream),
               "copy");
    return;
  }
  const Geometry<2> g = make_geometry<2>(dst.shape(), {&dst.strides(), &src.strides()}, "copy");
  launch_copy(g, dst.data_ptr(), dt_of(dst.dtype()), src.data_ptr(), dt_of(src.dtype()), ctx.stream);
}

void CudaBackend::fill(const Tensor& dst, double value) {
  LATHE_CHECK(dst.is_contiguous(), "fill kernel: destination ", dst.desc(), " must be contiguous");
  DeviceContext& ctx = context_of(dst);
  if (dst.numel() == 0) return;
  // The value is cast on the host, exactly as the CPU backend casts it; the GPU only stores bits.
  uint64_t bits = 0;
  LATHE_DISPATCH_ALL(dst.dtype(), "fill", [&]<class T>() {
    const T v = static_cast<T>(value);
    std::memcpy(&bits, &v, sizeof(T));
  });
  if (bits == 0) {
    check_cuda(cudaMemsetAsync(dst.data_ptr(), 0, dst.nbytes(), ctx.stream), "fill");
    return;
  }
  launch_fill(dst.data_ptr(), dst.numel(), int(dtype_size(dst.dtype())), bits, ctx.stream);
}

void CudaBackend::arange(const Tensor& dst, double start, double step) {
  LATHE_CHECK(dst.is_contiguous(), "arange kernel: destination ", dst.desc(), " must be contiguous");
  DeviceContext& ctx = context_of(dst);
  launch_arange(dst.data_ptr(), dt_of(dst.dtype()), dst.numel(), start, step, ctx.stream);
}

void CudaBackend::random_uniform(const Tensor& dst, uint64_t seed, uint64_t offset, double lo, double hi) {
  LATHE_CHECK(dst.is_contiguous(), "rand kernel: destination ", dst.desc(), " must be contiguous");
  LATHE_CHECK(is_floating(dst.dtype()), "rand: dtype ", dtype_name(dst.dtype()), " is not a floating type");
  DeviceContext& ctx = context_of(dst);
  launch_random(dst.data_ptr(), dt_of(dst.dtype()), dst.numel(), seed, offset, lo, hi, /*normal=*/false, ctx.stream);
}

void CudaBackend::random_normal(const Tensor& dst, uint64_t seed, uint64_t offset, double mean, double std) {
  LATHE_CHECK(dst.is_contiguous(), "randn kernel: destination ", dst.desc(), " must be contiguous");
  LATHE_CHECK(is_floating(dst.dtype()), "randn: dtype ", dtype_name(dst.dtype()), " is not a floating type");
  DeviceContext& ctx = context_of(dst);
  launch_random(dst.data_ptr(), dt_of(dst.dtype()), dst.numel(), seed, offset, mean, std, /*normal=*/true,
                ctx.stream);
}

}  // namespace lathe::cuda
