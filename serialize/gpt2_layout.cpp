#include "serialize/gpt2_layout.h"

#include "core/autograd.h"
#include "serialize/json_document.h"

namespace lathe::serialize {

std::vector<std::pair<std::string, Shape>> gpt2_tensors(const nn::GPTConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<std::pair<std::string, Shape>> out = {{"transformer.wte.weight", {c.vocab_size, C}},
                                                    {"transformer.wpe.weight", {c.block_size, C}}};
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    const std::vector<std::pair<std::string, Shape>> block = {
        {"ln_1.weight", {C}},          {"ln_1.bias", {C}},
        {"attn.c_attn.weight", {3 * C, C}}, {"attn.c_attn.bias", {3 * C}},
        {"attn.c_proj.weight", {C, C}},     {"attn.c_proj.bias", {C}},
        {"ln_2.weight", {C}},          {"ln_2.bias", {C}},
        {"mlp.c_fc.weight", {4 * C, C}},    {"mlp.c_fc.bias", {4 * C}},
        {"mlp.c_proj.weight", {C, 4 * C}},  {"mlp.c_proj.bias", {C}}};
    for (const auto& [name, shape] : block) out.emplace_back(h + name, shape);
  }
  out.emplace_back("transformer.ln_f.weight", Shape{C});
  out.emplace_back("transformer.ln_f.bias", Shape{C});
  return out;
}

void check_gpt2_block(const nn::GPTConfig& config, const std::string& what) {
  // The fields GPT-2's formats carry; any other is a block option whose default is GPT-2's.
  static const char* const kGpt2Fields[] = {"vocab_size", "block_size", "n_layer", "n_head",
                                            "n_embd",     "bias",       "dropout"};
  const nlohmann::json given = config.to_json(), defaults = nn::GPTConfig{}.to_json();
  for (const auto& [key, value] : given.items()) {
    bool gpt2_field = false;
    for (const char* f : kGpt2Fields) gpt2_field = gpt2_field || key == f;
    if (gpt2_field || (defaults.contains(key) && defaults[key] == value)) continue;
    LATHE_FAIL(what, ": the model's config has ", key, " = ", quote_json(value),
               ", which GPT-2's layout cannot hold (only the GPT-2 block converts)");
  }
}

bool is_gpt2_block(const nn::GPTConfig& config) {
  nn::GPTConfig gpt2 = config;  // the sizes, bias and dropout of `config`, every switch at its default
  const nn::GPTConfig defaults{};
  gpt2.rope = defaults.rope;
  gpt2.rope_base = defaults.rope_base;
  gpt2.norm = defaults.norm;
  gpt2.norm_weight = defaults.norm_weight;
  gpt2.activation = defaults.activation;
  gpt2.qk_norm = defaults.qk_norm;
  gpt2.tie_embeddings = defaults.tie_embeddings;
  gpt2.logit_softcap = defaults.logit_softcap;
  return gpt2 == config;
}

NamedTensors gpt2_tensors_of(const nn::GPTConfig& config, const NamedTensors& state, const std::string& what) {
  std::map<std::string, Tensor> by_name(state.begin(), state.end());
  NoGradGuard no_grad;
  NamedTensors out;
  for (const auto& [name, shape] : gpt2_tensors(config)) {
    const auto it = by_name.find(name);
    const bool is_bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (it == by_name.end() && is_bias && !config.bias) {
      out.emplace_back(name, Tensor::zeros(shape));
      continue;
    }
    LATHE_CHECK(it != by_name.end(), what, ": the model has no tensor '", name, "'");
    LATHE_CHECK(it->second.shape() == shape, what, ": tensor '", name, "' is ", it->second.desc(), ", expected ",
                shape_str(shape));
    Tensor t = it->second.detach().to(Device::cpu()).to(DType::f32).contiguous();
    out.emplace_back(name, t);
  }
  return out;
}

}  // namespace lathe::serialize
