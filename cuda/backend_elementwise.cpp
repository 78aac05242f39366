// CudaBackend: unary, binary and where over any strides, and scale_by (cuda/elementwise.cu).
#include "core/ops.h"
#include "cuda/cuda_backend.h"

namespace lathe::cuda {

// The op layer (core/ops/) has checked the operands: one device, broadcast shapes, matching
// dtypes. The op table's dtypes are checked again here, by the op layer's own rule, because the
// kernels compile only the ops each dtype has (as the CPU backend's dispatch, which refuses the
// rest): a direct call such as exp on integers is an error, not a copy of its input.
void CudaBackend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  check_op_dtype(op_name(op), op_dtypes(op), x);
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const Geometry<2> g = make_geometry<2>(out.shape(), {&out.strides(), &x.strides()}, op_name(op));
  launch_unary(op, dt_of(x.dtype()), g, out.data_ptr(), x.data_ptr(), p0, p1, ctx.stream);
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_op_dtype(op_name(op), op_dtypes(op), a);
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const Geometry<3> g = make_geometry<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()}, op_name(op));
  if (b.dtype() != a.dtype()) {  // a 16-bit branch added to the f32 stream
    LATHE_CHECK(op == BinaryOp::add && a.dtype() == DType::f32 && out.dtype() == DType::f32, "binary ", op_name(op),
                ": operands ", a.desc(), " and ", b.desc(), " differ in dtype");
    launch_add_widening(dt_of(b.dtype()), g, static_cast<float*>(out.data_ptr()),
                        static_cast<const float*>(a.data_ptr()), b.data_ptr(), ctx.stream);
    return;
  }
  launch_binary(op, dt_of(a.dtype()), g, out.data_ptr(), a.data_ptr(), b.data_ptr(), ctx.stream);
}

void CudaBackend::scale_by(const Tensor& x, const Tensor& s) {
  DeviceContext& ctx = context_of(x);
  launch_scale_by(dt_of(x.dtype()), x.data_ptr(), x.numel(), s.data_ptr(), ctx.stream);
}

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const Geometry<4> g =
      make_geometry<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()}, "where");
  launch_where(dt_of(out.dtype()), g, out.data_ptr(), cond.data_ptr(), a.data_ptr(), b.data_ptr(), ctx.stream);
}

}  // namespace lathe::cuda
