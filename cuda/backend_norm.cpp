// CudaBackend: the row-wise normalisations, softmax, LayerNorm and RMSNorm (cuda/norm.cu).
//
// The op layer (core/ops/) has checked every operand. Row kernels take contiguous rows, so strided
// inputs are made contiguous first (as on the CPU).
#include "cuda/backend_util.h"
#include "cuda/cuda_backend.h"

namespace lathe::cuda {

void CudaBackend::softmax(const Tensor& x, const Tensor& out, bool log) {
  DeviceContext& ctx = context_of(out);
  const Tensor xc = x.contiguous();
  const auto [rows, len] = rows_of(xc);
  check_grid(rows, log ? "log_softmax" : "softmax", x);
  launch_softmax(dt_of(x.dtype()), xc.data_ptr(), out.data_ptr(), rows, len, log, ctx.stream);
}

void CudaBackend::softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  DeviceContext& ctx = context_of(gx);
  const Tensor yc = y.contiguous(), gc = gy.contiguous();
  const auto [rows, len] = rows_of(yc);
  check_grid(rows, "softmax_backward", y);
  launch_softmax_backward(dt_of(y.dtype()), yc.data_ptr(), gc.data_ptr(), gx.data_ptr(), rows, len, log, ctx.stream);
}

namespace {
NormBranch branch_of(const Tensor& branch, const Tensor& sum) {
  if (!branch.defined()) return {DT::f32, nullptr, nullptr};
  return {dt_of(branch.dtype()), branch.data_ptr(), sum.data_ptr()};
}
}  // namespace

void CudaBackend::layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                             double eps, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& sum) {
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  DeviceContext& ctx = context_of(out);
  const Tensor xc = x.contiguous(), rc = contiguous_or_undefined(residual);
  const Tensor wc = contiguous_or_undefined(weight), bc = contiguous_or_undefined(bias);
  const auto [rows, len] = rows_of(xc);
  check_grid(rows, "layer_norm", x);
  launch_layer_norm(dt_of(x.dtype()), dt_of(out.dtype()), xc.data_ptr(), branch_of(rc, sum), ptr_or_null(wc),
                    ptr_or_null(bc), eps, out.data_ptr(), mean.data_ptr(), rstd.data_ptr(), stat == DType::f64, rows,
                    len, ctx.stream);
}

void CudaBackend::layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& gy, const Tensor& gathered, const Tensor& gx,
                                      const Tensor& gweight, const Tensor& gbias) {
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  DeviceContext& ctx = context_of(gx);
  const Tensor xc = x.contiguous(), gc = gy.contiguous(), wc = contiguous_or_undefined(weight);
  const Tensor mc = mean.contiguous(), rc = rstd.contiguous(), ac = contiguous_or_undefined(gathered);
  const auto [rows, len] = rows_of(xc);
  check_grid(rows, "layer_norm_backward", x);
  const DT dt = dt_of(x.dtype());
  Tensor scratch;
  if (gweight.defined() || gbias.defined()) {
    if (rows == 0) {  // no rows: the parameter gradients are empty sums
      if (gweight.defined()) fill(gweight, 0.0);
      if (gbias.defined()) fill(gbias, 0.0);
      return;
    }
    scratch = scratch_like(x, layer_norm_backward_scratch_bytes(dt, rows, len));
  }
  launch_layer_norm_backward(dt, dt_of(gc.dtype()), xc.data_ptr(), ptr_or_null(wc), mc.data_ptr(), rc.data_ptr(),
                             stat == DType::f64, gc.data_ptr(), ptr_or_null(ac), gx.data_ptr(),
                             mut_ptr_or_null(gweight), mut_ptr_or_null(gbias), rows, len,
                             scratch.defined() ? scratch.data_ptr() : nullptr, ctx.stream);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps,
                           const Tensor& out, const Tensor& rstd, const Tensor& sum) {
  DeviceContext& ctx = context_of(out);
  const Tensor xc = x.contiguous(), rc = contiguous_or_undefined(residual), wc = contiguous_or_undefined(weight);
  const auto [rows, len] = rows_of(xc);
  check_grid(rows, "rms_norm", x);
  launch_rms_norm(dt_of(x.dtype()), dt_of(out.dtype()), xc.data_ptr(), branch_of(rc, sum), ptr_or_null(wc), eps,
                  out.data_ptr(), rstd.data_ptr(), x.dtype() == DType::f64, rows, len, ctx.stream);
}

void CudaBackend::rms_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& gy,
                                    const Tensor& gathered, const Tensor& gx, const Tensor& gweight) {
  DeviceContext& ctx = context_of(gx);
  const Tensor xc = x.contiguous(), gc = gy.contiguous(), wc = contiguous_or_undefined(weight);
  const Tensor rc = rstd.contiguous(), ac = contiguous_or_undefined(gathered);
  const auto [rows, len] = rows_of(xc);
  check_grid(rows, "rms_norm_backward", x);
  const DT dt = dt_of(x.dtype());
  Tensor scratch;
  if (gweight.defined()) {
    if (rows == 0) {  // no rows: the weight gradient is an empty sum
      fill(gweight, 0.0);
      return;
    }
    scratch = scratch_like(x, rms_norm_backward_scratch_bytes(dt, rows, len));
  }
  launch_rms_norm_backward(dt, dt_of(gc.dtype()), xc.data_ptr(), ptr_or_null(wc), rc.data_ptr(),
                           x.dtype() == DType::f64, gc.data_ptr(), ptr_or_null(ac), gx.data_ptr(),
                           mut_ptr_or_null(gweight), rows, len, scratch.defined() ? scratch.data_ptr() : nullptr,
                           ctx.stream);
}

}  // namespace lathe::cuda
