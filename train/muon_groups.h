// The optimizer of `lathe train --optimizer muon` (and of the reference kind "train" with "muon"):
// Muon for the hidden matrices, AdamW for everything else, as modded-nanogpt and nanochat split a
// GPT (modded-nanogpt: the blocks' parameters of 2 or more dims to Muon; embeddings, head and
// scalars to Adam. nanochat: transformer.h's parameters to Muon, wte and lm_head to AdamW):
//
//   hidden matrices       the 2-D parameters of the blocks (transformer.h.<i>.*: attention and
//                         MLP weights)                                     Muon, `muon` options
//   embeddings and head   the other 2-D parameters (wte, wpe, an untied lm_head)
//                                                                          AdamW, `adamw` options
//   gains and biases      every parameter that is not 2-D                 AdamW, `adamw` options
//                                                                          with weight_decay 0
//
// One composite optimizer (optim/composite.h), kind "muon+adamw": Muon's group first, then
// AdamW's two (nanoGPT's decay / no-decay split of the rest); a set without parameters is left
// out, because an optimizer refuses an empty group. Each group keeps its own options, its lr
// among them: the caller schedules each group from its own peak (train/trainer.cpp).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "nn/module.h"
#include "optim/composite.h"

namespace lathe::train {

// Whether a parameter of this name and shape is one of the hidden matrices Muon updates.
bool is_hidden_matrix(const std::string& name, const Tensor& p);

// `muon` and `adamw` are each optimizer's options under PyTorch's names (`adamw`'s weight_decay
// is the embeddings' and head's); `adamw_fused`: AdamW's fused multi-tensor step.
std::unique_ptr<optim::Composite> make_muon_adamw(const nn::Module& model, const nlohmann::json& muon,
                                                  const nlohmann::json& adamw, bool adamw_fused);

}  // namespace lathe::train
