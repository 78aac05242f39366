#include "train/gguf_export.h"

#include <map>

#include "core/autograd.h"
#include "core/error.h"
#include "core/ops.h"
#include "data/gpt2_vocab.h"

namespace lathe::train {

namespace {

using serialize::GgufType;

// GGUF's token types (llama.cpp's llama_token_type).
constexpr int32_t kNormal = 1, kControl = 3, kUnused = 5;
// general.file_type (llama.cpp's llama_ftype): all F32, mostly F16, mostly Q8_0.
uint32_t file_type(GgufType t) { return t == GgufType::f32 ? 0 : t == GgufType::f16 ? 1 : 7; }

// The rows of a [D_total, C] projection permuted head by head from rotate-half pairs (i, i + D/2)
// to adjacent ones (2i, 2i + 1): row j*D/2 + i of each head goes to 2i + j.
Tensor adjacent_pairs(const Tensor& w, int64_t heads) {
  const int64_t rows = w.size(0), D = rows / heads;
  return w.reshape({heads, 2, D / 2, w.size(1)}).transpose(1, 2).contiguous().reshape({rows, w.size(1)});
}

}  // namespace

std::string gguf_architecture(const nn::GPTConfig& c, const std::string& what) {
  auto refuse = [&](const std::string& why) -> std::string {
    LATHE_FAIL(what, ": ", why, "; no llama.cpp architecture computes this model (lathe writes gpt2, llama, arcee and "
               "qwen3: docs/gpt2-weights.md, \"GGUF\")");
  };
  if (c.logit_softcap != 0)
    return refuse("logit_softcap = " + std::to_string(c.logit_softcap) +
                  ": llama.cpp caps logits only in architectures that differ otherwise (gemma's)");
  if (!c.rope) {
    if (c.norm != nn::NormKind::layer_norm) return refuse("norm = \"rms_norm\" without rope (GPT-2's block has LayerNorm)");
    if (c.activation != nn::Activation::gelu_tanh)
      return refuse(std::string("activation = \"") + nn::activation_name(c.activation) + "\" without rope");
    if (c.qk_norm) return refuse("qk_norm without rope");
    return "gpt2";
  }
  if (c.norm != nn::NormKind::rms_norm) return refuse("rope with norm = \"layer_norm\"");
  if (c.bias) return refuse("bias = true with rope (llama's block has no biases)");
  if (c.activation == nn::Activation::gelu_tanh) return refuse("rope with activation = \"gelu_tanh\"");
  if (c.qk_norm)
    return c.activation == nn::Activation::swiglu ? "qwen3"
                                                  : refuse("qk_norm with activation = \"squared_relu\" (llama.cpp's "
                                                           "QK-norm block, qwen3, is SwiGLU's)");
  return c.activation == nn::Activation::swiglu ? "llama" : "arcee";
}

void write_gguf(const std::string& path, const nn::GPT& model, const data::BpeTokenizer& tok, GgufType type,
                const std::string& name, serialize::Existing existing, const data::ChatTokens* chat) {
  const nn::GPTConfig& c = model.config();
  const std::string arch = gguf_architecture(c, path);
  const int64_t V = c.vocab_size, C = c.n_embd, L = c.n_layer, H = c.n_head, D = c.head_size();
  const int64_t ordinary = int64_t(tok.model().size());
  LATHE_CHECK(ordinary <= V, path, ": the tokenizer (", tok.identity().describe(), ") has ", ordinary,
              " ordinary tokens, more than the model's vocab_size ", V);
  LATHE_CHECK(!chat || chat->vocab_size() <= V, path, ": the chat tokens (ids up to ", chat ? chat->end : 0,
              ") do not fit the model's vocab_size ", V);
  NoGradGuard no_grad;
  std::map<std::string, Tensor> state;
  for (const auto& [n, t] : model.state_dict()) state[n] = t.detach().to(Device::cpu()).to(DType::f32).contiguous();
  auto at = [&](const std::string& n) -> const Tensor& { return state.at(n); };
  auto ones = [](int64_t n) { return Tensor::ones({n}); };
  auto zeros = [](int64_t n) { return Tensor::zeros({n}); };
  auto weight_or_ones = [&](const std::string& n) { return state.count(n) ? at(n) : ones(C); };
  auto bias_or_zeros = [&](const std::string& n, int64_t size) { return state.count(n) ? at(n) : zeros(size); };

  serialize::GgufWriter w;
  w.add("general.architecture", arch);
  w.add("general.name", name);
  w.add("general.file_type", file_type(type));
  w.add("general.alignment", uint32_t(32));
  const std::string a = arch + ".";
  w.add(a + "context_length", uint32_t(c.block_size));
  w.add(a + "embedding_length", uint32_t(C));
  w.add(a + "block_count", uint32_t(L));
  w.add(a + "feed_forward_length", uint32_t(nn::mlp_hidden_size(C, c.activation)));
  w.add(a + "attention.head_count", uint32_t(H));
  w.add(a + "attention.head_count_kv", uint32_t(H));
  if (arch == "gpt2") {
    w.add(a + "attention.layer_norm_epsilon", 1e-5f);
  } else {
    w.add(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    w.add(a + "rope.freq_base", float(c.rope_base));
    w.add(a + "rope.dimension_count", uint32_t(D));
    w.add(a + "vocab_size", uint32_t(V));
  }

  // The tokenizer: every id of the model's vocabulary.
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int64_t id = 0; id < V; ++id) {
    if (id < ordinary) {
      tokens.push_back(data::gpt2_alphabet_text(tok.model().token_bytes(uint32_t(id))));
      types.push_back(kNormal);
    } else if (id == int64_t(tok.end_of_text())) {
      tokens.push_back("<|endoftext|>");
      types.push_back(kControl);
    } else if (chat && id >= chat->system && id <= chat->end) {
      tokens.push_back(data::kChatTokenNames[id - chat->system]);
      types.push_back(kControl);
    } else {
      tokens.push_back("[PAD" + std::to_string(id) + "]");
      types.push_back(kUnused);
    }
  }
  std::vector<std::string> merges;
  for (const data::BpeMerge& m : tok.model().merges())
    merges.push_back(data::gpt2_alphabet_text(tok.model().token_bytes(m.left)) + " " +
                     data::gpt2_alphabet_text(tok.model().token_bytes(m.right)));
  w.add("tokenizer.ggml.model", "gpt2");
  w.add("tokenizer.ggml.pre", tok.pretokenizer().pattern() == data::PretokenPattern::gpt2 ? "gpt-2" : "llama3");
  w.add("tokenizer.ggml.tokens", tokens);
  w.add("tokenizer.ggml.token_type", types);
  w.add("tokenizer.ggml.merges", merges);
  if (int64_t(tok.end_of_text()) < V) {
    w.add("tokenizer.ggml.bos_token_id", uint32_t(tok.end_of_text()));
    // A chat model's reply ends at <|end|>: llama.cpp stops generating at EOS.
    w.add("tokenizer.ggml.eos_token_id", uint32_t(chat ? chat->end : tok.end_of_text()));
  }
  if (chat) w.add("tokenizer.chat_template", data::chat_template_jinja());
  w.add("tokenizer.ggml.add_bos_token", false);
  w.add("tokenizer.ggml.add_eos_token", false);

  // Matrices in the chosen type; vectors (norms, biases) stay f32, as llama.cpp's MOSTLY_ types.
  auto matrix = [&](const std::string& n, const Tensor& t) { w.add_tensor(n, t, type); };
  auto vector = [&](const std::string& n, const Tensor& t) { w.add_tensor(n, t, GgufType::f32); };
  matrix("token_embd.weight", at("transformer.wte.weight"));
  if (arch == "gpt2") matrix("position_embd.weight", at("transformer.wpe.weight"));
  const bool norm_and_rope = arch != "gpt2";
  for (int64_t i = 0; i < L; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".", b = "blk." + std::to_string(i) + ".";
    vector(b + "attn_norm.weight", weight_or_ones(h + "ln_1.weight"));
    if (!norm_and_rope) vector(b + "attn_norm.bias", bias_or_zeros(h + "ln_1.bias", C));
    const Tensor& qkv = at(h + "attn.c_attn.weight");
    if (arch == "gpt2") {
      matrix(b + "attn_qkv.weight", qkv);
      vector(b + "attn_qkv.bias", bias_or_zeros(h + "attn.c_attn.bias", 3 * C));
    } else {
      const bool permute = arch != "qwen3";  // NORM mode: adjacent pairs
      const Tensor q = qkv.narrow(0, 0, C).contiguous(), k = qkv.narrow(0, C, C).contiguous();
      matrix(b + "attn_q.weight", permute ? adjacent_pairs(q, H) : q);
      matrix(b + "attn_k.weight", permute ? adjacent_pairs(k, H) : k);
      matrix(b + "attn_v.weight", qkv.narrow(0, 2 * C, C).contiguous());
      if (arch == "qwen3") {
        vector(b + "attn_q_norm.weight", ones(D));
        vector(b + "attn_k_norm.weight", ones(D));
      }
    }
    matrix(b + "attn_output.weight", at(h + "attn.c_proj.weight"));
    if (!norm_and_rope) vector(b + "attn_output.bias", bias_or_zeros(h + "attn.c_proj.bias", C));
    vector(b + "ffn_norm.weight", weight_or_ones(h + "ln_2.weight"));
    if (!norm_and_rope) vector(b + "ffn_norm.bias", bias_or_zeros(h + "ln_2.bias", C));
    if (c.activation == nn::Activation::swiglu) matrix(b + "ffn_gate.weight", at(h + "mlp.c_gate.weight"));
    matrix(b + "ffn_up.weight", at(h + "mlp.c_fc.weight"));
    matrix(b + "ffn_down.weight", at(h + "mlp.c_proj.weight"));
    if (!norm_and_rope) {
      vector(b + "ffn_up.bias", bias_or_zeros(h + "mlp.c_fc.bias", 4 * C));
      vector(b + "ffn_down.bias", bias_or_zeros(h + "mlp.c_proj.bias", C));
    }
  }
  vector("output_norm.weight", weight_or_ones("transformer.ln_f.weight"));
  if (!norm_and_rope) vector("output_norm.bias", bias_or_zeros("transformer.ln_f.bias", C));
  if (!c.tie_embeddings) matrix("output.weight", at("lm_head.weight"));
  w.write(path, existing);
}

}  // namespace lathe::train
