// What the "gpt" and "train" case kinds share: the model with the case's weights, and token ids.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/gpt.h"
#include "nn/precision.h"
#include "serialize/safetensors.h"

namespace lathe::ref {

// The case's GPT: spec["config"] with dropout off, on `device`, with the case's weights under
// nanoGPT's names (lm_head.weight optional); a tensor that is neither a weight nor `is_input` is
// an error ("nor <inputs>"). `kind` names the case kind in messages.
std::unique_ptr<nn::GPT> case_gpt(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device,
                                  const std::string& kind, const std::function<bool(const std::string&)>& is_input,
                                  const std::string& inputs);

// Token ids `name` of the case: [B, T], i64 or i32, within the vocabulary; as i64 on `device`.
// Targets (`targets`) may also hold -1, a position the loss ignores (PyTorch's ignore_index=-1,
// which nanoGPT uses).
Tensor case_tokens(const serialize::SafetensorsFile& c, const std::string& name, const nn::GPT& model, Device device,
                   const std::string& kind, bool targets = false);

// The case's "precision" ("f32" when absent, "bf16", "fp16"): the mixed-precision policy its model
// runs under (nn/precision.h).
nn::Precision case_precision(const nlohmann::json& spec, const std::string& kind);

}  // namespace lathe::ref
