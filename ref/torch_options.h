// PyTorch's optimizers take, beside their hyperparameters, options that pick an implementation of
// the same arithmetic (`foreach`, `capturable`, `fused`), mark a step for autograd
// (`differentiable`), or are an LR scheduler's record (`initial_lr`); `optimizer.param_groups`
// lists them all. A reference case may carry them as PyTorch writes them, so that a group dumped
// from PyTorch is a valid group: they are checked here and set aside before the options reach
// lathe's optimizers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace lathe::ref {

// `options` without those keys. `fused` is the case's choice: a `fused` of true or false must agree
// with it (null is PyTorch's "decide for me"); `differentiable` must be false or null. Throws
// lathe::Error naming `where` and the key otherwise.
nlohmann::json without_implementation_options(const nlohmann::json& options, bool fused, const std::string& where);

}  // namespace lathe::ref
