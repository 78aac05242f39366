// CudaBackend: indexing, index_select / index_add / gather / scatter_add (cuda/index.cu).
//
// The op layer (core/ops/) has checked every operand. Indices are checked by the kernels
// themselves; a bad one surfaces as a lathe::Error at the host's next synchronisation with the GPU
// (see runtime.h).
#include "cuda/backend_util.h"
#include "cuda/cuda_backend.h"

namespace lathe::cuda {

void CudaBackend::index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  const Tensor xc = x.dim() ? x.contiguous() : x.reshape({1}), ic = idx.contiguous();
  IndexShape sh;
  split_around(xc, dim, sh.outer, sh.inner);
  sh.src_size = xc.shape()[size_t(dim)];
  sh.idx_size = ic.numel();
  launch_index_select(dt_of(x.dtype()), xc.data_ptr(), sh, dt_of(ic.dtype()), ic.data_ptr(), out.data_ptr(),
                      ctx.error_device, ctx.stream);
}

void CudaBackend::index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  DeviceContext& ctx = context_of(out);
  // Accumulate into a contiguous buffer (out itself when it already is one).
  const Tensor acc = out.is_contiguous() ? out : out.contiguous();
  const Tensor ac = acc.dim() ? acc : acc.reshape({1});
  const Tensor sc = src.contiguous(), ic = idx.contiguous();
  IndexShape sh;
  split_around(ac, dim, sh.outer, sh.inner);
  sh.src_size = ac.shape()[size_t(dim)];
  sh.idx_size = ic.numel();
  launch_index_add(dt_of(out.dtype()), ac.data_ptr(), sh, dt_of(ic.dtype()), ic.data_ptr(), sc.data_ptr(),
                   ctx.error_device, ctx.stream);
  if (!out.is_contiguous()) copy(acc, out);
}

void CudaBackend::gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const Tensor xv = x.dim() ? x : x.reshape({1}), iv = idx.dim() ? idx : idx.reshape({1});
  const Tensor ov = out.dim() ? out : out.reshape({1});
  Strides xs = xv.strides();
  const int64_t x_dim_stride = xs[size_t(dim)], x_dim_size = xv.shape()[size_t(dim)];
  xs[size_t(dim)] = 0;  // that coordinate comes from idx
  const Geometry<3> g = make_geometry<3>(iv.shape(), {&ov.strides(), &iv.strides(), &xs}, "gather");
  launch_gather(dt_of(x.dtype()), g, x_dim_stride, x_dim_size, dt_of(idx.dtype()), ov.data_ptr(), iv.data_ptr(),
                xv.data_ptr(), ctx.error_device, ctx.stream);
}

void CudaBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  DeviceContext& ctx = context_of(out);
  if (idx.numel() == 0) return;
  const Tensor ov = out.dim() ? out : out.reshape({1}), iv = idx.dim() ? idx : idx.reshape({1});
  const Tensor sv = src.dim() ? src : src.reshape({1});
  ScatterLine line;
  line.len = iv.shape()[size_t(dim)];
  line.idx_stride = iv.strides()[size_t(dim)];
  line.src_stride = sv.strides()[size_t(dim)];
  line.out_stride = ov.strides()[size_t(dim)];
  line.out_size = ov.shape()[size_t(dim)];
  Shape lines_shape = iv.shape();
  lines_shape[size_t(dim)] = 1;
  const Geometry<3> g =
      make_geometry<3>(lines_shape, {&iv.strides(), &sv.strides(), &ov.strides()}, "scatter_add");
  launch_scatter_add(dt_of(out.dtype()), g, line, dt_of(idx.dtype()), iv.data_ptr(), sv.data_ptr(), ov.data_ptr(),
                     ctx.error_device, ctx.stream);
}

}  // namespace lathe::cuda
