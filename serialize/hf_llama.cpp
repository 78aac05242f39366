#include "serialize/hf_llama.h"

#include <cmath>
#include <cstring>
#include <regex>

#include "core/autograd.h"
#include "core/error.h"
#include "core/json_value.h"
#include "core/ops.h"
#include "serialize/hf_directory.h"

namespace lathe::serialize {

namespace {

using json = nlohmann::json;

constexpr double kRmsEps = 1e-5;  // lathe's RMSNorm eps (nn/layers.h); Llama 2's and 3's

std::string layer(int64_t i) { return "model.layers." + std::to_string(i) + "."; }

// lathe's names -> Llama's, for the tensors that keep their shape (c_attn is split apart).
std::vector<std::pair<std::string, std::string>> renamed(const nn::GPTConfig& c) {
  std::vector<std::pair<std::string, std::string>> out = {{"transformer.wte.weight", "model.embed_tokens.weight"}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".", m = layer(i);
    out.insert(out.end(), {{h + "ln_1.weight", m + "input_layernorm.weight"},
                           {h + "attn.c_proj.weight", m + "self_attn.o_proj.weight"},
                           {h + "ln_2.weight", m + "post_attention_layernorm.weight"},
                           {h + "mlp.c_gate.weight", m + "mlp.gate_proj.weight"},
                           {h + "mlp.c_fc.weight", m + "mlp.up_proj.weight"},
                           {h + "mlp.c_proj.weight", m + "mlp.down_proj.weight"}});
  }
  out.emplace_back("transformer.ln_f.weight", "model.norm.weight");
  if (!c.tie_embeddings) out.emplace_back("lm_head.weight", "lm_head.weight");
  return out;
}

}  // namespace

void check_llama_block(const nn::GPTConfig& c, const std::string& what) {
  auto refuse = [&](const std::string& field) {
    LATHE_FAIL(what, ": the model's config has ", field, ", which neither GPT-2's block nor Llama's computes (a "
               "Hugging Face directory holds one of them: docs/gpt2-weights.md)");
  };
  if (!c.rope) refuse("rope = false with the modern block's switches");
  if (c.norm != nn::NormKind::rms_norm) refuse("norm = \"layer_norm\" with rope");
  if (!c.norm_weight) refuse("norm_weight = false (Llama's RMSNorm has weights)");
  if (c.activation != nn::Activation::swiglu)
    refuse(std::string("activation = \"") + nn::activation_name(c.activation) + "\" (Llama's MLP is SwiGLU)");
  if (c.bias) refuse("bias = true (Llama's layers have no biases)");
  if (c.qk_norm) refuse("qk_norm = true");
  if (c.logit_softcap != 0) refuse("logit_softcap = " + std::to_string(c.logit_softcap));
}

json hf_llama_config_of(const nn::GPTConfig& c) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", c.dropout},
          {"head_dim", c.head_size()},
          {"hidden_act", "silu"},
          {"hidden_size", c.n_embd},
          {"initializer_range", 0.02},
          {"intermediate_size", nn::mlp_hidden_size(c.n_embd, c.activation)},
          {"max_position_embeddings", c.block_size},
          {"mlp_bias", false},
          {"model_type", "llama"},
          {"num_attention_heads", c.n_head},
          {"num_hidden_layers", c.n_layer},
          {"num_key_value_heads", c.n_head},
          {"pretraining_tp", 1},
          {"rms_norm_eps", kRmsEps},
          {"rope_scaling", nullptr},
          {"rope_theta", c.rope_base},
          {"tie_word_embeddings", c.tie_embeddings},
          {"torch_dtype", "float32"},
          {"use_cache", true},
          {"vocab_size", c.vocab_size}};
}

nn::GPTConfig gpt_config_from_hf_llama(const json& j, const std::string& file) {
  LATHE_CHECK(j.is_object(), file, ": expected a JSON object, got ", quote_json(j));
  auto has = [&](const char* k) { return j.contains(k); };
  auto size = [&](const char* k) -> int64_t {
    LATHE_CHECK(has(k), file, ": no \"", k, "\"");
    return json_integer(j[k], 1, INT32_MAX, file + ": field \"" + k + "\"");
  };
  auto refuse = [&](const char* k, const std::string& why) {
    LATHE_FAIL(file, ": ", k, " = ", quote_json(j[k]), " cannot be converted: ", why);
  };
  LATHE_CHECK(has("model_type") && j["model_type"] == "llama", file, ": model_type ",
              has("model_type") ? quote_json(j["model_type"]) : "missing", ", expected \"llama\"");
  nn::GPTConfig c;
  c.vocab_size = size("vocab_size");
  c.block_size = size("max_position_embeddings");
  c.n_layer = size("num_hidden_layers");
  c.n_head = size("num_attention_heads");
  c.n_embd = size("hidden_size");
  c.bias = false;
  c.rope = true;
  c.norm = nn::NormKind::rms_norm;
  c.activation = nn::Activation::swiglu;
  LATHE_CHECK(c.n_embd % c.n_head == 0, file, ": hidden_size ", c.n_embd, " is not a multiple of num_attention_heads ",
              c.n_head);
  if (has("num_key_value_heads") && j["num_key_value_heads"] != json(c.n_head))
    refuse("num_key_value_heads", "lathe's attention has as many key/value heads as query heads (no grouped-query attention)");
  if (has("head_dim") && !j["head_dim"].is_null() && j["head_dim"] != json(c.n_embd / c.n_head))
    refuse("head_dim", "lathe's head size is hidden_size / num_attention_heads = " + std::to_string(c.n_embd / c.n_head));
  const int64_t hidden = nn::mlp_hidden_size(c.n_embd, c.activation);
  if (size("intermediate_size") != hidden)
    refuse("intermediate_size", "lathe's SwiGLU is 8 hidden_size / 3 rounded up to a multiple of 64 = " +
                                    std::to_string(hidden) + " wide");
  if (!has("hidden_act") || j["hidden_act"] != "silu") refuse("hidden_act", "lathe's SwiGLU gates with SiLU (\"silu\")");
  if (!has("rms_norm_eps") || !j["rms_norm_eps"].is_number() || j["rms_norm_eps"].get<double>() != kRmsEps)
    refuse("rms_norm_eps", "lathe's RMSNorm uses eps 1e-05");
  for (const char* k : {"attention_bias", "mlp_bias"})
    if (has(k) && j[k] != false) refuse(k, "lathe's modern block has no biases");
  if (has("rope_scaling") && !j["rope_scaling"].is_null()) refuse("rope_scaling", "lathe's rotary embeddings are unscaled");
  if (has("pretraining_tp") && j["pretraining_tp"] != 1) refuse("pretraining_tp", "only 1 computes the plain products");
  if (has("rope_theta")) {
    LATHE_CHECK(j["rope_theta"].is_number(), file, ": rope_theta must be a number, got ", quote_json(j["rope_theta"]));
    c.rope_base = j["rope_theta"].get<double>();
  }
  if (has("tie_word_embeddings")) {
    LATHE_CHECK(j["tie_word_embeddings"].is_boolean(), file, ": tie_word_embeddings must be true or false, got ",
                quote_json(j["tie_word_embeddings"]));
    c.tie_embeddings = j["tie_word_embeddings"].get<bool>();
  } else {
    c.tie_embeddings = false;  // LlamaConfig's default
  }
  if (has("attention_dropout")) {
    LATHE_CHECK(j["attention_dropout"].is_number(), file, ": attention_dropout must be a number, got ",
                quote_json(j["attention_dropout"]));
    c.dropout = j["attention_dropout"].get<double>();
  }
  try {
    c.validate();
  } catch (const Error& e) {
    LATHE_FAIL(file, ": ", e.what());
  }
  return c;
}

GPT2Weights read_hf_llama(const std::string& dir) {
  GPT2Weights out;
  out.config = gpt_config_from_hf_llama(read_hf_config(dir), hf_config_path(dir));
  const nn::GPTConfig& c = out.config;
  std::map<std::string, HfTensor> stored =
      read_hf_tensors(hf_weight_files(dir), [](const std::string& name) { return name; }, "");
  // The layers the weights hold, compared with the config before a name of every layer is made.
  static const std::regex layer_name(R"(model\.layers\.(\d{1,9})\..*)");
  int64_t layers = 0;
  for (const auto& [name, s] : stored) {
    std::smatch m;
    if (std::regex_match(name, m, layer_name)) layers = std::max<int64_t>(layers, std::stoll(m[1].str()) + 1);
  }
  LATHE_CHECK(layers == c.n_layer, dir, ": config.json has num_hidden_layers ", c.n_layer,
              " but the weights hold tensors of ", layers, " layers (model.layers.<i>.*)");
  NoGradGuard no_grad;
  auto take = [&](const std::string& name, const Shape& shape) {
    const auto it = stored.find(name);
    LATHE_CHECK(it != stored.end(), dir, ": the weights hold no tensor '", name, "'");
    LATHE_CHECK(it->second.tensor.shape() == shape, it->second.file, ": tensor '", name, "' is ",
                it->second.tensor.desc(), ", expected ", shape_str(shape), " for the config's sizes");
    Tensor t = hf_as_f32(it->second);
    stored.erase(it);
    return t;
  };
  const int64_t C = c.n_embd, V = c.vocab_size, hidden = nn::mlp_hidden_size(C, c.activation);
  auto shape_of = [&](const std::string& llama) -> Shape {
    auto ends = [&](const char* s) { return llama.size() >= std::strlen(s) && llama.compare(llama.size() - std::strlen(s), std::string::npos, s) == 0; };
    if (ends("embed_tokens.weight") || llama == "lm_head.weight") return {V, C};
    if (ends("norm.weight") || ends("layernorm.weight")) return {C};
    if (ends("o_proj.weight")) return {C, C};
    if (ends("down_proj.weight")) return {C, hidden};
    return {hidden, C};  // gate_proj, up_proj
  };
  for (const auto& [ours, theirs] : renamed(c)) out.weights.emplace_back(ours, take(theirs, shape_of(theirs)));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string m = layer(i);
    out.weights.emplace_back("transformer.h." + std::to_string(i) + ".attn.c_attn.weight",
                             cat({take(m + "self_attn.q_proj.weight", {C, C}), take(m + "self_attn.k_proj.weight", {C, C}),
                                  take(m + "self_attn.v_proj.weight", {C, C})},
                                 0));
  }
  if (c.tie_embeddings) stored.erase("lm_head.weight");  // a tied pair written twice: the first name holds it
  if (!stored.empty())
    LATHE_FAIL(stored.begin()->second.file, ": tensor '", stored.begin()->first, "' is not part of Llama's block as lathe ",
               "computes it (", stored.size(), " unknown tensor(s))");
  return out;
}

void write_hf_llama(const std::string& dir, const nn::GPTConfig& c, const NamedTensors& state, bool overwrite) {
  check_llama_block(c, dir);
  std::map<std::string, Tensor> by_name;
  for (const auto& [name, t] : state) by_name[name] = t;
  auto get = [&](const std::string& name) {
    const auto it = by_name.find(name);
    LATHE_CHECK(it != by_name.end(), dir, ": the model has no tensor '", name, "'");
    return it->second.detach().to(Device::cpu()).to(DType::f32).contiguous();
  };
  NoGradGuard no_grad;
  NamedTensors tensors;
  for (const auto& [ours, theirs] : renamed(c)) tensors.emplace_back(theirs, get(ours));
  const int64_t C = c.n_embd;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const Tensor qkv = get("transformer.h." + std::to_string(i) + ".attn.c_attn.weight");
    const char* names[] = {"q_proj", "k_proj", "v_proj"};
    for (int64_t k = 0; k < 3; ++k)
      tensors.emplace_back(layer(i) + "self_attn." + names[k] + ".weight", qkv.narrow(0, k * C, C).contiguous());
  }
  write_hf_directory(dir, hf_llama_config_of(c), tensors, overwrite);
}

}  // namespace lathe::serialize
