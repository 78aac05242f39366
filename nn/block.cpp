#include "nn/block.h"

#include "core/ops.h"

namespace lathe::nn {

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::squared_relu: return "squared_relu";
    case Activation::swiglu: return "swiglu";
  }
  return "?";
}

int64_t mlp_hidden_size(int64_t C, Activation a) {
  if (a != Activation::swiglu) return 4 * C;
  const int64_t multiple = 64;
  return ((8 * C + 2) / 3 + multiple - 1) / multiple * multiple;
}

MLP::MLP(int64_t C, bool bias, double p, std::shared_ptr<Generator> gen, LayerOptions opt, Activation act)
    : activation(act),
      c_fc(C, mlp_hidden_size(C, act), bias, opt),
      c_proj(mlp_hidden_size(C, act), C, bias, opt),
      dropout(p, std::move(gen)),
      precision_(opt.precision) {
  register_module("c_fc", &c_fc);
  if (act == Activation::swiglu) register_module("c_gate", &c_gate.emplace(C, mlp_hidden_size(C, act), bias, opt));
  register_module("gelu", &gelu);
  register_module("c_proj", &c_proj);
  register_module("dropout", &dropout);
}

Tensor MLP::forward(const Tensor& x) const {
  Tensor a;
  switch (activation) {
    // GELU is c_fc's epilogue, in c_fc's (the matmul) dtype: the policy's activation dtype too.
    case Activation::gelu_tanh: a = c_fc.forward_gelu(x); break;
    case Activation::squared_relu: a = squared_relu(precision_.cast(OpClass::activation, c_fc.forward(x))); break;
    case Activation::swiglu: {
      const Tensor h = precision_.cast(OpClass::activation, c_fc.forward(x));
      a = mul(silu(precision_.cast(OpClass::activation, c_gate->forward(x))), h);
      break;
    }
  }
  return dropout.forward(c_proj.forward(a));
}

Block::Block(int64_t C, int64_t H, bool bias, double p, std::shared_ptr<Generator> gen, LayerOptions opt,
             const BlockOptions& o)
    : ln_1(make_norm(o.norm, C, o.norm_weight, bias, opt)),
      attn(C, H, bias, p, gen, opt, o.rotary, o.qk_norm),
      ln_2(make_norm(o.norm, C, o.norm_weight, bias, opt)),
      mlp(C, bias, p, gen, opt, o.activation) {
  register_module("ln_1", ln_1.get());
  register_module("attn", &attn);
  register_module("ln_2", ln_2.get());
  register_module("mlp", &mlp);
}

Tensor Block::forward(const Tensor& x, KVCache* cache) const { return forward(Residual{x, Tensor()}, cache).sum(); }

Residual Block::forward(const Residual& x, KVCache* cache) const {
  // The norms read the stream in the policy's residual dtype (f32); each branch's output (16-bit in
  // a 16-bit run) joins it inside the next norm, which widens it as it reads it.
  const auto [stream, h1] = ln_1->forward(x);
  const auto [stream2, h2] = ln_2->forward(Residual{stream, attn.forward(h1, cache)});
  return {stream2, mlp.forward(h2)};
}

}  // namespace lathe::nn
