// The residual stream's add fused into the norm that reads it, and the stream's gradient folded
// into the norm's backward (core/ops/norm_residual.h): bitwise the add and the norm apart, a
// gradcheck in f64, bad input, and a model that runs no add kernel of its own per block.
#include <doctest/doctest.h>

#include <functional>
#include <map>

#include "core/kernel_profile.h"
#include "nn/gpt.h"
#include "tests/residual_norm_cases.h"
#include "tests/test_helpers.h"

using namespace lathe;
using namespace lathe::testing;

TEST_CASE("add_layer_norm and add_rms_norm: the sum, the norm and every gradient bitwise the add and the norm apart") {
  for (const Device d : {Device::cpu(), Device::sim(0)})
    for (const ResidualNormCase& c : residual_norm_cases()) check_residual_norm(c, d, 7);
}

TEST_CASE("add_layer_norm and add_rms_norm: gradcheck of the sum and the norm together") {
  auto randn64 = [](const Shape& s, uint64_t seed) { return Tensor::randn(s, seed, 0, DType::f64).requires_grad_(true); };
  // Both outputs in one objective, the sum read by the next add as a model reads it.
  auto check = [](const std::function<SumAndNorm(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& in) {
    const std::string msg = gradcheck(
        [&](const std::vector<Tensor>& v) {
          const SumAndNorm o = f(v);
          return add(mul(o.sum, 0.75), o.normed);
        },
        in);
    INFO(msg);
    CHECK(msg.empty());
  };
  check([](const std::vector<Tensor>& v) { return add_layer_norm(v[0], v[1], v[2], v[3], 1e-5); },
        {randn64({3, 2, 21}, 1), randn64({3, 2, 21}, 2), randn64({21}, 3), randn64({21}, 4)});
  check([](const std::vector<Tensor>& v) { return add_layer_norm(v[0], v[1], Tensor(), Tensor(), 1e-5); },
        {randn64({4, 5}, 5), randn64({4, 5}, 6)});
  check([](const std::vector<Tensor>& v) { return add_rms_norm(v[0], v[1], v[2], 1e-5); },
        {randn64({3, 2, 21}, 7), randn64({3, 2, 21}, 8), randn64({21}, 9)});
  check([](const std::vector<Tensor>& v) { return add_rms_norm(v[0], v[1], Tensor(), 1e-5); },
        {randn64({4, 5}, 10), randn64({4, 5}, 11)});
  // A branch that needs no gradient, and one that cannot be fused (a broadcast): added apart.
  check([](const std::vector<Tensor>& v) { return add_rms_norm(v[0], v[1], v[2], 1e-5); },
        {randn64({2, 9}, 12), Tensor::randn({2, 9}, 13, 0, DType::f64), randn64({9}, 14)});
  check([](const std::vector<Tensor>& v) { return add_layer_norm(v[0], v[1], v[2], v[3], 1e-5); },
        {randn64({2, 9}, 15), randn64({9}, 16), randn64({9}, 17), randn64({9}, 18)});
}

TEST_CASE("add_layer_norm and add_rms_norm: a branch the kernels do not take is added apart, with add's result") {
  const Tensor x = Tensor::randn({3, 8}, 1), r = Tensor::randn({8}, 2), r64 = Tensor::randn({3, 8}, 3, 0, DType::f64);
  for (const Tensor& branch : {r, r64}) {
    const SumAndNorm f = add_layer_norm(x, branch, Tensor(), Tensor());
    CHECK(bitwise_equal(f.sum, add(x, branch)));
    CHECK(bitwise_equal(f.normed, layer_norm(add(x, branch), Tensor(), Tensor())));
    const SumAndNorm g = add_rms_norm(x, branch, Tensor());
    CHECK(bitwise_equal(g.normed, rms_norm(add(x, branch), Tensor())));
  }
}

TEST_CASE("add_layer_norm and add_rms_norm: bad input names the op and the tensor") {
  const Tensor x = Tensor::zeros({2, 4});
  CHECK(error_of([&] { add_layer_norm(x, Tensor(), Tensor(), Tensor()); }).find("add_layer_norm: the branch is undefined") !=
        std::string::npos);
  CHECK(error_of([&] { add_rms_norm(x, Tensor::zeros({2, 4}, DType::f32, Device::sim(0)), Tensor()); })
            .find("sim") != std::string::npos);
  CHECK(error_of([&] { add_layer_norm(x, Tensor::zeros({2, 5}), Tensor(), Tensor()); }).find("[2, 5] cannot be broadcast") !=
        std::string::npos);
  CHECK(error_of([&] { add_layer_norm(x, x, Tensor::ones({5}), Tensor()); }).find("add_layer_norm: weight f32[5]") !=
        std::string::npos);
  CHECK(error_of([&] { add_rms_norm(x, x, Tensor(), 1e-5, DType::i32); }).find("add_rms_norm: a i32 output") !=
        std::string::npos);
  CHECK(error_of([&] { add_rms_norm(Tensor::zeros({2, 4}, DType::i32), Tensor::zeros({2, 4}, DType::i32), Tensor()); })
            .find("floating") != std::string::npos);
}

namespace {
// Calls of each CPU kernel in one training step (forward and backward) of a small model.
std::map<std::string, int64_t> kernel_calls(nn::NormKind norm, int64_t n_layer) {
  nn::GPTConfig c;
  c.vocab_size = 37, c.block_size = 8, c.n_layer = n_layer, c.n_head = 2, c.n_embd = 16, c.norm = norm;
  c.bias = false;  // a linear layer's bias is an add of its own
  nn::GPT model(c, 3);
  const Tensor idx = Tensor::randint(0, 37, {2, 8}, 4), targets = Tensor::randint(0, 37, {2, 8}, 5);
  profile::take();
  profile::set_enabled(true);
  model.loss(idx, targets).backward();
  profile::set_enabled(false);
  std::map<std::string, int64_t> calls;
  for (const profile::KernelRow& row : profile::take()) calls[row.kernel] = row.calls;
  return calls;
}
}  // namespace

TEST_CASE("GPT: the residual adds and the stream's gradient sums run inside the norms, none on its own") {
  for (const nn::NormKind norm : {nn::NormKind::layer_norm, nn::NormKind::rms_norm}) {
    INFO(std::string(nn::norm_kind_name(norm)));
    const auto one = kernel_calls(norm, 1), three = kernel_calls(norm, 3);
    const std::string fused = norm == nn::NormKind::rms_norm ? "add_rms_norm" : "add_layer_norm";
    auto calls = [](const std::map<std::string, int64_t>& m, const std::string& k) {
      const auto it = m.find(k);
      return it == m.end() ? int64_t(0) : it->second;
    };
    // Each block's two adds: the attention's inside ln_2, the MLP's inside the next ln_1 (or ln_f).
    CHECK(calls(one, fused) == 2);
    CHECK(calls(three, fused) == 6);
    // Two more blocks add no add kernel: neither the stream's adds nor its gradients' sums.
    CHECK(calls(one, "add") == calls(three, "add"));
  }
}
