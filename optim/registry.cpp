#include "optim/registry.h"

#include "core/error.h"
#include "optim/adam.h"
#include "optim/muon.h"
#include "optim/prodigy.h"
#include "optim/sgd.h"

namespace lathe::optim {

const std::vector<OptimizerKind>& optimizer_kinds() {
  // The order is the order of optimizer_names().
  //  name       fused  shard  lr     betas  adamw beside
  static const std::vector<OptimizerKind> kinds = {
      {"sgd", false, true, 1e-3, false, false,
       [](const nlohmann::json& d, bool) -> std::unique_ptr<Optimizer> { return std::make_unique<SGD>(d); }},
      {"adam", true, true, 1e-3, true, false,
       [](const nlohmann::json& d, bool fused) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(d, fused); }},
      {"adamw", true, true, 1e-3, true, false,
       [](const nlohmann::json& d, bool fused) -> std::unique_ptr<Optimizer> { return std::make_unique<AdamW>(d, fused); }},
      {"prodigy", false, false, 1.0, true, false,
       [](const nlohmann::json& d, bool) -> std::unique_ptr<Optimizer> { return std::make_unique<Prodigy>(d); }},
      // torch.optim.Muon alone: matrices only. A model's run pairs it with AdamW (train/muon_groups.h).
      {"muon", false, true, 0.02, false, true,
       [](const nlohmann::json& d, bool) -> std::unique_ptr<Optimizer> { return std::make_unique<Muon>(d); }},
  };
  return kinds;
}

const OptimizerKind* find_optimizer_kind(const std::string& name) {
  for (const OptimizerKind& k : optimizer_kinds())
    if (name == k.name) return &k;
  return nullptr;
}

const OptimizerKind& optimizer_kind(const std::string& name, const std::string& what) {
  const OptimizerKind* kind = find_optimizer_kind(name);
  LATHE_CHECK(kind != nullptr, what, " must be ", optimizer_names(), ", got \"", name, "\"");
  return *kind;
}

std::string optimizer_names() {
  const auto& kinds = optimizer_kinds();
  std::string out;
  for (size_t i = 0; i < kinds.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + kinds[i].name;
  return out;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const nlohmann::json& defaults, bool fused) {
  const OptimizerKind* kind = find_optimizer_kind(name);
  LATHE_CHECK(kind != nullptr, "unknown optimizer \"", name, "\" (expected ", optimizer_names(), ")");
  LATHE_CHECK(!fused || kind->has_fused, "optimizer \"", name, "\" has no fused path");
  return kind->make(defaults, fused);
}

}  // namespace lathe::optim
