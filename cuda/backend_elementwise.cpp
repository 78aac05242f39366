// CudaBackend: unary, binary, where, reductions.
#include <algorithm>

#include "cuda/cuda_backend.h"

namespace lathe::cuda {

// The op layer (core/ops/) has checked the operands: one device, broadcast shapes, matching
// dtypes, and an op the table defines for them.
void CudaBackend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const Geometry<2> g = make_geometry<2>(out.shape(), {&out.strides(), &x.strides()}, op_name(op));
  launch_unary(op, dt_of(x.dtype()), g, out.data_ptr(), x.data_ptr(), p0, p1, ctx.stream);
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const Geometry<3> g = make_geometry<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()}, op_name(op));
  launch_binary(op, dt_of(a.dtype()), g, out.data_ptr(), a.data_ptr(), b.data_ptr(), ctx.stream);
}

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const Geometry<4> g =
      make_geometry<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()}, "where");
  launch_where(dt_of(out.dtype()), g, out.data_ptr(), cond.data_ptr(), a.data_ptr(), b.data_ptr(), ctx.stream);
}

// Same layouts as the CPU backend: the reduced dims trailing (rows) or leading (columns) in a
// contiguous tensor are reduced in place; anything else is permuted to rows by a copy first.
void CudaBackend::reduce(ReduceOp op, const Tensor& x_in, const std::vector<int64_t>& dims, const Tensor& out) {
  LATHE_CHECK(x_in.dtype() != DType::b8, "reduce: bool tensors must be cast first");
  LATHE_CHECK(out.is_contiguous(), "reduce kernel: output ", out.desc(), " must be contiguous");
  DeviceContext& ctx = context_of(out);
  const int64_t nd = x_in.dim();
  bool trailing = true, leading = true;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != nd - int64_t(dims.size()) + int64_t(i)) trailing = false;
    if (dims[i] != int64_t(i)) leading = false;
  }
  int64_t R = 1;
  for (int64_t d : dims) R *= x_in.shape()[size_t(d)];
  const int64_t K = out.numel();
  if (K == 0) return;

  Tensor x = x_in;
  if (!(x.is_contiguous() && (trailing || leading))) {
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < nd; ++i)
      if (!std::binary_search(dims.begin(), dims.end(), i)) perm.push_back(i);
    for (int64_t d : dims) perm.push_back(d);
    x = x_in.permute(perm).contiguous();
    trailing = true;
  }
  const DT dt = dt_of(x.dtype());
  const size_t scratch_bytes = reduce_scratch_bytes(op, dt, K, R, trailing, ctx.sm_count);
  Tensor scratch = scratch_bytes ? scratch_like(x, scratch_bytes) : Tensor();
  launch_reduce(op, dt, x.data_ptr(), K, R, trailing, out.data_ptr(), scratch.defined() ? scratch.data_ptr() : nullptr,
                ctx.sm_count, ctx.stream);
}

}  // namespace lathe::cuda
