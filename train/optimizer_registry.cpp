#include "train/optimizer_registry.h"

#include "core/error.h"
#include "optim/adam.h"
#include "optim/muon.h"
#include "optim/prodigy.h"
#include "optim/sgd.h"

namespace lathe::train {

const std::vector<OptimizerKind>& optimizer_kinds() {
  // The order is the order of optimizer_names().
  static const std::vector<OptimizerKind> kinds = {
      {"sgd", false, [](const nlohmann::json& d, bool) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::SGD>(d);
       }},
      {"adam", true, [](const nlohmann::json& d, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::Adam>(d, fused);
       }},
      {"adamw", true, [](const nlohmann::json& d, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::AdamW>(d, fused);
       }},
      {"prodigy", false, [](const nlohmann::json& d, bool) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::Prodigy>(d);
       }},
      // torch.optim.Muon alone: matrices only. A model's run pairs it with AdamW (train/muon_groups.h).
      {"muon", false, [](const nlohmann::json& d, bool) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::Muon>(d);
       }},
  };
  return kinds;
}

const OptimizerKind* find_optimizer_kind(const std::string& name) {
  for (const OptimizerKind& k : optimizer_kinds())
    if (name == k.name) return &k;
  return nullptr;
}

std::string optimizer_names() {
  const auto& kinds = optimizer_kinds();
  std::string out;
  for (size_t i = 0; i < kinds.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + kinds[i].name;
  return out;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name, const nlohmann::json& defaults, bool fused) {
  const OptimizerKind* kind = find_optimizer_kind(name);
  LATHE_CHECK(kind != nullptr, "unknown optimizer \"", name, "\" (expected ", optimizer_names(), ")");
  LATHE_CHECK(!fused || kind->has_fused, "optimizer \"", name, "\" has no fused path");
  return kind->make(defaults, fused);
}

}  // namespace lathe::train
