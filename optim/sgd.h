// Stochastic gradient descent with momentum, following PyTorch's single-tensor SGD step exactly.
// Defaults: lr 1e-3, momentum 0, dampening 0, weight_decay 0, nesterov false, maximize false.
// State (PyTorch key): momentum_buffer with the parameter, created from the first gradient seen
// (only when momentum != 0).
#pragma once

#include "optim/optimizer.h"

namespace lathe::optim {

class SGD : public Optimizer {
 public:
  explicit SGD(const nlohmann::json& defaults = {});
  SGD(const std::vector<Tensor>& params, const nlohmann::json& options = {});
  std::string kind() const override { return "sgd"; }

  static const StateSchema schema;

 protected:
  void validate_options(nlohmann::json& options) const override;
  void update() override;
};

}  // namespace lathe::optim
