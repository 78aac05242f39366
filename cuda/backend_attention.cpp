// CudaBackend: fused causal attention (cuda/attention.cu).
//
// The op layer (core/ops/nn_attention.cpp) has checked shapes, dtypes and devices. The kernels read
// and write every operand 16 bytes at a time; an operand laid out otherwise (a head size that is not
// a multiple of 16 bytes' worth of elements, a view whose rows are not 16-byte aligned) goes through
// a zero-padded [B, H, T, hs'] copy, in and out. The model's operands (head views of a [B, T, 3C]
// projection, a KV cache, hs 32, 64 or 128) never need one.
#include <cstdint>

#include "core/autograd.h"
#include "cuda/backend_util.h"
#include "cuda/cuda_backend.h"

namespace lathe::cuda {

namespace {

// Elements of t's dtype in 16 bytes.
int64_t vector_width(const Tensor& t) { return 16 / int64_t(dtype_size(t.dtype())); }

// The head size the kernels see: hs rounded up to whole 16-byte vectors.
int64_t kernel_head_size(const Tensor& q) {
  const int64_t w = vector_width(q);
  return (q.size(3) + w - 1) / w * w;
}

// Whether the kernels can take t [B, H, T, hs] as it is: unit last stride, head size hs_k, rows
// starting on 16-byte boundaries (the stride of a dim of size 1 is never used).
bool kernel_ready(const Tensor& t, int64_t hs_k) {
  if (t.size(3) != hs_k || t.strides()[3] != 1) return false;
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  for (int d = 0; d < 3; ++d)
    if (t.size(d) > 1 && t.strides()[size_t(d)] % vector_width(t) != 0) return false;
  return true;
}

Shape padded_shape(const Tensor& t, int64_t hs_k) { return {t.size(0), t.size(1), t.size(2), hs_k}; }

// t itself, or a zero-padded copy the kernels can read.
Tensor readable(const Tensor& t, int64_t hs_k) {
  if (kernel_ready(t, hs_k)) return t;
  Tensor p = Tensor::zeros(padded_shape(t, hs_k), t.dtype(), t.device());
  p.narrow(3, 0, t.size(3)).copy_(t);
  return p;
}

// t itself, or a padded stand-in for the kernels to write (every element of it); finish() copies
// it into t.
struct Writable {
  Tensor target, kernel_side;
  Writable(const Tensor& t, int64_t hs_k)
      : target(t),
        kernel_side(kernel_ready(t, hs_k) ? t : Tensor::empty(padded_shape(t, hs_k), t.dtype(), t.device())) {}
  void finish() {
    if (kernel_side.data_ptr() != target.data_ptr()) target.copy_(kernel_side.narrow(3, 0, target.size(3)));
  }
};

HeadsIn heads_in(const Tensor& t) { return {t.data_ptr(), t.strides()[0], t.strides()[1], t.strides()[2]}; }
HeadsOut heads_out(const Tensor& t) { return {t.data_ptr(), t.strides()[0], t.strides()[1], t.strides()[2]}; }

AttnShape attn_shape(const Tensor& q, const Tensor& k, double scale, int64_t hs_k, const char* op) {
  // Grids are (tiles, H, B): the y and z dimensions of a launch take at most 65535.
  LATHE_CHECK(q.size(0) <= 65535 && q.size(1) <= 65535, op, ": q ", q.desc(),
              " has more batches or heads than one CUDA launch takes (65535 each)");
  return AttnShape{q.size(0), q.size(1), q.size(2), k.size(2), hs_k, float(scale)};
}

}  // namespace

bool CudaBackend::fuses(FusedKernel kernel, DType dtype, int64_t width) const {
  switch (kernel) {
    case FusedKernel::causal_attention:
      return (dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16) && width <= kAttentionMaxHeadSize;
  }
  return false;
}

void CudaBackend::causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out,
                                   const Tensor& lse) {
  LATHE_CHECK(q.size(3) <= kAttentionMaxHeadSize, "causal_attention: q ", q.desc(), " has a head size over ",
              kAttentionMaxHeadSize, ", which the CUDA kernels do not take");
  NoGradGuard no_grad;
  DeviceContext& ctx = context_of(q);
  const int64_t hs_k = kernel_head_size(q);
  const Tensor qr = readable(q, hs_k), kr = readable(k, hs_k), vr = readable(v, hs_k);
  Writable o(out, hs_k);
  launch_attention_forward(dt_of(q.dtype()), attn_shape(q, k, scale, hs_k, "causal_attention"), heads_in(qr),
                           heads_in(kr), heads_in(vr), heads_out(o.kernel_side), static_cast<float*>(lse.data_ptr()),
                           ctx.stream);
  o.finish();
}

void CudaBackend::causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                            const Tensor& lse, const Tensor& gout, double scale, const Tensor& gq,
                                            const Tensor& gk, const Tensor& gv) {
  LATHE_CHECK(q.size(3) <= kAttentionMaxHeadSize, "causal_attention_backward: q ", q.desc(), " has a head size over ",
              kAttentionMaxHeadSize, ", which the CUDA kernels do not take");
  NoGradGuard no_grad;
  DeviceContext& ctx = context_of(q);
  const int64_t hs_k = kernel_head_size(q);
  const Tensor qr = readable(q, hs_k), kr = readable(k, hs_k), vr = readable(v, hs_k), outr = readable(out, hs_k),
               goutr = readable(gout, hs_k);
  Writable dq(gq, hs_k), dk(gk, hs_k), dv(gv, hs_k);
  const size_t queries = size_t(q.size(0) * q.size(1) * q.size(2));
  const Tensor rowsums = scratch_like(q, queries * sizeof(float));
  const bool atomic = attention_backward() == AttentionBackward::atomic;
  const Tensor dq_sum = atomic ? scratch_like(q, queries * size_t(hs_k) * sizeof(float)) : Tensor();
  launch_attention_backward(dt_of(q.dtype()), attn_shape(q, k, scale, hs_k, "causal_attention_backward"),
                            heads_in(qr), heads_in(kr), heads_in(vr), heads_in(outr),
                            static_cast<const float*>(lse.data_ptr()), heads_in(goutr), heads_out(dq.kernel_side),
                            heads_out(dk.kernel_side), heads_out(dv.kernel_side),
                            static_cast<float*>(rowsums.data_ptr()),
                            atomic ? static_cast<float*>(dq_sum.data_ptr()) : nullptr, ctx.stream);
  dq.finish();
  dk.finish();
  dv.finish();
}

}  // namespace lathe::cuda
