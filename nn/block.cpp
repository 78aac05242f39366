#include "nn/block.h"

#include "core/ops.h"

namespace lathe::nn {

MLP::MLP(int64_t C, bool bias, double p, std::shared_ptr<Generator> gen, LayerOptions opt)
    : c_fc(C, 4 * C, bias, opt), c_proj(4 * C, C, bias, opt), dropout(p, std::move(gen)) {
  register_module("c_fc", &c_fc);
  register_module("gelu", &gelu);
  register_module("c_proj", &c_proj);
  register_module("dropout", &dropout);
}

Tensor MLP::forward(const Tensor& x) const {
  // The GELU is c_fc's epilogue, in c_fc's (the matmul) dtype: the policy's activation dtype too.
  return dropout.forward(c_proj.forward(c_fc.forward_gelu(x)));
}

Block::Block(int64_t C, int64_t H, bool bias, double p, std::shared_ptr<Generator> gen, LayerOptions opt)
    : ln_1(C, bias, 1e-5, opt),
      attn(C, H, bias, p, gen, opt),
      ln_2(C, bias, 1e-5, opt),
      mlp(C, bias, p, gen, opt),
      precision_(opt.precision) {
  register_module("ln_1", &ln_1);
  register_module("attn", &attn);
  register_module("ln_2", &ln_2);
  register_module("mlp", &mlp);
}

Tensor Block::forward(const Tensor& x_in, KVCache* cache) const {
  // Each branch's output (16-bit in a 16-bit run) joins the f32 stream in the add, which widens it
  // as it reads it.
  Tensor x = precision_.cast(OpClass::residual, x_in);
  x = add(x, attn.forward(ln_1.forward(x), cache));
  return add(x, mlp.forward(ln_2.forward(x)));
}

}  // namespace lathe::nn
