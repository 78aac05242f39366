#include "optim/prodigy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/ops.h"

namespace lathe::optim {

namespace {
const OptionList<ProdigyOptions>& prodigy_options() {
  using O = ProdigyOptions;
  static const OptionList<O> list = {
      {number("lr", &O::lr, 1.0, learning_rate()),
       number_pair("betas", &O::beta1, &O::beta2, {0.9, 0.999}, beta("beta parameter at index 0 (betas[0])"),
                   beta("beta parameter at index 1 (betas[1])")),
       optional_number("beta3", &O::beta3, beta("beta3")),
       number("eps", &O::eps, 1e-8, above_zero("epsilon value eps")),
       number("weight_decay", &O::weight_decay, 0.0, at_least_zero("weight_decay value")),
       flag("decouple", &O::decouple, true), flag("use_bias_correction", &O::use_bias_correction, false),
       flag("safeguard_warmup", &O::safeguard_warmup, false), number("d0", &O::d0, 1e-6, above_zero("d0")),
       number("d_coef", &O::d_coef, 1.0, above_zero("d_coef")),
       number_or_inf("growth_rate", &O::growth_rate, above_zero("growth_rate")),
       positive_integer("slice_p", &O::slice_p, 1)},
      {}};
  return list;
}
}  // namespace

Prodigy::Prodigy(const nlohmann::json& defaults)
    : TypedOptimizer("prodigy", prodigy_options(), defaults, /*fused=*/false) {}

Prodigy::Prodigy(const std::vector<Tensor>& params, const nlohmann::json& options) : Prodigy(options) {
  add_param_group(params);
}

void Prodigy::init_group_state(size_t g) {
  d_.reset(g, defaults().d0);
  d_max_.reset(g, defaults().d0);
  d0_.reset(g, options(g).d0);
  for (GroupScalar* zero : {&d_numerator_, &d_denom_, &d_hat_, &k_}) zero->reset(g, 0.0);
}

nlohmann::json Prodigy::group_scalars(size_t g) const {
  LATHE_CHECK(g < groups_.size(), "prodigy: group ", g, " does not exist (", groups_.size(), " groups)");
  nlohmann::json j = nlohmann::json::object();
  for (const GroupScalar* s : {&d_, &d0_, &d_max_, &d_numerator_, &d_denom_, &d_hat_})
    j[s->key()] = s->value(g);
  j[k_.key()] = int64_t(k_.value(g));
  return j;
}

void Prodigy::update() {
  // Optimizer-wide values come from group 0, as in the reference.
  const ProdigyOptions& o0 = options(0);
  const bool use_bias_correction = o0.use_bias_correction;
  const double beta1 = o0.beta1, beta2 = o0.beta2;
  const double beta3 = o0.beta3 ? *o0.beta3 : std::sqrt(beta2);
  const double k0 = k_.value(0);
  double d = d_.value(0);
  double d_max = d_max_.value(0);
  const double d_coef = o0.d_coef;
  double lr = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) lr = std::max(lr, options(gi).lr);
  const double bias_correction =
      use_bias_correction ? std::sqrt(1 - std::pow(beta2, k0 + 1)) / (1 - std::pow(beta1, k0 + 1)) : 1.0;
  const double dlr = d * lr * bias_correction;
  const double growth_rate = o0.growth_rate;
  const bool decouple = o0.decouple;

  // Every group's lr must be the largest or 0.
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const double glr = options(gi).lr;
    if (glr != lr && glr != 0.0) {
      std::string all;
      for (size_t gj = 0; gj < groups_.size(); ++gj) all += (all.empty() ? "" : ", ") + std::to_string(options(gj).lr);
      LATHE_FAIL("prodigy: param groups must share one lr, or have lr 0; group ", gi, " has lr ", glr,
                 " but the largest is ", lr, " (lrs: ", all, ")");
    }
  }

  double d_numerator = d_numerator_.value(0) * beta3;
  double d_denom = 0.0;
  // The gradient each parameter uses in both passes (coupled weight decay folded in).
  std::vector<std::vector<Tensor>> grads(groups_.size());
  double last_d0 = 0;

  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    const ProdigyOptions& o = options(gi);
    const double decay = o.weight_decay, group_lr = o.lr;
    const double d0 = d0_.value(gi);
    last_d0 = d0;
    const bool safeguard_warmup = o.safeguard_warmup;
    const int64_t slice_p = o.slice_p;
    grads[gi].resize(g.params.size());
    for (size_t j = 0; j < g.params.size(); ++j) {
      const Tensor& p = g.params[j];
      if (!participates(p)) continue;
      const int64_t i = g.indices[j];
      Tensor grad = p.grad();
      if (decay != 0 && !decouple) grad = add(grad, mul(p, decay));
      grads[gi][j] = grad;

      const Tensor p_flat = p.reshape({-1});
      const int64_t n = p_flat.numel();
      if (!exp_avg_sq_.find(i)) {
        const Tensor p_sliced = p_flat.slice(0, 0, n, slice_p);
        s_.set(i, Tensor::zeros(p_sliced.shape(), p.dtype(), p.device()));
        // An all-zero parameter keeps a scalar 0 as p0 (the reference's memory saving).
        const bool any = sum(abs(p_flat)).to(DType::f64).to(Device::cpu()).item() != 0;
        p0_.set(i, any ? p_sliced.clone() : Tensor::zeros({}, p.dtype(), p.device()));
        if (beta1 > 0) exp_avg_.of(i);
        exp_avg_sq_.of(i);
        step_.of(i);
      }
      if (group_lr > 0.0) {
        Tensor& s = *s_.find(i);
        const Tensor& p0 = *p0_.find(i);
        const Tensor sliced_grad = grad.reshape({-1}).slice(0, 0, n, slice_p);
        const Tensor p_sliced = p_flat.slice(0, 0, n, slice_p);
        const double dot = sum(mul(sliced_grad, sub(p0, p_sliced))).to(Device::cpu()).item();
        d_numerator += (d / d0) * dlr * dot;
        if (beta1 > 0) {
          Tensor& exp_avg = *exp_avg_.find(i);
          exp_avg.copy_(add(mul(exp_avg, beta1), mul(grad, d * (1 - beta1))));
        }
        Tensor& exp_avg_sq = *exp_avg_sq_.find(i);
        exp_avg_sq.copy_(add(mul(exp_avg_sq, beta2), mul(mul(grad, d * d * (1 - beta2)), grad)));
        const double alpha = safeguard_warmup ? (d / d0) * d : (d / d0) * dlr;
        s.copy_(add(mul(s, beta3), mul(sliced_grad, alpha)));
        d_denom += sum(abs(s)).to(Device::cpu()).item();
      }
    }
  }

  // No progress possible (no gradients, or all zero): the reference returns before changing
  // anything, group state included.
  if (d_denom == 0) return;

  double d_hat = d;
  if (lr > 0.0) {
    d_hat = d_coef * d_numerator / d_denom;
    if (d == last_d0) d = std::max(d, d_hat);
    d_max = std::max(d_max, d_hat);
    d = std::min(d_max, d * growth_rate);
  }

  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    d_numerator_.value(gi) = d_numerator;
    d_denom_.value(gi) = d_denom;
    d_.value(gi) = d;
    d_max_.value(gi) = d_max;
    d_hat_.value(gi) = d_hat;
    const double decay = options(gi).weight_decay, eps = options(gi).eps;
    for (size_t j = 0; j < g.params.size(); ++j) {
      Tensor p = g.params[j];
      if (!participates(p)) continue;
      const int64_t i = g.indices[j];
      step_.host(i) += 1;
      const Tensor& exp_avg_sq = *exp_avg_sq_.find(i);
      // The step size uses the old d (in dlr), the denominator the new d.
      const Tensor denom = add(sqrt(exp_avg_sq), d * eps);
      if (decay != 0 && decouple) p.copy_(add(p, mul(p, -decay * dlr)));
      if (beta1 > 0) p.copy_(add(p, div(mul(*exp_avg_.find(i), -dlr), denom)));
      else p.copy_(add(p, div(mul(grads[gi][j], -dlr * d), denom)));
    }
    k_.value(gi) += 1;
  }
}

}  // namespace lathe::optim
