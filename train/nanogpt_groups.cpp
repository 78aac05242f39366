#include "train/nanogpt_groups.h"

#include <vector>

namespace lathe::train {

void add_nanogpt_param_groups(optim::Optimizer& opt, const nn::Module& model, const nlohmann::json& options) {
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  opt.add_param_group(decay, options.is_null() ? nlohmann::json::object() : options);
  if (!no_decay.empty()) {
    nlohmann::json nd = options.is_null() ? nlohmann::json::object() : options;
    nd["weight_decay"] = 0.0;
    opt.add_param_group(no_decay, nd);
  }
}

}  // namespace lathe::train
