#include "train/muon_groups.h"

#include <vector>

#include "core/error.h"
#include "optim/adam.h"
#include "optim/muon.h"

namespace lathe::train {

bool is_hidden_matrix(const std::string& name, const Tensor& p) {
  return p.dim() == 2 && name.rfind("transformer.h.", 0) == 0;
}

std::unique_ptr<optim::Composite> make_muon_adamw(const nn::Module& model, const nlohmann::json& muon,
                                                  const nlohmann::json& adamw, bool adamw_fused) {
  std::vector<Tensor> hidden, matrices, others;
  for (const auto& [name, p] : model.named_parameters())
    (is_hidden_matrix(name, p) ? hidden : p.dim() == 2 ? matrices : others).push_back(p);
  LATHE_CHECK(!hidden.empty(), "muon: the model has no hidden matrices (2-D parameters of transformer.h.*) for Muon");
  const nlohmann::json muon_options = muon.is_null() ? nlohmann::json::object() : muon;
  const nlohmann::json adamw_options = adamw.is_null() ? nlohmann::json::object() : adamw;
  auto muon_part = std::make_unique<optim::Muon>(muon_options);
  muon_part->add_param_group(hidden);
  auto adamw_part = std::make_unique<optim::AdamW>(adamw_options, adamw_fused);
  if (!matrices.empty()) adamw_part->add_param_group(matrices);
  if (!others.empty()) adamw_part->add_param_group(others, {{"weight_decay", 0.0}});
  std::vector<std::unique_ptr<optim::Optimizer>> parts;
  parts.push_back(std::move(muon_part));
  if (adamw_part->num_params() > 0) parts.push_back(std::move(adamw_part));
  return std::make_unique<optim::Composite>(std::move(parts));
}

}  // namespace lathe::train
