// nn: Module naming and state dicts, layers, the GPT model (config, init, counts, bad input,
// gradients by finite differences) and generation with a KV cache against generation without.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <set>

#include "core/autograd.h"
#include "core/ops.h"
#include "nn/functional.h"
#include "nn/gpt.h"
#include "nn/rotary.h"
#include "nn/sampling.h"
#include "tests/test_helpers.h"

using namespace lathe;
using namespace lathe::nn;

namespace {

GPTConfig small_config(bool bias = true) {
  GPTConfig c;
  c.vocab_size = 23;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.bias = bias;
  return c;
}

std::vector<std::string> names_of(const NamedTensors& ts) {
  std::vector<std::string> out;
  for (const auto& [n, _] : ts) out.push_back(n);
  return out;
}

Tensor find(const NamedTensors& ts, const std::string& name) {
  for (const auto& [n, t] : ts)
    if (n == name) return t;
  FAIL("no tensor named ", name);
  return Tensor();
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

Tensor tokens(const std::vector<int64_t>& v, int64_t B) {
  return Tensor::from_vector(v, {B, int64_t(v.size()) / B});
}

// An f64 parameter's gradient (already computed) at its first, a middle and its last element
// against central differences of loss_of() (eps 1e-6; 1e-6 absolute + 1e-4 relative).
void check_gradient_by_central_differences(const std::string& name, Tensor& p,
                                           const std::function<double()>& loss_of) {
  const double eps = 1e-6;
  std::vector<double> grad = p.grad().to_vector<double>();
  double* data = p.data<double>();
  for (int64_t i : {int64_t(0), p.numel() / 3, p.numel() - 1}) {
    const double orig = data[i];
    data[i] = orig + eps;
    const double up = loss_of();
    data[i] = orig - eps;
    const double down = loss_of();
    data[i] = orig;
    const double fd = (up - down) / (2 * eps);
    INFO(name, "[", i, "]: autograd ", grad[size_t(i)], ", finite difference ", fd);
    CHECK(std::abs(fd - grad[size_t(i)]) <= 1e-6 + 1e-4 * std::abs(fd));
  }
}

}  // namespace

// ---------------------------------------------------------------- Module

TEST_CASE("nn: GPT parameter names follow nanoGPT, in registration order") {
  GPT m(small_config());
  const std::vector<std::string> expected_prefix = {
      "transformer.wte.weight",
      "transformer.wpe.weight",
      "transformer.h.0.ln_1.weight",
      "transformer.h.0.ln_1.bias",
      "transformer.h.0.attn.c_attn.weight",
      "transformer.h.0.attn.c_attn.bias",
      "transformer.h.0.attn.c_proj.weight",
      "transformer.h.0.attn.c_proj.bias",
      "transformer.h.0.ln_2.weight",
      "transformer.h.0.ln_2.bias",
      "transformer.h.0.mlp.c_fc.weight",
      "transformer.h.0.mlp.c_fc.bias",
      "transformer.h.0.mlp.c_proj.weight",
      "transformer.h.0.mlp.c_proj.bias",
      "transformer.h.1.ln_1.weight",
  };
  std::vector<std::string> names = names_of(m.named_parameters());
  REQUIRE(names.size() == 4 + 2 * 12);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 15) == expected_prefix);
  CHECK(names[names.size() - 2] == "transformer.ln_f.weight");
  CHECK(names.back() == "transformer.ln_f.bias");
  // The tied lm_head.weight appears in the state dict, not among the distinct parameters.
  NamedTensors sd = m.state_dict();
  CHECK(sd.size() == names.size() + 1);
  CHECK(sd.back().first == "lm_head.weight");
  CHECK(sd.back().second.id() == find(sd, "transformer.wte.weight").id());
  CHECK(m.parameters().size() == names.size());
  CHECK(find(sd, "transformer.h.1.attn.c_attn.weight").shape() == Shape{48, 16});
  for (const auto& p : m.parameters()) CHECK(p.requires_grad());

  GPT nb(small_config(/*bias=*/false));
  for (const auto& n : names_of(nb.state_dict())) CHECK(n.find("bias") == std::string::npos);
  CHECK(nb.named_parameters().size() == 2 + 2 * 6 + 1);
}

TEST_CASE("nn: parameter counts match the PyTorch reference") {
  // sum(p.numel() for p in GPT(...).parameters()) from tools/torch_gpt_reference.py, and the same
  // without wpe (nanoGPT's reported count).
  CHECK(GPT(GPTConfig::preset("tiny")).num_params() == 120576);
  CHECK(GPT(GPTConfig::preset("tiny")).num_params(true) == 116480);
  GPT chr(GPTConfig::preset("char"));
  CHECK(chr.num_params() == 10844160);  // about 10.8M
  CHECK(chr.num_params(true) == 10745856);
}

TEST_CASE("nn: state_dict round trip keeps parameter identity") {
  GPT a(small_config(), 1), b(small_config(), 2);
  CHECK(max_abs_diff(a.transformer.wte.weight, b.transformer.wte.weight) > 0);
  std::vector<TensorImpl*> ids;
  for (const auto& p : b.parameters()) ids.push_back(p.id());
  b.load_state_dict(a.state_dict());
  for (size_t i = 0; i < ids.size(); ++i) CHECK(b.parameters()[i].id() == ids[i]);
  for (const auto& [name, p] : a.state_dict()) CHECK(max_abs_diff(p, find(b.state_dict(), name)) == 0);
  // The tie survives: lm_head and wte are still one tensor.
  CHECK(b.lm_head.weight.id() == b.transformer.wte.weight.id());

  // A map works too, and values are converted from another dtype.
  std::map<std::string, Tensor> as_map;
  for (const auto& [n, t] : a.state_dict()) as_map[n] = t.detach().to(DType::f64);
  GPT c(small_config(), 3);
  c.load_state_dict(as_map);
  CHECK(c.transformer.wte.weight.dtype() == DType::f32);
  CHECK(max_abs_diff(c.transformer.wte.weight, a.transformer.wte.weight) == 0);
}

TEST_CASE("nn: strict load lists missing and unexpected keys, shapes are checked") {
  GPT a(small_config(), 1);
  NamedTensors sd = a.state_dict();
  NamedTensors partial;
  for (const auto& [n, t] : sd)
    if (n != "transformer.h.1.mlp.c_fc.bias" && n != "transformer.ln_f.weight") partial.emplace_back(n, t);
  partial.emplace_back("transformer.h.7.attn.c_attn.weight", Tensor::zeros({2}));
  partial.emplace_back("extra", Tensor::zeros({2}));
  GPT b(small_config(), 2);
  const Tensor before = b.transformer.wte.weight.clone();
  try {
    b.load_state_dict(partial, /*strict=*/true);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("missing keys: transformer.h.1.mlp.c_fc.bias, transformer.ln_f.weight") != std::string::npos);
    CHECK(msg.find("unexpected keys: extra, transformer.h.7.attn.c_attn.weight") != std::string::npos);
  }
  // A failed load changes nothing.
  CHECK(max_abs_diff(b.transformer.wte.weight, before) == 0);
  // Not strict: the rest loads.
  b.load_state_dict(partial, /*strict=*/false);
  CHECK(max_abs_diff(b.transformer.wte.weight, a.transformer.wte.weight) == 0);

  NamedTensors bad = sd;
  for (auto& [n, t] : bad)
    if (n == "transformer.h.0.attn.c_proj.weight") t = Tensor::zeros({16, 15});
  CHECK_THROWS_WITH_AS(b.load_state_dict(bad), doctest::Contains("\"transformer.h.0.attn.c_proj.weight\": expected [16, 16], got [16, 15]"), Error);

  // A tied weight may come under either name (PyTorch's save_model keeps lm_head.weight only)...
  NamedTensors only_head;
  for (const auto& [n, t] : sd)
    if (n != "transformer.wte.weight") only_head.emplace_back(n, t);
  GPT c(small_config(), 3);
  c.load_state_dict(only_head);
  CHECK(max_abs_diff(c.transformer.wte.weight, a.transformer.wte.weight) == 0);
  // ...but two different values for it are an error.
  NamedTensors conflicting = sd;
  for (auto& [n, t] : conflicting)
    if (n == "lm_head.weight") t = add(t.detach(), 1.0);
  CHECK_THROWS_WITH_AS(c.load_state_dict(conflicting), doctest::Contains("tied"), Error);
  // nanoGPT's causal-mask buffers are not parameters, and are ignored.
  NamedTensors with_buffers = sd;
  with_buffers.emplace_back("transformer.h.0.attn.bias", Tensor::ones({1, 1, 8, 8}));
  c.load_state_dict(with_buffers);
}

TEST_CASE("nn: to(sim) moves parameters and gradients in place") {
  GPT m(small_config(), 5);
  std::vector<TensorImpl*> ids;
  for (const auto& p : m.parameters()) ids.push_back(p.id());
  GPTOutput out = m.forward(tokens({1, 2, 3, 4, 5, 6}, 2), tokens({2, 3, 4, 5, 6, 7}, 2));
  out.loss.backward();
  const double loss_cpu = out.loss.item();
  m.to(Device::sim());
  for (size_t i = 0; i < ids.size(); ++i) {
    const Tensor p = m.parameters()[i];
    CHECK(p.id() == ids[i]);
    CHECK(p.device() == Device::sim());
    CHECK(p.requires_grad());
    REQUIRE(p.grad().defined());
    CHECK(p.grad().device() == Device::sim());
  }
  CHECK(m.lm_head.weight.device() == Device::sim());
  CHECK(m.lm_head.weight.id() == m.transformer.wte.weight.id());
  // Inputs on the wrong device are an error naming both devices.
  CHECK_THROWS_WITH_AS(m.forward(tokens({1, 2}, 1)), doctest::Contains("is on cpu but the model is on sim"), Error);
  GPTOutput out_sim = m.forward(tokens({1, 2, 3, 4, 5, 6}, 2).to(Device::sim()),
                                tokens({2, 3, 4, 5, 6, 7}, 2).to(Device::sim()));
  CHECK(out_sim.loss.item() == loss_cpu);
  m.zero_grad();
  for (const auto& p : m.parameters()) CHECK_FALSE(p.grad().defined());
  m.to(Device::cpu());
  CHECK(m.transformer.wte.weight.device() == Device::cpu());
}

TEST_CASE("nn: the same seed gives the same weights, on every device") {
  GPT a(small_config(), 7), b(small_config(), 7), c(small_config(), 8);
  GPT s(small_config(), 7, Device::sim());
  for (const auto& [name, p] : a.named_parameters()) {
    CHECK(max_abs_diff(p, find(b.named_parameters(), name)) == 0);
    CHECK(max_abs_diff(p, find(s.named_parameters(), name)) == 0);
  }
  CHECK(max_abs_diff(a.transformer.wte.weight, c.transformer.wte.weight) > 0);
  // GPT-2 init: std 0.02, residual projections 0.02 / sqrt(2 n_layer), LayerNorm 1 and 0.
  GPT big(GPTConfig::preset("tiny"), 1);
  auto stddev = [](const Tensor& t) {
    std::vector<double> v = t.to_vector<double>();
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s / double(v.size()));
  };
  CHECK(stddev(big.transformer.wte.weight) == doctest::Approx(0.02).epsilon(0.02));
  CHECK(stddev(big.transformer.h[0].mlp.c_fc.weight) == doctest::Approx(0.02).epsilon(0.03));
  CHECK(stddev(big.transformer.h[0].mlp.c_proj.weight) == doctest::Approx(0.01).epsilon(0.03));
  CHECK(stddev(big.transformer.h[1].attn.c_proj.weight) == doctest::Approx(0.01).epsilon(0.05));
  CHECK(stddev(big.transformer.h[0].attn.c_attn.bias) == 0);
  CHECK(big.transformer.ln_f->weight.to_vector<float>() == std::vector<float>(64, 1.0f));
}

TEST_CASE("nn: a model to be loaded draws no weights, and a strict load gives it every one of the file's") {
  const GPT seeded(small_config(), 7);
  GPT loaded(small_config(), GPT::kToBeLoaded, Device::cpu());
  // The layers' own values: weights and biases 0, norm weights 1; nothing drawn.
  for (const auto& [name, p] : loaded.named_parameters()) {
    INFO(name);
    const bool norm_weight = name.find("ln_") != std::string::npos && name.ends_with(".weight");
    CHECK(max_abs_diff(p, Tensor::full(p.shape(), norm_weight ? 1.0 : 0.0)) == 0);
  }
  loaded.load_state_dict(seeded.state_dict(), /*strict=*/true);
  for (const auto& [name, p] : seeded.named_parameters()) {
    INFO(name);
    CHECK(max_abs_diff(p, find(loaded.named_parameters(), name)) == 0);
  }
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 4});
  CHECK(max_abs_diff(loaded.forward(idx).logits, seeded.forward(idx).logits) == 0);
}

// ---------------------------------------------------------------- layers

TEST_CASE("nn: linear matches x @ W^T + b, and its gradients pass gradcheck") {
  Tensor x = Tensor::randn({2, 3, 4}, 1, 0, DType::f64).requires_grad_();
  Tensor w = Tensor::randn({5, 4}, 2, 0, DType::f64).requires_grad_();
  Tensor b = Tensor::randn({5}, 3, 0, DType::f64).requires_grad_();
  CHECK(max_abs_diff(linear(x, w, b), add(matmul(x, w.t()), b)) < 1e-12);
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b}) == "");
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }, {x, w}) == "");
  CHECK_THROWS_WITH_AS(linear(x, Tensor::zeros({5, 3}, DType::f64)), doctest::Contains("does not end in 3"), Error);
  Linear layer(4, 5);
  CHECK(layer.weight.shape() == Shape{5, 4});
  CHECK(names_of(layer.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(names_of(Linear(4, 5, false).named_parameters()) == std::vector<std::string>{"weight"});
}

TEST_CASE("nn: dropout is reproducible from the model's seed and off in eval mode") {
  GPTConfig cfg = small_config();
  cfg.dropout = 0.2;
  GPT a(cfg, 11), b(cfg, 11);
  Tensor idx = tokens({1, 2, 3, 4, 5, 6, 7, 8}, 2), tgt = tokens({2, 3, 4, 5, 6, 7, 8, 9}, 2);
  const double la = a.forward(idx, tgt).loss.item();
  CHECK(a.forward(idx, tgt).loss.item() != la);  // the generator advanced: a new mask
  CHECK(b.forward(idx, tgt).loss.item() == la);  // same seed, same masks
  a.eval();
  CHECK_FALSE(a.transformer.h[1].mlp.dropout.is_training());
  const uint64_t offset = a.dropout_generator().offset();
  const double e1 = a.forward(idx, tgt).loss.item();
  CHECK(a.forward(idx, tgt).loss.item() == e1);
  CHECK(a.dropout_generator().offset() == offset);
}

// ---------------------------------------------------------------- GPT

TEST_CASE("nn: GPT config validation, presets and JSON") {
  GPTConfig c = small_config();
  c.n_head = 3;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("n_embd (16) must be a multiple of n_head (3)"), Error);
  c = small_config();
  c.block_size = 0;
  CHECK_THROWS_WITH_AS(GPT{c}, doctest::Contains("block_size must be positive"), Error);
  CHECK_THROWS_WITH_AS(GPTConfig::preset("huge"), doctest::Contains("tiny, small, char, nanogpt-cpu, speedrun-small, gpt2"), Error);
  GPTConfig g = GPTConfig::preset("gpt2");
  CHECK(g.vocab_size == 50304);
  CHECK(g.block_size == 1024);
  CHECK(g.n_embd == 768);
  CHECK(GPTConfig::preset("char").n_layer == 6);
  // nanoGPT's CPU recipe: 4 layers, 4 heads, 128 wide, block 64, no biases (nanoGPT's default)
  const GPTConfig nano = GPTConfig::preset("nanogpt-cpu");
  CHECK(nano == GPTConfig{256, 64, 4, 4, 128, false});
  CHECK(GPT(nano).num_params() == 256 * 128 + 64 * 128 + 4 * (12 * 128 * 128 + 2 * 128) + 128);

  c = small_config(false);
  c.dropout = 0.1;
  nlohmann::json j = c;
  CHECK(j["n_embd"] == 16);
  CHECK(j.get<GPTConfig>() == c);
  CHECK(GPTConfig::from_json(j) == c);
  nlohmann::json missing = j;
  missing.erase("n_head");
  CHECK_THROWS_WITH_AS(GPTConfig::from_json(missing), doctest::Contains("missing field \"n_head\""), Error);
  nlohmann::json bad = j;
  bad["vocab_size"] = "many";
  CHECK_THROWS_WITH_AS(GPTConfig::from_json(bad), doctest::Contains("\"vocab_size\" must be an integer"), Error);
  bad = j;
  bad["bias"] = 1;
  CHECK_THROWS_WITH_AS(GPTConfig::from_json(bad), doctest::Contains("\"bias\" must be true or false"), Error);
  bad = j;
  bad["n_laters"] = 3;  // a misspelt n_layer must not leave the default in place silently
  CHECK_THROWS_WITH_AS(GPTConfig::from_json(bad), doctest::Contains("unknown field \"n_laters\""), Error);
  nlohmann::json defaults = {{"vocab_size", 10}, {"block_size", 4}, {"n_layer", 1}, {"n_head", 1}, {"n_embd", 4}};
  CHECK(GPTConfig::from_json(defaults).bias);
  CHECK(GPTConfig::from_json(defaults).dropout == 0.0);
}

TEST_CASE("nn: GPT forward shapes and bad input") {
  GPT m(small_config(), 3);
  GPTOutput out = m.forward(tokens({1, 2, 3, 4, 5, 6}, 2));
  CHECK(out.logits.shape() == Shape{2, 3, 23});
  CHECK_FALSE(out.loss.defined());
  out = m.forward(tokens({1, 2, 3, 4, 5, 6}, 2), tokens({2, 3, 4, 5, 6, -1}, 2));
  CHECK(out.loss.dim() == 0);
  // An untrained model predicts roughly uniformly: loss near log(V).
  CHECK(out.loss.item() == doctest::Approx(std::log(23.0)).epsilon(0.05));
  // i32 ids give the same result as i64.
  CHECK(m.forward(tokens({1, 2, 3, 4, 5, 6}, 2).to(DType::i32)).logits.shape() == Shape{2, 3, 23});

  CHECK_THROWS_WITH_AS(m.forward(tokens(std::vector<int64_t>(9, 1), 1)),
                       doctest::Contains("sequence length 9 but block_size is 8"), Error);
  CHECK_THROWS_WITH_AS(m.forward(tokens({1, 23}, 1)), doctest::Contains("token id 23 but vocab_size is 23"), Error);
  CHECK_THROWS_WITH_AS(m.forward(tokens({1, -1}, 1)), doctest::Contains("token id -1"), Error);
  CHECK_THROWS_WITH_AS(m.forward(tokens({1, 2}, 1), tokens({1, 30}, 1)), doctest::Contains("targets holds token id 30"),
                       Error);
  CHECK_THROWS_WITH_AS(m.forward(tokens({1, 2}, 1), tokens({1, -2}, 1)), doctest::Contains("token id -2"), Error);
  CHECK_THROWS_WITH_AS(m.forward(tokens({1, 2, 3, 4}, 2), tokens({1, 2, 3, 4}, 1)), doctest::Contains("shape of idx"),
                       Error);
  CHECK_THROWS_WITH_AS(m.forward(Tensor::zeros({1, 2})), doctest::Contains("i64 or i32"), Error);
  CHECK_THROWS_WITH_AS(m.forward(Tensor::zeros({4}, DType::i64)), doctest::Contains("[B, T]"), Error);
}

TEST_CASE("nn: GPT gradients match finite differences (f64)") {
  GPTConfig cfg = small_config();
  cfg.vocab_size = 11;
  cfg.n_embd = 8;
  cfg.block_size = 5;
  GPT m(cfg, 21);
  m.to(DType::f64);
  // Move LayerNorm weights away from 1 so every path carries a nontrivial value.
  {
    NoGradGuard ng;
    for (auto& [n, p] : m.named_parameters())
      if (p.dim() == 1) p.copy_(add(p, mul(Tensor::randn(p.shape(), 5, 0, DType::f64), 0.1)));
  }
  Tensor idx = tokens({1, 5, 3, 9, 0, 2, 2, 7}, 2), tgt = tokens({5, 3, 9, 10, 2, 7, 1, 1}, 2);
  auto loss_of = [&]() {
    NoGradGuard ng;
    return m.forward(idx, tgt).loss.item();
  };
  m.zero_grad();
  m.forward(idx, tgt).loss.backward();
  const std::vector<std::string> checked = {"transformer.wte.weight", "transformer.wpe.weight",
                                            "transformer.h.0.attn.c_attn.weight", "transformer.h.0.ln_1.weight",
                                            "transformer.h.1.mlp.c_proj.bias", "transformer.ln_f.bias",
                                            "transformer.h.1.attn.c_proj.weight"};
  for (const auto& name : checked) {
    Tensor p = find(m.named_parameters(), name);
    check_gradient_by_central_differences(name, p, loss_of);
  }
}

// ---------------------------------------------------------------- sampling and generation

TEST_CASE("nn: sampling: temperature 0 is argmax, top_k restricts, draws follow the seed") {
  Tensor logits = Tensor::from_vector<float>({0.0f, 3.0f, 1.0f, 2.9f, -1.0f, 0.5f, 0.0f, 0.1f}, {2, 4});
  Generator g0(1);
  CHECK(sample_tokens(logits, {0.0, 0}, g0) == std::vector<int64_t>{1, 1});
  CHECK(g0.offset() == 0);
  Generator g(3), h(3);
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i) {
    std::vector<int64_t> a = sample_tokens(logits, {1.0, 2}, g);
    CHECK(a == sample_tokens(logits, {1.0, 2}, h));
    CHECK((a[0] == 1 || a[0] == 3));
    CHECK((a[1] == 1 || a[1] == 3));
    seen.insert(a[0]);
  }
  CHECK(seen.size() == 2);
  CHECK_THROWS_WITH_AS(sample_tokens(logits, {-1.0, 0}, g), doctest::Contains("temperature"), Error);
}

// The runners' filters on fixed logits, against the definitions computed here one by one (a
// transcription of transformers' TopPLogitsWarper, MinPLogitsWarper and
// RepetitionPenaltyLogitsProcessor, whose definitions llama.cpp shares).
namespace {

// softmax(x / t) restricted to `keep` (others 0), renormalised.
std::vector<double> kept_softmax(const std::vector<double>& x, double t, const std::set<int64_t>& keep) {
  std::vector<double> p(x.size(), 0.0);
  double total = 0;
  for (int64_t i : keep) total += std::exp(x[size_t(i)] / t);
  for (int64_t i : keep) p[size_t(i)] = std::exp(x[size_t(i)] / t) / total;
  return p;
}

void check_distribution(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("token ", i, ": got ", got[i], ", want ", want[i]);
    CHECK(std::abs(got[i] - want[i]) <= 1e-12);
  }
}

}  // namespace

TEST_CASE("nn: sampling: top-p, min-p and the repetition penalty as transformers and llama.cpp define them (transcription)") {
  // softmax: 0.5630, 0.2071, 0.1256, 0.0762, 0.0280.
  const std::vector<double> x = {2.0, 1.0, 0.5, 0.0, -1.0};
  SamplingOptions o;
  check_distribution(sampling_distribution(x, o), kept_softmax(x, 1.0, {0, 1, 2, 3, 4}));
  // top_p 0.7: 0.5630 falls short, with 0.2071 the kept mass reaches 0.77: the token that crosses is kept.
  o.top_p = 0.7;
  check_distribution(sampling_distribution(x, o), kept_softmax(x, 1.0, {0, 1}));
  o.top_p = 0.5;  // the most likely alone reaches it
  check_distribution(sampling_distribution(x, o), kept_softmax(x, 1.0, {0}));
  o.top_p = 0.9;  // 0.5630 + 0.2071 + 0.1256 = 0.8957 < 0.9: a fourth
  check_distribution(sampling_distribution(x, o), kept_softmax(x, 1.0, {0, 1, 2, 3}));
  // min_p 0.2: at least 0.2 x 0.5630 = 0.1126.
  o = SamplingOptions{};
  o.min_p = 0.2;
  check_distribution(sampling_distribution(x, o), kept_softmax(x, 1.0, {0, 1, 2}));
  o.min_p = 1.0;  // only the most likely
  check_distribution(sampling_distribution(x, o), kept_softmax(x, 1.0, {0}));
  // The temperature first, then the filters (transformers' order): at t = 2 the probabilities are
  // 0.3812, 0.2312, 0.1800, 0.1402, 0.0850, and top_p 0.7 keeps three, where it keeps two at t = 1.
  o = SamplingOptions{};
  o.temperature = 2.0;
  o.top_p = 0.7;
  check_distribution(sampling_distribution(x, o), kept_softmax(x, 2.0, {0, 1, 2}));
  o.top_k = 2;  // top_k before top_p
  check_distribution(sampling_distribution(x, o), kept_softmax(x, 2.0, {0, 1}));

  // The repetition penalty: each distinct previous id once; a positive logit divided, the others
  // multiplied (0 stays 0).
  o = SamplingOptions{};
  o.repetition_penalty = 2.0;
  const std::vector<int64_t> previous = {0, 3, 4, 4, 0};
  check_distribution(sampling_distribution(x, o, previous), kept_softmax({1.0, 1.0, 0.5, 0.0, -2.0}, 1.0, {0, 1, 2, 3, 4}));
  o.repetition_window = 2;  // the last two tokens: 4 and 0
  check_distribution(sampling_distribution(x, o, previous), kept_softmax({1.0, 1.0, 0.5, 0.0, -2.0}, 1.0, {0, 1, 2, 3, 4}));
  o.repetition_window = 1;  // the last one: 0
  check_distribution(sampling_distribution(x, o, previous), kept_softmax({1.0, 1.0, 0.5, 0.0, -1.0}, 1.0, {0, 1, 2, 3, 4}));
  // Greedy decoding sees the penalty too: 2 / 2.5 < 1.
  o = SamplingOptions{};
  o.temperature = 0.0;
  o.repetition_penalty = 2.5;
  CHECK(sampling_distribution(x, o, previous)[1] == 1.0);
  Generator g(1);
  const Tensor logits = Tensor::from_vector<double>(x, {1, 5});
  const std::vector<int64_t> history = {0};
  CHECK(sample_tokens(logits, o, g, {std::span<const int64_t>(history)}) == std::vector<int64_t>{1});

  // Out of range is an error naming the option.
  for (auto [set, says] : std::vector<std::pair<std::function<void(SamplingOptions&)>, const char*>>{
           {[](SamplingOptions& s) { s.top_p = 0.0; }, "top_p must be in (0, 1]"},
           {[](SamplingOptions& s) { s.top_p = 1.5; }, "top_p must be in (0, 1]"},
           {[](SamplingOptions& s) { s.min_p = -0.1; }, "min_p must be in [0, 1]"},
           {[](SamplingOptions& s) { s.repetition_penalty = 0.0; }, "repetition_penalty must be a positive number"},
           {[](SamplingOptions& s) { s.repetition_window = -1; }, "repetition_window must be >= 0"}}) {
    SamplingOptions bad;
    set(bad);
    CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains(says), Error);
  }
}

TEST_CASE("nn: generation stops when the token callback says so, and the penalty is the same with and without the cache") {
  GPT m(small_config(), 5);
  const Tensor prompt = tokens({3, 1, 4}, 1);
  int64_t calls = 0;
  const Tensor stopped = m.generate(prompt, 10, SamplingOptions{}, 7, true, [&](const std::vector<int64_t>&) {
    return ++calls < 4;
  });
  CHECK(calls == 4);
  CHECK(stopped.size(1) == 3 + 4);
  SamplingOptions o;
  o.repetition_penalty = 1.3;
  o.top_p = 0.9;
  o.min_p = 0.05;
  CHECK(m.generate(prompt, 12, o, 11, true).to_vector<int64_t>() == m.generate(prompt, 12, o, 11, false).to_vector<int64_t>());
  // The first ids of an unstopped run are those of the stopped one.
  const std::vector<int64_t> all = m.generate(prompt, 10, SamplingOptions{}, 7).to_vector<int64_t>();
  CHECK(std::vector<int64_t>(all.begin(), all.begin() + 7) == stopped.to_vector<int64_t>());
}

TEST_CASE("nn: generation with the KV cache gives the tokens of generation without it") {
  GPT m(small_config(), 31);
  const Tensor prompt = tokens({3, 1, 4, 1, 5, 9}, 2);  // B = 2, T = 3
  // 12 new tokens overflow block_size 8: the cached path must fall back to the cropped window.
  for (auto [temperature, top_k] : {std::pair{1.0, int64_t(0)}, {0.8, int64_t(5)}, {0.0, int64_t(0)}}) {
    Tensor a = m.generate(prompt, 12, temperature, top_k, /*seed=*/42);
    Tensor b = m.generate_nocache(prompt, 12, temperature, top_k, /*seed=*/42);
    CHECK(a.shape() == Shape{2, 15});
    CHECK(a.to_vector<int64_t>() == b.to_vector<int64_t>());
    // The prompt is kept; new ids are in range; the seed fixes the result.
    std::vector<int64_t> v = a.to_vector<int64_t>();
    CHECK(v[0] == 3);
    CHECK(v[15 + 2] == 9);
    for (int64_t t : v) CHECK((t >= 0 && t < 23));
    CHECK(m.generate(prompt, 12, temperature, top_k, 42).to_vector<int64_t>() == v);
  }
  CHECK(m.generate(prompt, 12, 1.0, 0, 1).to_vector<int64_t>() != m.generate(prompt, 12, 1.0, 0, 2).to_vector<int64_t>());
  // Greedy decoding's first token is the argmax of the forward pass.
  Tensor greedy = m.generate(prompt, 1, 0.0);
  Tensor logits = m.forward(prompt).logits.select(1, 2);
  CHECK(greedy.select(1, 3).to_vector<int64_t>() == argmax(logits, -1).to_vector<int64_t>());
  CHECK(m.generate(prompt, 0).to_vector<int64_t>() == prompt.to_vector<int64_t>());
  CHECK(m.is_training());  // restored after generation
}

TEST_CASE("nn: a prompt longer than block_size is cropped to its last block_size tokens") {
  GPT m(small_config(), 17);
  std::vector<int64_t> long_prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // 12 > block_size 8
  std::vector<int64_t> tail(long_prompt.end() - 8, long_prompt.end());
  for (bool cache : {true, false}) {
    std::vector<int64_t> a = m.generate(tokens(long_prompt, 1), 5, 1.0, 0, 9, cache).to_vector<int64_t>();
    std::vector<int64_t> b = m.generate(tokens(tail, 1), 5, 1.0, 0, 9, cache).to_vector<int64_t>();
    REQUIRE(a.size() == 17);
    CHECK(std::vector<int64_t>(a.begin(), a.begin() + 12) == long_prompt);
    CHECK(std::vector<int64_t>(a.begin() + 12, a.end()) == std::vector<int64_t>(b.begin() + 8, b.end()));
  }
  CHECK_THROWS_WITH_AS(m.generate(tokens({1, 99}, 1), 2), doctest::Contains("token id 99"), Error);
  CHECK_THROWS_WITH_AS(m.generate(tokens({1, 2}, 1), -1), doctest::Contains("max_new_tokens"), Error);
}

TEST_CASE("nn: generation on the sim device gives the tokens of the cpu") {
  GPT m(small_config(), 31);
  const Tensor prompt = tokens({3, 1, 4, 1, 5, 9}, 2);
  std::vector<int64_t> on_cpu = m.generate(prompt, 6, 1.0, 0, 5).to_vector<int64_t>();
  m.to(Device::sim());
  Tensor out = m.generate(prompt.to(Device::sim()), 6, 1.0, 0, 5);
  CHECK(out.device() == Device::sim());
  CHECK(out.to_vector<int64_t>() == on_cpu);
}

// ---------------------------------------------------------------- the modern block's switches

namespace {

// small_config() with one switch of the modern block set by `set`, named `name`.
struct Switch {
  const char* name;
  void (*set)(GPTConfig&);
};

const Switch kSwitches[] = {
    {"rope", [](GPTConfig& c) { c.rope = true; }},
    {"rms_norm", [](GPTConfig& c) { c.norm = NormKind::rms_norm; }},
    {"norm_weight false", [](GPTConfig& c) { c.norm_weight = false; }},
    {"squared_relu", [](GPTConfig& c) { c.activation = Activation::squared_relu; }},
    {"swiglu", [](GPTConfig& c) { c.activation = Activation::swiglu; }},
    {"qk_norm", [](GPTConfig& c) { c.qk_norm = true; }},
    {"untied", [](GPTConfig& c) { c.tie_embeddings = false; }},
    {"softcap", [](GPTConfig& c) { c.logit_softcap = 0.5; }},
    {"speedrun-small's switches", [](GPTConfig& c) {
       GPTConfig s = GPTConfig::preset("speedrun-small");  // its switches at c's sizes
       s.vocab_size = c.vocab_size;
       s.block_size = c.block_size;
       s.n_layer = c.n_layer;
       s.n_head = c.n_head;
       s.n_embd = c.n_embd;
       c = s;
     }},
};

GPTConfig with_switch(const Switch& s) {
  GPTConfig c = small_config();
  s.set(c);
  return c;
}

}  // namespace

TEST_CASE("nn: the modern switches keep nanoGPT's names and name what is new") {
  GPTConfig c = small_config(/*bias=*/false);
  c.rope = true;
  c.norm = NormKind::rms_norm;
  c.norm_weight = false;
  c.tie_embeddings = false;
  GPT m(c);
  const std::vector<std::string> names = names_of(m.named_parameters());
  // No wpe, no norm parameters, no biases: wte, four matrices a block, and lm_head on its own.
  REQUIRE(names.size() == 1 + 2 * 4 + 1);
  CHECK(names.front() == "transformer.wte.weight");
  CHECK(names[1] == "transformer.h.0.attn.c_attn.weight");
  CHECK(names.back() == "lm_head.weight");
  CHECK(m.lm_head.weight.id() != m.transformer.wte.weight.id());
  CHECK(m.state_dict().size() == names.size());  // no second name for an untied head
  CHECK_FALSE(m.transformer.wpe.has_value());
  CHECK(m.num_params(true) == m.num_params());  // no position embeddings to leave out

  c = small_config();
  c.activation = Activation::swiglu;
  c.norm = NormKind::rms_norm;
  GPT s(c);
  const NamedTensors p = s.named_parameters();
  // SwiGLU's gate beside c_fc; hidden width 8 * 16 / 3 rounded up to a multiple of 64.
  CHECK(find(p, "transformer.h.0.mlp.c_gate.weight").shape() == Shape{64, 16});
  CHECK(find(p, "transformer.h.0.mlp.c_fc.weight").shape() == Shape{64, 16});
  CHECK(find(p, "transformer.h.0.mlp.c_proj.weight").shape() == Shape{16, 64});
  CHECK(find(p, "transformer.h.0.ln_1.weight").shape() == Shape{16});  // RMSNorm: a weight, no bias
  for (const auto& n : names_of(p)) CHECK(n.find("ln_1.bias") == std::string::npos);
  CHECK(mlp_hidden_size(768, Activation::swiglu) == 2048);
  CHECK(mlp_hidden_size(128, Activation::swiglu) == 384);
  CHECK(mlp_hidden_size(128, Activation::squared_relu) == 512);

  // The preset against tools/torch_gpt_reference.py's count.
  CHECK(GPT(GPTConfig::preset("speedrun-small")).num_params() == 851968);
}

TEST_CASE("nn: GPT config JSON: a default model's reads as before, switches round-trip, bad ones are named") {
  const GPTConfig d = small_config();
  const nlohmann::json j = d.to_json();
  CHECK(j.size() == 7);  // exactly the fields older lathe writes and reads
  for (const Switch& s : kSwitches) {
    INFO(s.name);
    const GPTConfig c = with_switch(s);
    CHECK(GPTConfig::from_json(c.to_json()) == c);
    CHECK(c.to_json().size() > 7);
  }
  GPTConfig base = GPTConfig::from_json(j);
  CHECK(base == d);
  CHECK_FALSE(base.rope);
  CHECK(base.rope_base == 10000.0);
  CHECK(base.norm == NormKind::layer_norm);
  CHECK(base.activation == Activation::gelu_tanh);
  CHECK(base.tie_embeddings);
  CHECK(base.logit_softcap == 0.0);

  auto error_with = [&](const char* field, const nlohmann::json& value) {
    nlohmann::json bad = j;
    bad[field] = value;
    try {
      GPTConfig::from_json(bad);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_with("norm", "batch_norm").find("\"norm\" must be one of \"layer_norm\", \"rms_norm\", got \"batch_norm\"") !=
        std::string::npos);
  CHECK(error_with("activation", 3).find("\"activation\" must be one of \"gelu_tanh\", \"squared_relu\", \"swiglu\"") !=
        std::string::npos);
  CHECK(error_with("rope", "yes").find("\"rope\" must be true or false") != std::string::npos);
  CHECK(error_with("logit_softcap", -1).find("logit_softcap must be 0 (off) or a positive cap that f32 holds") !=
        std::string::npos);
  CHECK(error_with("rope_base", "big").find("\"rope_base\" must be a number") != std::string::npos);
  nlohmann::json odd = j;
  odd["rope"] = true;
  odd["rope_base"] = 0.5;
  CHECK_THROWS_WITH_AS(GPTConfig::from_json(odd), doctest::Contains("rope_base must be finite and above 1, got 0.5"),
                       Error);
  odd["rope_base"] = 10000;
  odd["n_embd"] = 18;
  odd["n_head"] = 2;  // head size 9
  CHECK_THROWS_WITH_AS(GPTConfig::from_json(odd), doctest::Contains("rope needs an even head size"), Error);
}

TEST_CASE("nn: every switch: generation with the KV cache gives the tokens of generation without it") {
  const Tensor prompt = tokens({3, 1, 4, 1, 5, 9}, 2);  // B = 2, T = 3
  for (const Switch& s : kSwitches) {
    INFO(s.name);
    GPT m(with_switch(s), 31);
    // 12 new tokens overflow block_size 8: the cached path falls back to the cropped window.
    for (auto [temperature, top_k] : {std::pair{1.0, int64_t(0)}, {0.0, int64_t(0)}}) {
      Tensor a = m.generate(prompt, 12, temperature, top_k, /*seed=*/42);
      Tensor b = m.generate_nocache(prompt, 12, temperature, top_k, /*seed=*/42);
      CHECK(a.to_vector<int64_t>() == b.to_vector<int64_t>());
    }
    // Greedy decoding's first token is the argmax of the forward pass.
    Tensor greedy = m.generate(prompt, 1, 0.0);
    CHECK(greedy.select(1, 3).to_vector<int64_t>() == argmax(m.forward(prompt).logits.select(1, 2), -1).to_vector<int64_t>());
  }
}

TEST_CASE("nn: every switch: GPT gradients match finite differences (f64)") {
  for (const Switch& s : kSwitches) {
    INFO(s.name);
    GPTConfig cfg = with_switch(s);
    cfg.vocab_size = 11;
    cfg.n_embd = 8;
    cfg.block_size = 5;
    GPT m(cfg, 21);
    m.to(DType::f64);
    {
      NoGradGuard ng;  // norm weights away from 1
      for (auto& [n, p] : m.named_parameters())
        if (p.dim() == 1) p.copy_(add(p, mul(Tensor::randn(p.shape(), 5, 0, DType::f64), 0.1)));
    }
    Tensor idx = tokens({1, 5, 3, 9, 0, 2, 2, 7}, 2), tgt = tokens({5, 3, 9, 10, 2, 7, 1, 1}, 2);
    auto loss_of = [&]() {
      NoGradGuard ng;
      return m.forward(idx, tgt).loss.item();
    };
    m.zero_grad();
    m.forward(idx, tgt).loss.backward();
    // Three elements of every parameter, by central differences.
    for (auto [name, p] : m.named_parameters()) check_gradient_by_central_differences(name, p, loss_of);
  }
}

TEST_CASE("nn: attention with rotary embeddings and QK-norm: queries after a KV cache give the full forward's outputs") {
  // Generation's token comparison cannot see a wrong rotary offset in a fresh model (its logits
  // hardly depend on position); the attention outputs can.
  const int64_t C = 16, H = 2, T = 6;
  auto tables = std::make_shared<const RotaryTables>(8, C / H, 10000.0);
  for (bool qk_norm : {false, true}) {
    INFO("qk_norm ", qk_norm);
    CausalSelfAttention attn(C, H, /*bias=*/true, 0.0, std::make_shared<Generator>(1), {}, tables, qk_norm);
    NoGradGuard no_grad;
    attn.c_attn.weight.copy_(Tensor::randn(attn.c_attn.weight.shape(), 3));
    attn.c_proj.weight.copy_(Tensor::randn(attn.c_proj.weight.shape(), 4));
    const Tensor x = Tensor::randn({2, T, C}, 5);
    const Tensor full = attn.forward(x);
    KVCache cache;
    cache.capacity = T;
    const Tensor first = attn.forward(x.narrow(1, 0, 4), &cache);  // positions 0..3, then 4..5
    const Tensor rest = attn.forward(x.narrow(1, 4, 2), &cache);
    // f32 tolerance relative to the outputs' largest magnitude (tens: the weights are N(0, 1)).
    CHECK(max_abs_diff(cat({first, rest}, 1), full) <= 1e-5 * max(abs(full)).item());
  }
}

// ---------------------------------------------------------------- sizes, checked before anything is allocated

TEST_CASE("nn: parameter_count is the model's parameter count, for every switch, and overflow is named") {
  for (const char* preset : {"tiny", "small", "nanogpt-cpu", "speedrun-small"}) {
    INFO(preset);
    CHECK(GPTConfig::preset(preset).parameter_count() == GPT(GPTConfig::preset(preset)).num_params());
  }
  for (const Switch& s : kSwitches) {
    for (bool bias : {true, false}) {
      INFO(s.name, ", bias ", bias);
      GPTConfig c = with_switch(s);
      c.bias = bias;
      CHECK(c.parameter_count() == GPT(c).num_params());
    }
  }
  GPTConfig c = small_config();
  c.activation = Activation::swiglu;
  c.norm_weight = false;
  CHECK(c.parameter_count() == GPT(c).num_params());
  // GPT-2 small (vocabulary 50304): 124,475,904 parameters as nanoGPT counts them (with wpe).
  CHECK(GPTConfig::preset("gpt2").parameter_count() == 124475904);

  c = small_config();
  c.vocab_size = int64_t(1) << 62;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("vocab_size (4611686018427387904) x n_embd (16) overflows"), Error);
  c = small_config();
  c.n_embd = int64_t(1) << 32;
  c.n_head = 1;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("n_embd (4294967296) x n_embd (4294967296) overflows"), Error);
  c = small_config();
  c.n_layer = int64_t(1) << 60;
  CHECK_THROWS_WITH_AS(GPT{c}, doctest::Contains("n_layer (1152921504606846976) x the parameters of a block"), Error);
}

TEST_CASE("nn: a model larger than this machine's memory is refused before a byte of it is allocated") {
  GPTConfig c = small_config();
  c.n_layer = int64_t(1) << 40;  // 2^40 blocks of ~3k parameters: no overflow, but petabytes
  const std::string e = lathe::testing::error_of([&] { GPT m(c); });
  CHECK(e.find("GPT: the model (vocab_size 23, n_embd 16, n_layer 1099511627776, block_size 8) has ") !=
        std::string::npos);
  CHECK(e.find("of f32 weights, more than the") != std::string::npos);
  CHECK(e.find("of this machine's memory") != std::string::npos);
}

TEST_CASE("nn: config values are checked as f32 holds them, and a switch's setting needs its switch") {
  nlohmann::json j = small_config().to_json();
  auto error_with = [&](const char* field, const nlohmann::json& value) {
    nlohmann::json bad = j;
    bad[field] = value;
    return lathe::testing::error_of([&] { GPTConfig::from_json(bad); });
  };
  // Finite in f64, infinite in f32: every logit would be NaN.
  CHECK(error_with("logit_softcap", 1e39).find("a positive cap that f32 holds (1.17549e-38 to 3.40282e+38), got 1e+39") !=
        std::string::npos);
  CHECK(error_with("logit_softcap", 1e-40).find("got 1e-40") != std::string::npos);  // 0 or subnormal in f32
  CHECK(error_with("logit_softcap", 3e38).empty());
  // 1 - 1e-12 is 1 in f32: dropout's scale 1 / (1 - p) would be infinite.
  CHECK(error_with("dropout", 1.0 - 1e-12).find("dropout must be in [0, 1), got 1 (1 in f32)") != std::string::npos);
  CHECK(error_with("dropout", 0.999).empty());
  CHECK(error_with("rope_base", 500000.0).find("rope_base is 500000 but rope is off") != std::string::npos);
  CHECK(error_with("rope_base", 10000.0).empty());  // the default, which no model writes
  // Integers as written, not wrapped; a null is not the default.
  CHECK(error_with("vocab_size", 18446744073709551615ull)
            .find("\"vocab_size\" must be an integer from 1 to 9223372036854775807, got 18446744073709551615") !=
        std::string::npos);
  CHECK(error_with("n_layer", 1e30).find("\"n_layer\" must be an integer from 1 to 9223372036854775807, got 1e+30") !=
        std::string::npos);
  CHECK(error_with("n_layer", 2.0).empty());
  CHECK(error_with("bias", nullptr).find("\"bias\" must be true or false, got null") != std::string::npos);
  CHECK(error_with("logit_softcap", nullptr).find("\"logit_softcap\" must be a number, got null") != std::string::npos);
}

TEST_CASE("nn: rotary tables hold the positions asked for, and a model of a huge context samples as a short one") {
  // 2^61 positions: tables for all of them would overflow, tables of 10^8 take gigabytes.
  const RotaryTables huge(int64_t(1) << 61, 8, 10000.0), small(16, 8, 10000.0);
  for (auto [pos0, T] : {std::pair<int64_t, int64_t>{0, 3}, {5, 11}, {0, 16}}) {
    const auto [hc, hs] = huge.rows(pos0, T, DType::f32, Device::cpu());
    const auto [sc, ss] = small.rows(pos0, T, DType::f32, Device::cpu());
    CHECK(max_abs_diff(hc, sc) == 0);
    CHECK(max_abs_diff(hs, ss) == 0);
  }
  CHECK_THROWS_WITH_AS(small.rows(10, 7, DType::f32, Device::cpu()), doctest::Contains("exceed the 16"), Error);

  // With rotary embeddings block_size changes no parameter: the same weights, the same tokens.
  GPTConfig c = small_config();
  c.rope = true;
  GPT short_context(c, 7);
  c.block_size = int64_t(1) << 61;
  GPT long_context(c, 7);
  long_context.load_state_dict(short_context.state_dict());
  const Tensor prompt = tokens({3, 1, 4}, 1);
  CHECK(long_context.generate(prompt, 4, 0.0).to_vector<int64_t>() ==
        short_context.generate(prompt, 4, 0.0).to_vector<int64_t>());
}
