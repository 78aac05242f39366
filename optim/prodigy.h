// Prodigy (Mishchenko & Defazio), following the reference implementation facebookresearch/prodigy
// (prodigyopt 1.0) step for step. Defaults are the reference's: lr 1.0, betas (0.9, 0.999),
// beta3 null (= sqrt(beta2)), eps 1e-8, weight_decay 0, decouple true, use_bias_correction false,
// safeguard_warmup false, d0 1e-6, d_coef 1.0, growth_rate null (= infinity; JSON has no inf, so
// null or the string "inf" stand for it), slice_p 1.
//
// The rule of the reference holds: every group's lr is either the largest lr or 0, else step()
// throws naming the lrs. Optimizer-wide values (betas, beta3, d_coef, growth_rate, decouple,
// use_bias_correction) are read from group 0, as the reference does.
//
// State. Per parameter (PyTorch keys): s and p0 (the parameter sliced every slice_p elements; p0
// is a scalar 0 when the parameter was all zeros), exp_avg (when beta1 > 0), exp_avg_sq, all with
// the parameter, and step (i64, on the host). Per group, in f64: d, d0, d_max, d_numerator,
// d_denom, d_hat, k. As in the reference, every group's d and d_max start at the optimizer's own
// d0 (the constructor's option), and a group's d0 (which defaults to it) only enters d / d0. The host reads d
// every step (it scales each update), so these live on the host. lathe's Prodigy has only this
// plain path (no fused or capturable step), so no other policy is declared.
#pragma once

#include "optim/optimizer.h"

namespace lathe::optim {

// Hyperparameters of one group; JSON names (the reference's) in prodigy.cpp's option list. "betas"
// is (beta1, beta2); beta3 absent means sqrt(beta2); growth_rate may be infinity.
struct ProdigyOptions {
  double lr, beta1, beta2;
  std::optional<double> beta3;
  double eps, weight_decay;
  bool decouple, use_bias_correction, safeguard_warmup;
  double d0, d_coef, growth_rate;
  int64_t slice_p;
};

class Prodigy : public TypedOptimizer<ProdigyOptions> {
 public:
  explicit Prodigy(const nlohmann::json& defaults = {});
  Prodigy(const std::vector<Tensor>& params, const nlohmann::json& options = {});
  std::string kind() const override { return "prodigy"; }

  // A group's scalar state as doubles ({"d": ..., "k": ...}).
  nlohmann::json group_scalars(size_t group) const;
  // d's estimate sums over every parameter of a group: no parameter's update is its own.
  bool reads_all_state() const override { return true; }

 protected:
  void init_group_state(size_t group) override;
  void update() override;

 private:
  ParamState<> s_{*this, "s", ParamShape::own};
  ParamState<> p0_{*this, "p0", ParamShape::own};
  ParamState<> exp_avg_{*this, "exp_avg"};
  ParamState<> exp_avg_sq_{*this, "exp_avg_sq"};
  // Steps this parameter took part in, as the reference's per-parameter int; read by nothing but
  // checkpoints and reference cases, so it stays on the host.
  ParamScalar<int64_t, Placement::host> step_{*this, "step"};
  using GroupScalar = HostScalar<double, StateScope::group>;
  GroupScalar d_{*this, "d"}, d0_{*this, "d0"}, d_max_{*this, "d_max"}, d_numerator_{*this, "d_numerator"},
      d_denom_{*this, "d_denom"}, d_hat_{*this, "d_hat"}, k_{*this, "k"};
};

}  // namespace lathe::optim
