// Adam and AdamW, following PyTorch's single-tensor (foreach=False) step exactly; defaults are
// PyTorch's: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0 (Adam) / 1e-2 (AdamW),
// amsgrad false, maximize false.
//
// State (PyTorch keys): per parameter exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only) with the
// parameter; `step` (f32, one value) on the host in the plain path, so the update never reads the
// device for it, and with the parameter in the fused path, where the multi-tensor kernel
// increments and reads it on the device.
//
// Fused mode runs one multi-tensor kernel per (group, device) over every parameter with a
// gradient; on the CPU it gives the same bits as the plain path. It also writes the 16-bit copies
// of the parameters that a mixed-precision forward reads (Optimizer::set_param_copies), rounded
// from the values it just stored, so that the next forward casts no weight.
#pragma once

#include "optim/optimizer.h"

namespace lathe::optim {

// Hyperparameters of one group; JSON (PyTorch) names in adam.cpp's option list. "betas" is
// (beta1, beta2).
struct AdamOptions {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize;
};

class Adam : public TypedOptimizer<AdamOptions> {
 public:
  // Without parameters: add them with add_param_group. `defaults` override PyTorch's.
  explicit Adam(const nlohmann::json& defaults = {}, bool fused = false);
  Adam(const std::vector<Tensor>& params, const nlohmann::json& options = {}, bool fused = false);
  std::string kind() const override { return decoupled_ ? "adamw" : "adam"; }

 protected:
  Adam(bool decoupled, const nlohmann::json& defaults, bool fused);
  void update() override;

 private:
  void update_plain();
  void update_fused();
  bool decoupled_;

  ParamState<> exp_avg_{*this, "exp_avg"};
  ParamState<> exp_avg_sq_{*this, "exp_avg_sq"};
  ParamState<> max_exp_avg_sq_{*this, "max_exp_avg_sq"};
  // Read by the host every plain step (it sets the bias corrections), so it lives there; the fused
  // kernel increments it on the device instead and never syncs.
  ParamScalar<float, Placement::host, Placement::with_param> step_{*this, "step"};
};

class AdamW : public Adam {
 public:
  explicit AdamW(const nlohmann::json& defaults = {}, bool fused = false);
  AdamW(const std::vector<Tensor>& params, const nlohmann::json& options = {}, bool fused = false);
};

}  // namespace lathe::optim
