// Causal multi-head self-attention as GPT-2 (and nanoGPT) computes it: one fused projection
// c_attn [3C, C] gives q, k and v; each is split into n_head heads of size C / n_head; scores
// are scaled by 1/sqrt(head_size) and masked so that a position sees only itself and the past;
// the heads' outputs are joined and projected by c_proj [C, C].
//
// Two switches of the modern block act on q and k before the product (GPTConfig): rotary position
// embeddings turn them by their positions' angles (nn/rotary.h), then QK-norm normalises each
// head's q and k with an RMSNorm without weight (nanochat's order; the two commute, since a
// rotation keeps a vector's norm).
#pragma once

#include <memory>

#include "nn/layers.h"
#include "nn/rotary.h"

namespace lathe::nn {

// The keys and values one attention layer has computed so far during generation, so that each
// new token costs one query against them instead of recomputing the whole prefix. Buffers are
// [B, n_head, capacity, head_size], allocated on first use; `length` positions are filled.
struct KVCache {
  int64_t capacity = 0;
  int64_t length = 0;
  Tensor k, v;
};

class CausalSelfAttention : public Module {
 public:
  // `rotary`: the model's angle tables, or null for no rotary embeddings; `qk_norm`: RMSNorm of q
  // and k per head.
  CausalSelfAttention(int64_t n_embd, int64_t n_head, bool bias, double dropout, std::shared_ptr<Generator> gen,
                      LayerOptions opt = {}, std::shared_ptr<const RotaryTables> rotary = nullptr,
                      bool qk_norm = false);
  // x [B, T, C] -> [B, T, C]. With a cache, x holds the T positions after the cache's `length`
  // ones (rotary embeddings turn them by those positions); their keys and values are appended to
  // it (inference only, under NoGradGuard).
  Tensor forward(const Tensor& x, KVCache* cache = nullptr) const;

  int64_t n_embd, n_head;
  Linear c_attn, c_proj;
  Dropout attn_dropout, resid_dropout;
  std::shared_ptr<const RotaryTables> rotary;
  bool qk_norm;

 private:
  PolicyRef precision_;  // the two products (and RoPE and QK-norm on their q and k) in the matmul dtype,
                         // the scores' softmax in f32
};

}  // namespace lathe::nn
