// Stochastic gradient descent with momentum, following PyTorch's single-tensor SGD step exactly.
// Defaults: lr 1e-3, momentum 0, dampening 0, weight_decay 0, nesterov false, maximize false.
// State (PyTorch key): momentum_buffer with the parameter, created from the first gradient seen
// (only when momentum != 0).
#pragma once

#include "optim/optimizer.h"

namespace lathe::optim {

// Hyperparameters of one group; JSON names (PyTorch's) in sgd.cpp's option list.
struct SGDOptions {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};

class SGD : public TypedOptimizer<SGDOptions> {
 public:
  explicit SGD(const nlohmann::json& defaults = {});
  SGD(const std::vector<Tensor>& params, const nlohmann::json& options = {});
  std::string kind() const override { return "sgd"; }

 protected:
  void update() override;

 private:
  ParamState<> momentum_buffer_{*this, "momentum_buffer"};
};

}  // namespace lathe::optim
