// Every optimizer a program can name, in one table, with what a program needs to know of it:
// `lathe train --optimizer` (train/), the reference case kinds "optim" and "train" (ref/) and
// lathe.optim (python/) all build their optimizer here and ask it what the optimizer can do, so a
// new optimizer is one row and no other code names one.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace lathe::optim {

struct OptimizerKind {
  const char* name;  // as PyTorch users write it: "adamw"
  bool has_fused;    // a fused (multi-tensor) path exists
  // Its state may be sharded over processes (ZeRO-1): each parameter's update reads that
  // parameter's state alone. Prodigy's reads every parameter's at once.
  bool shardable;
  // A run's learning rate when none is given: 1e-3 for the Adams and SGD; Prodigy's lr is a
  // multiplier of its own step size (1); Muon's is the hidden matrices' (0.02, nanochat's).
  double default_lr;
  // It takes PyTorch's `betas` (beta1, beta2); SGD takes beta1 as its `momentum` and has no beta2.
  bool betas;
  // A run pairs it with AdamW on the parameters it does not take (Muon takes the hidden matrices):
  // the run's --adam-lr and --fused are those AdamW groups' (train/muon_groups.h).
  bool adamw_beside;
  // `defaults`: PyTorch option names (lr, betas, ...), the values every group starts from.
  std::unique_ptr<Optimizer> (*make)(const nlohmann::json& defaults, bool fused);
};

const std::vector<OptimizerKind>& optimizer_kinds();
// The kind called `name`, or nullptr.
const OptimizerKind* find_optimizer_kind(const std::string& name);
// The kind called `name`; an unknown name is an error naming `what` (a flag, a case field) and
// listing the names.
const OptimizerKind& optimizer_kind(const std::string& name, const std::string& what);
// "sgd, adam, adamw, prodigy or muon": the names for error messages.
std::string optimizer_names();
// A new optimizer with no groups yet. Throws lathe::Error for an unknown name ("unknown optimizer
// \"x\" (expected ...)") or a fused path that the optimizer does not have.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const nlohmann::json& defaults, bool fused);

}  // namespace lathe::optim
