// The modern block in Hugging Face's Llama layout: a directory that transformers'
// LlamaForCausalLM.from_pretrained loads as the same network, and that lathe reads back.
//
//   config.json   LlamaConfig: model_type "llama", architectures ["LlamaForCausalLM"], hidden_size,
//                 intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
//                 max_position_embeddings, rms_norm_eps 1e-5, rope_theta, vocab_size,
//                 tie_word_embeddings, hidden_act "silu", attention_bias and mlp_bias false
//   model.safetensors  model.embed_tokens.weight, model.layers.<i>.{input_layernorm,
//                 post_attention_layernorm}.weight, model.layers.<i>.self_attn.{q,k,v,o}_proj.weight,
//                 model.layers.<i>.mlp.{gate,up,down}_proj.weight, model.norm.weight, and lm_head.weight
//                 when the head is untied (save_pretrained writes one name of a tied pair)
//
// lathe's switches that are Llama's: rope, norm "rms_norm" with weights, activation "swiglu", no
// biases, no QK-norm, no soft cap, tied or untied. Both use the rotate-half convention, so q and k
// go as they are; c_attn's rows are q_proj, k_proj and v_proj one after the other, c_gate is
// gate_proj, c_fc up_proj and c_proj down_proj. A config lathe cannot compute is refused naming the
// field (grouped-query attention, another eps, activation, rope scaling, biases, a hidden size other
// than lathe's SwiGLU width).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serialize/gpt2_layout.h"

namespace lathe::serialize {

// Refuses a config that is not Llama's block, naming `what` and the switch.
void check_llama_block(const nn::GPTConfig& config, const std::string& what);

// config.json of `config`, and back (`file` names it in errors).
nlohmann::json hf_llama_config_of(const nn::GPTConfig& config);
nn::GPTConfig gpt_config_from_hf_llama(const nlohmann::json& config, const std::string& file);

// Reads and checks a whole Llama directory: its config and its weights under lathe's names, f32.
GPT2Weights read_hf_llama(const std::string& dir);

// Writes `state` (a model's state_dict) of `config` as a Llama directory (serialize/hf_directory.h:
// `dir` absent or empty unless `overwrite`, written whole beside it and put in place).
void write_hf_llama(const std::string& dir, const nn::GPTConfig& config, const NamedTensors& state, bool overwrite);

}  // namespace lathe::serialize
