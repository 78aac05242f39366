// nanoGPT's parameter groups (configure_optimizers in its model.py), used by `lathe train` and by
// the reference case kind "train", so the two cannot drift apart.
//
// Every parameter with 2 or more dims (matmul weights, embeddings) is in the first group, with
// `options` as given (its weight_decay, or the optimizer's default when `options` names none);
// every other parameter (biases, LayerNorm weights) is in a second group with the same options
// but weight_decay 0. nanoGPT always makes both groups; here the second is left out when the model
// has no such parameter, because an optimizer refuses an empty group (a GPT always has LayerNorm
// weights, so for a GPT the two agree).
#pragma once

#include <nlohmann/json.hpp>

#include "nn/module.h"
#include "optim/optimizer.h"

namespace lathe::train {

void add_nanogpt_param_groups(optim::Optimizer& opt, const nn::Module& model, const nlohmann::json& options);

}  // namespace lathe::train
