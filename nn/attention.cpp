#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/ops.h"

namespace lathe::nn {

namespace {

// [T, Tk]: 0 where query i (at position past + i) may see key j, -inf where j is in its future.
// Added to the scores rather than applied with masked_fill: its backward is one reduction of
// the incoming gradient, where masked_fill's would make three full passes.
Tensor causal_bias(int64_t T, int64_t Tk, int64_t past, DType dtype, Device device) {
  NoGradGuard no_grad;
  Tensor key_pos = Tensor::arange(0, Tk, 1, DType::i64, device).view({1, Tk});
  Tensor query_pos = Tensor::arange(past, past + T, 1, DType::i64, device).view({T, 1});
  return where(gt(key_pos, query_pos), Tensor::scalar(-std::numeric_limits<double>::infinity(), dtype, device),
               Tensor::scalar(0.0, dtype, device));
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(int64_t C, int64_t H, bool bias, double dropout,
                                         std::shared_ptr<Generator> gen, LayerOptions opt,
                                         std::shared_ptr<const RotaryTables> rotary_tables, bool qk_norm_)
    : n_embd(C),
      n_head(H),
      c_attn(C, 3 * C, bias, opt),
      c_proj(C, C, bias, opt),
      attn_dropout(dropout, gen),
      resid_dropout(dropout, gen),
      rotary(std::move(rotary_tables)),
      qk_norm(qk_norm_),
      precision_(opt.precision) {
  LATHE_CHECK(H > 0 && C % H == 0, "CausalSelfAttention: n_embd (", C, ") must be a multiple of n_head (", H, ")");
  register_module("c_attn", &c_attn);
  register_module("c_proj", &c_proj);
  register_module("attn_dropout", &attn_dropout);
  register_module("resid_dropout", &resid_dropout);
}

Tensor CausalSelfAttention::forward(const Tensor& x, KVCache* cache) const {
  LATHE_CHECK(x.dim() == 3 && x.size(2) == n_embd, "CausalSelfAttention: input ", x.desc(), " must be [B, T, ",
              n_embd, "]");
  const int64_t B = x.size(0), T = x.size(1), C = n_embd, H = n_head, hs = C / H;
  const double scale = 1.0 / std::sqrt(double(hs));
  const PolicyRef& p = precision_;

  // q, k, v stay views into the one projection output, in the products' dtype:
  // [B, T, 3C] -> three [B, H, T, hs].
  const Tensor qkv = p.cast(OpClass::matmul, c_attn.forward(x));
  auto head_view = [&](int64_t i) { return qkv.narrow(2, i * C, C).view({B, T, H, hs}).transpose(1, 2); };

  // Rotary embeddings and QK-norm make q and k new tensors (in the products' dtype), at the
  // positions after the cache's.
  const int64_t past = cache ? cache->length : 0;
  Tensor q = head_view(0), k = head_view(1), v = head_view(2);
  const bool new_qk = rotary || qk_norm;
  if (rotary) {
    const auto [cos, sin] = rotary->rows(past, T, q.dtype(), x.device());
    q = rope(q, cos, sin);
    k = rope(k, cos, sin);
  }
  if (qk_norm) {
    // Each head vector on its own, so the rows may be taken in [B, T, H, hs] order: the layout rope
    // writes, read in place (a [B, H, T, hs] order would copy them first).
    auto normalised = [](const Tensor& h) { return rms_norm(h.transpose(1, 2), Tensor(), 1e-5).transpose(1, 2); };
    q = normalised(q);
    k = normalised(k);
  }

  // Wherever the backend fuses attention for the products' dtype, one kernel does it all: it takes
  // q, k and v in that dtype and computes the scores and their softmax in f32 (f64 for f64), as
  // the policy's softmax class asks (nn/precision.h), without keeping [B, H, T, Tk] scores or
  // probabilities, and skipping the masked half of the products. Training reads the heads straight
  // out of the projection (causal_attention_qkv) unless RoPE or QK-norm made q and k new tensors;
  // then, and when sampling with a KV cache, it takes three head views. Attention dropout, which
  // masks the probabilities, takes the composed path.
  const bool attn_dropout_active = attn_dropout.is_training() && attn_dropout.p > 0.0;
  const bool fused =
      !attn_dropout_active && backend_for(x.device()).fuses(FusedKernel::causal_attention, qkv.dtype(), hs);
  if (fused && !cache && !new_qk) return resid_dropout.forward(c_proj.forward(causal_attention_qkv(qkv, H, scale)));

  if (cache) {
    LATHE_CHECK(!grad_enabled() || !x.requires_grad(),
                "CausalSelfAttention: a KV cache is for inference; run it under NoGradGuard");
    if (!cache->k.defined() || cache->k.size(0) != B || cache->k.dtype() != k.dtype() ||
        cache->k.device() != x.device()) {
      LATHE_CHECK(cache->length == 0, "CausalSelfAttention: the KV cache holds ", cache->length,
                  " positions of another batch; reset it first");
      cache->k = Tensor::empty({B, H, cache->capacity, hs}, k.dtype(), x.device());
      cache->v = Tensor::empty({B, H, cache->capacity, hs}, v.dtype(), x.device());
    }
    LATHE_CHECK(past + T <= cache->capacity, "CausalSelfAttention: ", past, " cached + ", T,
                " new positions exceed the cache capacity ", cache->capacity);
    cache->k.narrow(2, past, T).copy_(k);
    cache->v.narrow(2, past, T).copy_(v);
    cache->length = past + T;
    k = cache->k.narrow(2, 0, past + T);
    v = cache->v.narrow(2, 0, past + T);
  }
  const int64_t Tk = past + T;

  Tensor y;  // [B, H, T, hs]
  if (fused) {
    y = causal_attention(q, k, v, scale);  // the queries come after the `past` cached keys
  } else {
    // Scaling q (T x hs values) is cheaper than scaling the scores (T x Tk).
    const Tensor q_scaled = mul(q, scale);
    Tensor att = matmul(p.cast(OpClass::matmul, q_scaled), p.cast(OpClass::matmul, k).transpose(-2, -1));  // [B, H, T, Tk]
    att = p.cast(OpClass::softmax, att);
    // One query at the newest position sees every key: no mask needed.
    if (T > 1) att = add(att, causal_bias(T, Tk, past, att.dtype(), att.device()));
    att = attn_dropout.forward(softmax(att, -1));
    y = matmul(p.cast(OpClass::matmul, att), p.cast(OpClass::matmul, v));
  }
  y = y.transpose(1, 2).reshape({B, T, C});  // heads side by side again
  return resid_dropout.forward(c_proj.forward(y));
}

}  // namespace lathe::nn
