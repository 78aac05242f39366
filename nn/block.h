// The GPT-2 transformer block: pre-norm residual branches, attention then MLP.
//   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
// BlockOptions switches it to the modern block (nanochat, modded-nanogpt): RMSNorm for LayerNorm,
// ReLU^2 or SwiGLU for GELU, rotary embeddings and QK-norm in attention; the defaults are GPT-2's.
#pragma once

#include <optional>

#include "nn/attention.h"

namespace lathe::nn {

enum class Activation {
  gelu_tanh,     // GPT-2's GELU, tanh approximation
  squared_relu,  // relu(x)^2 (modded-nanogpt, nanochat)
  swiglu,        // silu(c_gate(x)) * c_fc(x) (Llama)
};
const char* activation_name(Activation a);  // "gelu_tanh", "squared_relu", "swiglu"

// The MLP's hidden width: 4 n_embd, or for SwiGLU, whose three matrices would otherwise hold half
// as many parameters again, 8 n_embd / 3 rounded up to a multiple of 64 (Llama's rule, with its
// multiple_of at 64): about the parameters of the 4 n_embd MLP.
int64_t mlp_hidden_size(int64_t n_embd, Activation a);

// The switches of the modern block, GPTConfig's; the defaults are GPT-2's block.
struct BlockOptions {
  NormKind norm = NormKind::layer_norm;
  bool norm_weight = true;  // the norms' weights; LayerNorm's bias follows the block's `bias`
  Activation activation = Activation::gelu_tanh;
  std::shared_ptr<const RotaryTables> rotary;  // null: no rotary embeddings
  bool qk_norm = false;
};

// c_fc widens to the hidden size, the activation, c_proj narrows back to C, then dropout. SwiGLU
// adds c_gate, whose SiLU multiplies c_fc's output.
class MLP : public Module {
 public:
  MLP(int64_t n_embd, bool bias, double dropout, std::shared_ptr<Generator> gen, LayerOptions opt = {},
      Activation activation = Activation::gelu_tanh);
  Tensor forward(const Tensor& x) const;

  Activation activation;
  Linear c_fc;
  std::optional<Linear> c_gate;  // SwiGLU only
  GELU gelu;  // nanoGPT's module; with gelu_tanh the forward runs it as c_fc's epilogue
  Linear c_proj;
  Dropout dropout;

 private:
  PolicyRef precision_;  // the activation runs in the policy's activation dtype
};

class Block : public Module {
 public:
  Block(int64_t n_embd, int64_t n_head, bool bias, double dropout, std::shared_ptr<Generator> gen,
        LayerOptions opt = {}, const BlockOptions& options = {});
  Tensor forward(const Tensor& x, KVCache* cache = nullptr) const;
  // The same on a stream whose last branch is still pending, leaving the MLP's branch pending in
  // turn: each add of the stream runs inside the norm that reads the sum next.
  Residual forward(const Residual& x, KVCache* cache = nullptr) const;

  std::unique_ptr<Norm> ln_1;
  CausalSelfAttention attn;
  std::unique_ptr<Norm> ln_2;
  MLP mlp;
};

}  // namespace lathe::nn
