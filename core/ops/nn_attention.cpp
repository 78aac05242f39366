// Fused causal attention, its forward and backward side by side; the kernels are the backend's
// (core/cpu/attention.cpp, cuda/attention.cu). A backend that does not fuse the dtype and head size
// (Backend::fuses) gets the same attention composed of matmul and softmax.
#include <limits>

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

namespace {

// The kernels read rows with a unit last stride; any other layout is copied once.
Tensor rows_unit_stride(const Tensor& t) { return t.strides().back() == 1 ? t : t.contiguous(); }

// Each query's log-sum-exp, in the dtype the kernels compute in.
DType lse_dtype(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }

// softmax(scale q k^T + mask) v, the mask -inf where a key lies in the query's future (query i
// at position Tk - Tq + i).
Tensor composed_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  const int64_t Tq = q.size(2), Tk = k.size(2);
  Tensor future;
  {
    NoGradGuard no_grad;
    const Tensor key_pos = Tensor::arange(0, Tk, 1, DType::i64, q.device()).view({1, Tk});
    const Tensor query_pos = Tensor::arange(Tk - Tq, Tk, 1, DType::i64, q.device()).view({Tq, 1});
    future = gt(key_pos, query_pos);
  }
  Tensor scores = masked_fill(mul(matmul(q, k.transpose(-2, -1)), scale), future,
                              -std::numeric_limits<double>::infinity());
  return matmul(softmax(scores, -1), v);
}

}  // namespace

Tensor causal_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, double scale) {
  check_same_device("causal_attention", {q_in, k_in, v_in});
  check_floating("causal_attention", q_in, "q");
  LATHE_CHECK(q_in.dim() == 4, "causal_attention: q ", q_in.desc(), " must be [B, H, T, head_size]");
  LATHE_CHECK(k_in.shape() == v_in.shape() && k_in.dim() == 4 && k_in.size(0) == q_in.size(0) &&
                  k_in.size(1) == q_in.size(1) && k_in.size(3) == q_in.size(3) && k_in.size(2) >= q_in.size(2),
              "causal_attention: k ", k_in.desc(), " and v ", v_in.desc(), " must have q's shape ", q_in.desc(),
              " (or more positions: keys before the queries)");
  LATHE_CHECK(k_in.dtype() == q_in.dtype() && v_in.dtype() == q_in.dtype(), "causal_attention: q ", q_in.desc(),
              ", k ", k_in.desc(), " and v ", v_in.desc(), " differ in dtype");
  const int64_t B = q_in.size(0), H = q_in.size(1), T = q_in.size(2), hs = q_in.size(3);
  Backend& backend = backend_for(q_in.device());
  if (!backend.fuses(FusedKernel::causal_attention, q_in.dtype(), hs))
    return composed_causal_attention(q_in, k_in, v_in, scale);
  const Tensor q = rows_unit_stride(q_in.detach()), k = rows_unit_stride(k_in.detach()),
               v = rows_unit_stride(v_in.detach());

  // Written as [B, T, H, hs], so that the caller's transpose back to heads side by side is free.
  Tensor out = Tensor::empty({B, T, H, hs}, q.dtype(), q.device()).transpose(1, 2);
  Tensor lse = Tensor::empty({B, H, T}, lse_dtype(q.dtype()), q.device());
  if (out.numel() > 0) backend.causal_attention(q, k, v, scale, out, lse);

  return record("causal_attention", out, {q_in, k_in, v_in}, [q, k, v, out = out.detach(), lse, scale](const Tensor& g) {
    Tensor gq = Tensor::empty(q.shape(), q.dtype(), q.device());
    Tensor gk = Tensor::empty(k.shape(), k.dtype(), k.device());
    Tensor gv = Tensor::empty(v.shape(), v.dtype(), v.device());
    if (gq.numel() > 0)
      backend_for(g.device()).causal_attention_backward(q, k, v, out, lse, rows_unit_stride(g), scale, gq, gk, gv);
    return std::vector<Tensor>{gq, gk, gv};
  });
}

Tensor causal_attention_qkv(const Tensor& qkv_in, int64_t n_head, double scale) {
  check_floating("causal_attention_qkv", qkv_in, "qkv");
  LATHE_CHECK(qkv_in.dim() == 3 && n_head > 0 && qkv_in.size(2) % (3 * n_head) == 0, "causal_attention_qkv: qkv ",
              qkv_in.desc(), " must be [B, T, 3 * n_head * head_size] with n_head = ", n_head);
  const int64_t B = qkv_in.size(0), T = qkv_in.size(1), C = qkv_in.size(2) / 3, H = n_head, hs = C / H;
  // Part i (0: q, 1: k, 2: v) of a [B, T, 3C] tensor as [B, H, T, hs] head views.
  auto heads = [=](const Tensor& t, int64_t i) { return t.narrow(2, i * C, C).view({B, T, H, hs}).transpose(1, 2); };
  Backend& backend = backend_for(qkv_in.device());
  if (!backend.fuses(FusedKernel::causal_attention, qkv_in.dtype(), hs)) {
    const Tensor x = qkv_in.contiguous();
    return causal_attention(heads(x, 0), heads(x, 1), heads(x, 2), scale).transpose(1, 2).reshape({B, T, C});
  }
  const Tensor qkv = qkv_in.detach().contiguous();
  Tensor out = Tensor::empty({B, T, H, hs}, qkv.dtype(), qkv.device()).transpose(1, 2);
  Tensor lse = Tensor::empty({B, H, T}, lse_dtype(qkv.dtype()), qkv.device());
  if (out.numel() > 0) backend.causal_attention(heads(qkv, 0), heads(qkv, 1), heads(qkv, 2), scale, out, lse);

  Tensor y = out.transpose(1, 2).reshape({B, T, C});
  return record("causal_attention_qkv", y, {qkv_in}, [=, out = out.detach()](const Tensor& g) {
    // The kernel writes every element of the three gradients, so they start uninitialised.
    Tensor gqkv = Tensor::empty(qkv.shape(), qkv.dtype(), qkv.device());
    const Tensor gout = g.contiguous().view({B, T, H, hs}).transpose(1, 2);
    if (gqkv.numel() > 0)
      backend_for(g.device()).causal_attention_backward(heads(qkv, 0), heads(qkv, 1), heads(qkv, 2), out, lse, gout,
                                                        scale, heads(gqkv, 0), heads(gqkv, 1), heads(gqkv, 2));
    return std::vector<Tensor>{gqkv};
  });
}

}  // namespace lathe
