// Every optimizer a program can name, in one table: `lathe train --optimizer`, the reference case
// kinds "optim" and "train" (ref/) all build their optimizer here, so a new optimizer is one
// row and the names and error messages agree everywhere.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace lathe::train {

struct OptimizerKind {
  const char* name;  // as PyTorch users write it: "adamw"
  bool has_fused;    // whether a fused (multi-tensor) path exists
  // `defaults`: PyTorch option names (lr, betas, ...), the values every group starts from.
  std::unique_ptr<optim::Optimizer> (*make)(const nlohmann::json& defaults, bool fused);
};

const std::vector<OptimizerKind>& optimizer_kinds();

// The kind called `name`, or nullptr.
const OptimizerKind* find_optimizer_kind(const std::string& name);

// "sgd, adam, adamw, prodigy or muon": the names for error messages.
std::string optimizer_names();

// A new optimizer with no groups yet. Throws lathe::Error for an unknown name ("unknown optimizer
// \"x\" (expected ...)") or a fused path that the optimizer does not have.
std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name, const nlohmann::json& defaults, bool fused);

}  // namespace lathe::train
