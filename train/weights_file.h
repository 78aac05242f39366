// A model's weights as one safetensors file, with what is needed to rebuild the model in its
// metadata:
//   "format": "lathe-gpt-weights", "config": GPTConfig as JSON, "tokenizer": "bytes",
//   plus whatever the caller adds (the trainer adds "step" and "val_loss"), and under "lathe"
//   every tensor's checksum (serialize/weights.h), which load_weights verifies.
// Tensors are nanoGPT's state_dict, every name of the tied pair included (lm_head.weight and
// transformer.wte.weight, the same values twice), so that `safetensors.torch.load_file` plus
// nanoGPT's strict `load_state_dict` takes them as they are (tools/torch_loads_lathe.py checks it).
// Files that store the tied weight once (as Hugging Face writes them) load too.
#pragma once

#include <memory>
#include <string>

#include "nn/gpt.h"
#include "serialize/safetensors.h"

namespace lathe::train {

inline constexpr const char* kWeightsFormat = "lathe-gpt-weights";

void save_weights(const std::string& path, const nn::GPT& model, serialize::Metadata extra = {});

struct LoadedModel {
  std::unique_ptr<nn::GPT> model;
  serialize::Metadata metadata;
};
// Builds the model from the file's "config" metadata (or, for a training checkpoint of
// serialize/checkpoint.h, from its document) and loads its weights onto `device`. Errors
// name the file: missing file, no config in the metadata, missing or mis-shaped tensors, a tensor
// whose bytes do not match its recorded checksum.
LoadedModel load_weights(const std::string& path, Device device = Device::cpu());

}  // namespace lathe::train
