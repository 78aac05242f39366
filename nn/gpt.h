// A GPT-2-style language model, laid out as nanoGPT's GPT so that parameter names and shapes
// match its state_dict ("transformer.wte.weight", "transformer.h.0.attn.c_attn.weight", ...,
// "lm_head.weight" tied to "transformer.wte.weight").
//
//   x = wte(idx) + wpe(positions); x = block(x) for each block; logits = ln_f(x) @ wte^T
//
// GPTConfig's switches make it the modern block of nanochat and the modded-nanogpt speedrun
// instead, each on its own: rotary embeddings in attention (no wpe), RMSNorm, ReLU^2 or SwiGLU,
// QK-norm, an untied lm_head, soft-capped logits. Generation keeps a KV cache per block; see
// GPT::generate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/block.h"
#include "nn/sampling.h"

namespace lathe::nn {

struct GPTConfig {
  int64_t vocab_size = 0, block_size = 0, n_layer = 0, n_head = 0, n_embd = 0;
  bool bias = true;       // biases in Linear and LayerNorm layers (nanoGPT's `bias`)
  double dropout = 0.0;

  // The modern block's switches. Each default is GPT-2's model, so every weight file and checkpoint
  // of it loads unchanged, and to_json leaves out a switch at its default, so such a model's config
  // reads exactly as before (older lathe reads it too).
  bool rope = false;             // rotary position embeddings on q and k; no wpe (nn/rotary.h)
  double rope_base = 10000.0;    // theta_i = position * rope_base^(-2i / head_size)
  NormKind norm = NormKind::layer_norm;  // ln_1, ln_2, ln_f: LayerNorm or RMSNorm, eps 1e-5 both
  bool norm_weight = true;       // the norms' weights (RMSNorm without them: modded-nanogpt's)
  Activation activation = Activation::gelu_tanh;  // the MLP's; SwiGLU's hidden size: mlp_hidden_size
  bool qk_norm = false;          // RMSNorm of each head's q and k (no weight), before the product
  bool tie_embeddings = true;    // lm_head.weight is wte.weight; false: a parameter of its own
  double logit_softcap = 0.0;    // > 0: logits = cap * tanh(logits / cap); 0: off

  // Throws an error naming the field at fault: a size that is not positive, a value that f32 does
  // not hold, a switch's setting without the switch, sizes whose products overflow.
  void validate() const;

  // The parameters of the model (each once: the tied head counts with wte), computed with every
  // product checked for overflow (an error names the fields). This is the one place that knows the
  // model's size from its config: GPT's constructor checks it against memory before allocating,
  // and loaders check a file's tensors against it before building anything.
  int64_t parameter_count() const;

  // The sizes of tools/torch_gpt_reference.py: tiny, small, char (nanoGPT's shakespeare-char),
  // nanogpt-cpu, speedrun-small (the speedrun's block at small's size), gpt2 (GPT-2 small with the
  // vocabulary padded to 50304). Unknown names list the presets.
  static GPTConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();

  // {"vocab_size", "block_size", "n_layer", "n_head", "n_embd", "bias", "dropout"} and the switches
  // that differ from their defaults ("rope", "rope_base", "norm": "layer_norm" | "rms_norm",
  // "norm_weight", "activation": "gelu_tanh" | "squared_relu" | "swiglu", "qk_norm",
  // "tie_embeddings", "logit_softcap"). The first five are required; every other field defaults as
  // above. Errors name the missing or bad field.
  // every_field: the switches at their defaults too (to compare two configs field by field).
  nlohmann::json to_json(bool every_field = false) const;
  static GPTConfig from_json(const nlohmann::json& j);

  // Every field once, in order: f(name, member, gpt2) with gpt2 true for GPT-2's seven (the first
  // five required, always written) and false for the modern block's switches. Members are int64_t,
  // bool, double, NormKind or Activation. to_json, from_json and the command's checks of a config
  // file (train/model_config.cpp) all walk this list; a new field is one line here.
  template <class Config, class F>
  static void for_each_field(Config& c, F&& f) {
    f("vocab_size", c.vocab_size, true);
    f("block_size", c.block_size, true);
    f("n_layer", c.n_layer, true);
    f("n_head", c.n_head, true);
    f("n_embd", c.n_embd, true);
    f("bias", c.bias, true);
    f("dropout", c.dropout, true);
    f("rope", c.rope, false);
    f("rope_base", c.rope_base, false);
    f("norm", c.norm, false);
    f("norm_weight", c.norm_weight, false);
    f("activation", c.activation, false);
    f("qk_norm", c.qk_norm, false);
    f("tie_embeddings", c.tie_embeddings, false);
    f("logit_softcap", c.logit_softcap, false);
  }
  // A field's JSON type ("integer", "boolean", "number" or "string"), or nullptr for a name that
  // is no field; and every name, "vocab_size, block_size, ...", for messages.
  static const char* field_json_type(const std::string& name);
  static std::string field_names();

  int64_t head_size() const { return n_head > 0 ? n_embd / n_head : 0; }

  friend bool operator==(const GPTConfig&, const GPTConfig&) = default;
};

// For nlohmann's `j.get<GPTConfig>()` and `json j = cfg`.
void to_json(nlohmann::json& j, const GPTConfig& c);
void from_json(const nlohmann::json& j, GPTConfig& c);

// nanoGPT's `transformer` ModuleDict.
class Transformer : public Module {
 public:
  Transformer(const GPTConfig& c, std::shared_ptr<Generator> gen, LayerOptions opt);

  // The angle tables every block's attention shares; null without rotary embeddings.
  std::shared_ptr<const RotaryTables> rotary;

  Embedding wte;                // token embeddings [vocab_size, n_embd]
  std::optional<Embedding> wpe;  // position embeddings [block_size, n_embd]; absent with rotary ones
  Dropout drop;
  ModuleList<Block> h;
  std::unique_ptr<Norm> ln_f;
};

// The mixed-precision policy of one model, shared with all its layers; mutable so that
// GPT::set_precision reaches every layer at once.
struct SharedPrecision {
  std::shared_ptr<PrecisionPolicy> policy = std::make_shared<PrecisionPolicy>();
};

struct GPTOutput {
  Tensor logits;  // [B, T, vocab_size], in the precision policy's loss dtype (bf16 in a bf16 run)
  Tensor loss;    // scalar mean cross-entropy (f32, f64 for an f64 model); undefined without targets
};

class GPT : public Module {
 public:
  // GPT-2 initialisation: weights of Linear and Embedding layers normal(0, 0.02) (an untied lm_head
  // and SwiGLU's c_gate too), the residual projections (c_proj.weight) normal(0, 0.02 /
  // sqrt(2 n_layer)), biases 0, norm weights 1.
  // Parameter i draws from the counter stream (seed, offset_i), offset_i the element count of the
  // parameters before it, so the same seed gives the same weights on every device.
  explicit GPT(const GPTConfig& config, uint64_t seed = 0, Device device = Device::cpu());
  // A model whose every parameter its caller loads next (a strict load_state_dict: a weights
  // file, a reference case, --init-from, a checkpoint): the layers' zeros and ones, without the
  // random draw, which would be overwritten (for GPT-2 124M, 2.5 of the 7.0 s that `lathe sample`
  // took). The dropout generator is seeded with `dropout_seed`, as the seeded constructor's is.
  struct ToBeLoaded {};
  static constexpr ToBeLoaded kToBeLoaded{};
  GPT(const GPTConfig& config, ToBeLoaded, Device device, uint64_t dropout_seed = 0);

  // idx [B, T] (i32 or i64, 1 <= T <= block_size, ids in [0, vocab_size)); targets likewise, or
  // -1 for positions to ignore (as nanoGPT). Errors name the bad value and the limit. The loss is
  // the fused classifier's (fused_cross_entropy): its gradient is computed in this forward, beside
  // the logits the output keeps.
  GPTOutput forward(const Tensor& idx, const Tensor& targets = Tensor()) const;
  // The loss of forward(idx, targets) alone, as a training step or an evaluation wants it: the
  // logits are handed to the fused classifier, which writes their gradient over them, so a step
  // holds one [B, T, vocab_size] tensor between forward and backward instead of two.
  Tensor loss(const Tensor& idx, const Tensor& targets) const;

  // Parameters counted once each (the tied wte/lm_head weight once); nanoGPT reports the count
  // without the position embeddings (a model with rotary embeddings has none).
  int64_t num_params(bool exclude_position_embeddings = false) const;

  // Appends max_new_tokens tokens to each row of idx [B, T] and returns [B, T + max_new_tokens]
  // (i64, on the model's device). Each step conditions on the last block_size tokens, scales the
  // logits by 1/temperature, keeps the top_k largest (0: all), and draws from the softmax with a
  // Generator seeded with `seed` (one draw per row per step). temperature 0 takes the argmax.
  // Runs in eval mode (no dropout) without gradients; the training flag is restored afterwards.
  //
  // With use_cache, each block keeps its keys and values (with rotary embeddings, the keys turned by
  // their positions), so a step costs one position instead of the whole context. Once the context
  // is full, the window slides and every position changes, so the cache cannot be rolled: the step
  // then recomputes the cropped window, as nanoGPT always does. Both paths give the same tokens.
  // vocab_limit > 0 draws only ids below it (SamplingOptions::vocab_limit).
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, double temperature = 1.0, int64_t top_k = 0,
                  uint64_t seed = 0, bool use_cache = true, int64_t vocab_limit = 0);
  // The same with every option of nn/sampling.h (top_p, min_p, the repetition penalty over each
  // row's tokens so far, the prompt's included). After each step `on_token` (when given) receives the
  // ids drawn, one per row; returning false ends generation there (a chat stops at its end-of-turn
  // token), and the result holds the tokens drawn so far.
  using TokenCallback = std::function<bool(const std::vector<int64_t>& next)>;
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, const SamplingOptions& sampling, uint64_t seed = 0,
                  bool use_cache = true, const TokenCallback& on_token = {});
  Tensor generate_nocache(const Tensor& idx, int64_t max_new_tokens, double temperature = 1.0, int64_t top_k = 0,
                          uint64_t seed = 0) {
    return generate(idx, max_new_tokens, temperature, top_k, seed, false);
  }

  // Checks token ids [B, T] for this model: i32/i64, 1 <= T <= block_size, values in
  // [0, vocab_size) (or -1 where allow_ignore). Values are read only from host-accessible memory
  // (cuda ids are checked by the kernels, so that a step does not synchronise); `what` names the
  // tensor in the message.
  void check_token_ids(const char* what, const Tensor& t, bool allow_ignore = false) const;

  // The mixed-precision policy of the forward (nn/precision.h); f32 by default. Parameters stay
  // f32 whatever the precision (master weights). Checks first that the model's device runs every
  // 16-bit kernel the policy needs (an error names the precision, the device and the kernel).
  // Not part of GPTConfig: a run's precision is stored with the run's options.
  void set_precision(Precision p);
  Precision precision() const { return precision_.policy->precision(); }
  const PrecisionPolicy& precision_policy() const { return *precision_.policy; }
  PrecisionPolicy& precision_policy() { return *precision_.policy; }

  const GPTConfig& config() const { return config_; }
  // The generator every dropout layer draws from (a checkpoint saves its seed and offset).
  Generator& dropout_generator() { return *dropout_gen_; }
  Device device() const { return transformer.wte.weight.device(); }

 protected:
  // nanoGPT (without flash attention) saves its causal masks as buffers "transformer.h.N.attn.bias".
  bool ignored_state_key(const std::string& key) const override;

 private:
  // The layers, their parameters as the layers make them (zeros, norm weights 1).
  GPT(const GPTConfig& config, Device device, std::shared_ptr<Generator> dropout_gen);
  // The final hidden states [B, T, C] of idx placed at positions pos0 .. pos0 + T - 1; with
  // caches (one per block), keys and values are appended to them.
  // The last block's MLP branch is left pending, for ln_f to add.
  Residual hidden_states(const Tensor& idx, int64_t pos0, std::vector<KVCache>* caches) const;
  // Logits [B, V] of the last position of hidden states [B, T, C], in the policy's softmax dtype
  // (f32 in a 16-bit run), for sampling.
  Tensor last_logits(const Residual& hidden) const;
  // Checks idx and targets (when defined) for forward and loss.
  void check_inputs(const Tensor& idx, const Tensor& targets) const;
  // Logits [B, T, V] of final hidden states: ln_f, lm_head, the soft-capping, in the policy's loss
  // dtype (bf16 in a bf16 run).
  Tensor logits_of(const Residual& hidden) const;

  GPTConfig config_;
  std::shared_ptr<Generator> dropout_gen_;
  SharedPrecision precision_;  // before the layers, which keep a reference to its policy

 public:
  Transformer transformer;
  Linear lm_head;  // no bias; weight tied to transformer.wte.weight unless config.tie_embeddings is false
};

}  // namespace lathe::nn
