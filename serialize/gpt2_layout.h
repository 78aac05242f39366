// What GPT-2's published formats (Hugging Face's directory, llm.c's model file) have in common with
// lathe's GPT: the same tensors under nanoGPT's names. Both formats always have biases, LayerNorm
// eps 1e-5, GELU (tanh) and a head tied to wte, so a model converts exactly when its GPTConfig is
// the GPT-2 block (serialize/hf_gpt2.h and serialize/llmc.h build on this file).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/gpt.h"
#include "serialize/weights.h"

namespace lathe::serialize {

// A GPT-2 read from another program's files: its config and its weights under nanoGPT's names in
// nn.Linear's [out, in] layout, f32, the tied head left out (nn::GPT::load_state_dict takes them).
struct GPT2Weights {
  nn::GPTConfig config;
  NamedTensors weights;
};

// Every tensor of a GPT-2 of `config` in nanoGPT's order and names, biases included whatever
// config.bias says (GPT-2's formats always have them), lm_head.weight left out (tied to wte).
std::vector<std::pair<std::string, Shape>> gpt2_tensors(const nn::GPTConfig& config);

// Refuses a config with anything but the GPT-2 block: a GPTConfig field other than the sizes,
// bias and dropout that differs from its default (a later block option) has no place in GPT-2's
// formats. The error names `what` (the output), the field and its value.
void check_gpt2_block(const nn::GPTConfig& config, const std::string& what);
// Whether check_gpt2_block passes: every switch of the modern block at its default.
bool is_gpt2_block(const nn::GPTConfig& config);

// The tensors of gpt2_tensors(config) taken from `state` (a model's state_dict, on any device), on
// the host and contiguous. A model without biases (config.bias false) gets zeros in their place,
// which compute exactly what no bias computes. A tensor missing from `state` or of another shape is
// an error naming `what` and the tensor.
NamedTensors gpt2_tensors_of(const nn::GPTConfig& config, const NamedTensors& state, const std::string& what);

}  // namespace lathe::serialize
