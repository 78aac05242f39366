// Chapter 6 of the tutorial (docs/tutorial/06-optimizers.md): optimizers and placement policies on
// the sim device -- why optimizer state must not remember a device.
#include <cstdio>
#include <iostream>

#include "core/ops.h"
#include "core/storage.h"
#include "nn/layers.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tutorial.h"

using namespace lathe;

// [tutorial:grads]
// One forward and backward on the layer's device, so that every parameter has a gradient.
void make_grads(const nn::Linear& layer) {
  Tensor x = Tensor::ones({4, 3}, DType::f32, layer.weight.device());
  sum(square(layer.forward(x))).backward();
}
// [/tutorial:grads]

// [tutorial:show]
void show_state(const optim::Optimizer& opt) {
  for (const optim::StateEntry& e : opt.state_entries())
    std::cout << "  " << e.name << "  policy " << optim::placement_name(e.placement) << "  on "
              << e.tensor.device() << "\n";
}
// [/tutorial:show]

int main() {
  std::cout << std::boolalpha;
  tutorial::part("sgd");
  // [tutorial:sgd]
  // SGD with momentum, as PyTorch: buf <- momentum * buf + g, then p <- p - lr * buf. The buffer
  // (the first gradient at the first step) is the only state.
  Tensor p = Tensor::from_vector<float>({1, 2}, {2}).requires_grad_();
  optim::SGD sgd({p}, {{"lr", 0.1}, {"momentum", 0.9}});
  for (int i = 0; i < 2; ++i) {
    sum(square(p)).backward();     // g = 2p
    sgd.step();
    sgd.zero_grad();
    std::cout << "after step " << i + 1 << ": p " << p.detach() << "\n";
  }
  show_state(sgd);
  // [/tutorial:sgd]

  tutorial::part("cpu");
  // [tutorial:cpu]
  nn::Linear layer(3, 2);
  layer.weight.fill_(0.5);
  optim::AdamW opt(layer.parameters(), {{"lr", 0.01}});
  make_grads(layer);
  opt.step();
  opt.zero_grad();
  show_state(opt);
  // [/tutorial:cpu]

  tutorial::part("move");
  // [tutorial:move]
  layer.to(Device::sim());   // the parameters move in place; the optimizer still holds them
  std::cout << "where exp_avg of parameter 0 belongs now: "
            << opt.state_device(optim::StateScope::param, 0, "exp_avg") << "\n";
  make_grads(layer);
  reset_transfer_stats();
  opt.step();                // first step after the move: the state follows its parameter
  TransferStats first = transfer_stats();
  opt.zero_grad();
  make_grads(layer);
  reset_transfer_stats();
  opt.step();                // the next one moves nothing
  TransferStats second = transfer_stats();
  opt.zero_grad();
  show_state(opt);
  std::cout << "copies to the device: first step " << first.host_to_device << " (" << first.bytes
            << " bytes), second step " << second.host_to_device << " (" << second.bytes << " bytes)\n";
  // [/tutorial:move]

  tutorial::part("fused");
  // [tutorial:fused]
  // The fused update keeps Adam's step counter with its parameter instead: the same slot, the
  // other policy, chosen by the optimizer's mode.
  optim::AdamW fused(layer.parameters(), {{"lr", 0.01}}, /*fused=*/true);
  make_grads(layer);
  fused.step();
  fused.zero_grad();
  show_state(fused);
  // [/tutorial:fused]

  tutorial::part("mixing");
  // [tutorial:mixing]
  try {
    Tensor on_cpu = Tensor::ones({2});
    Tensor on_sim = Tensor::ones({2}, DType::f32, Device::sim());
    Tensor wrong = on_cpu + on_sim;  // never a silent copy
  } catch (const Error& e) {
    std::cout << e.what() << "\n";
  }
  // [/tutorial:mixing]
  return 0;
}
