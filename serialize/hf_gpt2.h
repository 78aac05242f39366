// GPT-2 in Hugging Face's layout: a directory as transformers' save_pretrained writes it.
//
//   config.json          GPT2Config: model_type "gpt2", vocab_size, n_positions, n_embd, n_layer,
//                        n_head, n_inner, activation_function, layer_norm_epsilon, the dropouts
//                        (resid_pdrop, embd_pdrop, attn_pdrop), scale_attn_weights, ...
//   model.safetensors    the weights (or model.safetensors.index.json and the shards it names)
//
// Tensor names are nanoGPT's, with the "transformer." prefix (GPT2LMHeadModel) or without it
// (GPT2Model, and the early published files); the attention and MLP weights are Conv1D's, stored
// [in, out], the transpose of nn.Linear's [out, in]; lm_head.weight is absent (save_pretrained
// keeps one name of the tied pair) or present and then equal to wte. The causal-mask buffers of
// older files (h.<i>.attn.bias, h.<i>.attn.masked_bias) are ignored.
//
// The config maps onto lathe's GPTConfig field by field: n_positions -> block_size, vocab_size,
// n_embd, n_layer, n_head; biases always (bias true); the three dropouts must be equal and become
// dropout. A field missing from config.json takes transformers' default (GPT2Config's). Whatever
// lathe's GPT cannot compute is refused, naming the field and its value: an activation other than
// the tanh GELU ("gelu_new", or its other name "gelu_pytorch_tanh"), n_inner other than 4 n_embd,
// layer_norm_epsilon other than lathe's 1e-5, scale_attn_weights false,
// scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn, add_cross_attention, an untied head
// (tie_word_embeddings false), a model_type other than "gpt2". Other fields (token ids,
// initializer_range, use_cache, the summary_* of the double-heads model, ...) do not change the
// logits and are ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serialize/gpt2_layout.h"
#include "serialize/hf_directory.h"

namespace lathe::serialize {

// GPTConfig from a parsed config.json; `file` names it in errors.
nn::GPTConfig gpt_config_from_hf(const nlohmann::json& config, const std::string& file);
// The config.json of `config` (the GPT-2 block: check_gpt2_block first).
nlohmann::json hf_config_of(const nn::GPTConfig& config);

// Reads and checks a whole directory; every error names the file, and the field or tensor at
// fault: no config.json, no weights, a field lathe cannot represent, a tensor missing, misshapen,
// of a non-floating dtype or unknown, a head that differs from wte. Weights of any floating
// dtype are read as f32.
GPT2Weights read_hf_gpt2(const std::string& dir);

// Writes `dir`/config.json and `dir`/model.safetensors (Conv1D layouts, "transformer." names, no
// lm_head.weight, metadata "format": "pt") so that GPT2LMHeadModel.from_pretrained(dir) loads
// them. `state` is a model's state_dict (any device). Everything is checked before anything is
// written. `dir` must be absent or empty unless `overwrite`; the model is written into a directory
// beside it and put in place in one rename or swap (serialize/staged_directory.h), so that a
// failure or a kill leaves the old directory whole. With `overwrite`, the entries of the old
// directory that are not a model's config or weights (a tokenizer, a README) are carried over.
void write_hf_gpt2(const std::string& dir, const nn::GPTConfig& config, const NamedTensors& state,
                   bool overwrite = false);

}  // namespace lathe::serialize
