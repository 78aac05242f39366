// CudaBackend: the kernels over token ids, embedding, cross-entropy and the fused classifier
// (cuda/tokens.cu).
//
// The op layer (core/ops/) has checked every operand. Ids are checked by the kernels themselves; a
// bad one surfaces as a lathe::Error at the host's next synchronisation with the GPU (see
// runtime.h), so no kernel ever reads out of bounds and the host never waits just to validate.
#include <climits>

#include "cuda/backend_util.h"
#include "cuda/cuda_backend.h"

namespace lathe::cuda {

void CudaBackend::embedding(const Tensor& weight, const Tensor& idx, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  const Tensor w = weight.contiguous(), ic = idx.contiguous();
  const int64_t V = w.shape()[0], C = w.shape()[1], n = ic.numel();
  check_grid(n, "embedding", idx);
  launch_embedding(dt_of(w.dtype()), w.data_ptr(), V, C, dt_of(ic.dtype()), ic.data_ptr(), n, out.data_ptr(),
                   ctx.error_device, ctx.stream);
}

void CudaBackend::embedding_backward(const Tensor& idx, const Tensor& gout, const Tensor& gweight) {
  DeviceContext& ctx = context_of(gweight);
  const int64_t V = gweight.shape()[0], C = gweight.shape()[1], n = idx.numel();
  LATHE_CHECK(n < INT_MAX && V < INT_MAX, "embedding_backward: ", n, " ids over ", V,
              " rows exceed the CUDA kernel's 32-bit bucket positions");
  if (n == 0) return;
  const Tensor ic = idx.contiguous(), g = gout.contiguous();
  Tensor scratch = scratch_like(gweight, embedding_backward_scratch_bytes(V, n));
  launch_embedding_backward(dt_of(gweight.dtype()), dt_of(ic.dtype()), ic.data_ptr(), n, g.data_ptr(),
                            gweight.data_ptr(), V, C, scratch.data_ptr(), ctx.error_device, ctx.stream);
}

void CudaBackend::cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                const Tensor& losses) {
  DeviceContext& ctx = context_of(losses);
  const Tensor x = logits.contiguous(), t = targets.contiguous();
  const int64_t N = x.shape()[0], V = x.shape()[1];
  check_grid(N, "cross_entropy", logits);
  launch_cross_entropy(dt_of(x.dtype()), x.data_ptr(), N, V, dt_of(t.dtype()), t.data_ptr(), ignore_index,
                       losses.data_ptr(), ctx.error_device, ctx.stream);
}

void CudaBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                         const Tensor& gloss, const Tensor& glogits) {
  DeviceContext& ctx = context_of(glogits);
  const Tensor x = logits.contiguous(), t = targets.contiguous();
  const int64_t N = x.shape()[0], V = x.shape()[1];
  check_grid(N, "cross_entropy_backward", logits);
  // gloss is often one scalar broadcast over the rows (stride 0).
  const int64_t gstride = gloss.dim() ? gloss.strides()[0] : 0;
  launch_cross_entropy_backward(dt_of(x.dtype()), x.data_ptr(), N, V, dt_of(t.dtype()), t.data_ptr(), ignore_index,
                                gloss.data_ptr(), gstride, glogits.data_ptr(), ctx.error_device, ctx.stream);
}

void CudaBackend::cross_entropy_fused(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                      const Tensor& weight, const Tensor& losses, const Tensor& glogits) {
  DeviceContext& ctx = context_of(losses);
  const Tensor t = targets.contiguous();
  const int64_t N = logits.shape()[0], V = logits.shape()[1];
  check_grid(N, "cross_entropy_fused", logits);
  launch_cross_entropy_fused(dt_of(logits.dtype()), logits.data_ptr(), N, V, dt_of(t.dtype()), t.data_ptr(),
                             ignore_index, ptr_or_null(weight), losses.data_ptr(), mut_ptr_or_null(glogits),
                             ctx.error_device, ctx.stream);
}

}  // namespace lathe::cuda
