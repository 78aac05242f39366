// The GPT-2 transformer block: pre-LayerNorm residual branches, attention then MLP.
//   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
#pragma once

#include "nn/attention.h"

namespace lathe::nn {

// c_fc widens to 4C, GELU (tanh), c_proj narrows back to C, then dropout.
class MLP : public Module {
 public:
  MLP(int64_t n_embd, bool bias, double dropout, std::shared_ptr<Generator> gen, LayerOptions opt = {});
  Tensor forward(const Tensor& x) const;

  Linear c_fc;
  GELU gelu;  // nanoGPT's module; the forward runs it as c_fc's epilogue (Linear::forward_gelu)
  Linear c_proj;
  Dropout dropout;
};

class Block : public Module {
 public:
  Block(int64_t n_embd, int64_t n_head, bool bias, double dropout, std::shared_ptr<Generator> gen,
        LayerOptions opt = {});
  Tensor forward(const Tensor& x, KVCache* cache = nullptr) const;

  LayerNorm ln_1;
  CausalSelfAttention attn;
  LayerNorm ln_2;
  MLP mlp;

 private:
  PolicyRef precision_;  // the residual stream stays in the policy's residual dtype (f32)
};

}  // namespace lathe::nn
