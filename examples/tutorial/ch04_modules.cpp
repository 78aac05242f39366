// Chapter 4 of the tutorial (docs/tutorial/04-modules.md): modules and parameters, from one Linear
// layer to the GPT block and the whole model.
#include <cstdio>
#include <iostream>
#include <memory>

#include "core/ops.h"
#include "nn/block.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "core/system_info.h"
#include "tutorial.h"

using namespace lathe;

// [tutorial:module]
// A module of our own: two Linear layers with a GELU between them. Members are registered by
// address, in order, so their parameters get hierarchical names.
class TwoLayer : public nn::Module {
 public:
  TwoLayer(int64_t in, int64_t hidden, int64_t out) : fc1(in, hidden), fc2(hidden, out, /*bias=*/false) {
    register_module("fc1", &fc1);
    register_module("fc2", &fc2);
  }
  Tensor forward(const Tensor& x) const { return fc2.forward(gelu(fc1.forward(x))); }

  nn::Linear fc1, fc2;
};
// [/tutorial:module]

// [tutorial:print]
void print_params(const nn::Module& m) {
  for (const auto& [name, p] : m.named_parameters()) std::cout << "  " << name << " " << p.desc() << "\n";
}
// [/tutorial:print]

int main() {
  std::cout << std::boolalpha;
  set_cpu_threads(1);  // one thread: small work, and bitwise reproducible
  tutorial::part("linear");
  // [tutorial:linear]
  nn::Linear lin(3, 2);          // weight [out, in] = [2, 3], bias [2], as torch.nn.Linear
  lin.weight.copy_(Tensor::from_vector<float>({1, 0, -1, 0.5, 0.5, 0.5}, {2, 3}));
  lin.bias.fill_(0.25);
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  std::cout << lin.forward(x) << "\n";  // x @ weight^T + bias
  print_params(lin);
  // [/tutorial:linear]

  tutorial::part("names");
  // [tutorial:names]
  TwoLayer net(4, 8, 2);
  print_params(net);
  std::cout << "parameters: " << net.num_params() << ", each requires_grad: "
            << net.fc1.weight.requires_grad() << "\n";
  // [/tutorial:names]

  tutorial::part("block");
  // [tutorial:block]
  // The GPT-2 block: x + attn(ln_1(x)), then + mlp(ln_2(x)). Dropout draws from a shared generator.
  auto gen = std::make_shared<Generator>(0);
  nn::Block block(/*n_embd=*/8, /*n_head=*/2, /*bias=*/true, /*dropout=*/0.0, gen);
  print_params(block);
  Tensor h = Tensor::randn({1, 5, 8}, /*seed=*/1);  // [B, T, C]
  std::cout << "block(h): " << block.forward(h).desc() << "\n";
  // [/tutorial:block]

  tutorial::part("gpt");
  // [tutorial:gpt]
  nn::GPTConfig cfg;
  cfg.vocab_size = 256, cfg.block_size = 16, cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32;
  nn::GPT model(cfg, /*seed=*/1337);
  std::cout << "parameters: " << model.num_params() << " (" << model.state_dict().size()
            << " names; lm_head.weight is transformer.wte.weight: "
            << (model.lm_head.weight.id() == model.transformer.wte.weight.id()) << ")\n";
  Tensor idx = Tensor::randint(0, 256, {2, 16}, /*seed=*/5);
  nn::GPTOutput out = model.forward(idx, /*targets=*/idx);
  std::printf("logits %s, loss %.3f (uniform guessing: ln 256 = 5.545)\n", out.logits.desc().c_str(),
              out.loss.item());
  // [/tutorial:gpt]
  return 0;
}
