#include "optim/adam.h"

#include "core/ops.h"
#include "core/error.h"

namespace lathe::optim {

namespace {
OptionList<AdamOptions> make_options(bool decoupled) {
  using O = AdamOptions;
  return {{number("lr", &O::lr, 1e-3, learning_rate()),
           number_pair("betas", &O::beta1, &O::beta2, {0.9, 0.999}, beta("beta parameter at index 0 (betas[0])"),
                       beta("beta parameter at index 1 (betas[1])")),
           number("eps", &O::eps, 1e-8, above_zero("epsilon value eps")),
           number("weight_decay", &O::weight_decay, decoupled ? 1e-2 : 0.0, at_least_zero("weight_decay value")),
           flag("amsgrad", &O::amsgrad, false), flag("maximize", &O::maximize, false)},
          {}};
}

const OptionList<AdamOptions>& options_of(bool decoupled) {
  static const OptionList<AdamOptions> adam = make_options(false), adamw = make_options(true);
  return decoupled ? adamw : adam;
}

AdamParams adam_params(const AdamOptions& o, bool decoupled) {
  AdamParams a;
  a.lr = o.lr;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  a.weight_decay = o.weight_decay;
  a.decoupled_weight_decay = decoupled;
  a.amsgrad = o.amsgrad;
  a.maximize = o.maximize;
  return a;
}
}  // namespace

Adam::Adam(bool decoupled, const nlohmann::json& defaults, bool fused)
    : TypedOptimizer(decoupled ? "adamw" : "adam", options_of(decoupled), defaults, fused), decoupled_(decoupled) {}

Adam::Adam(const nlohmann::json& defaults, bool fused) : Adam(false, defaults, fused) {}

Adam::Adam(const std::vector<Tensor>& params, const nlohmann::json& options, bool fused) : Adam(false, options, fused) {
  add_param_group(params);
}

AdamW::AdamW(const nlohmann::json& defaults, bool fused) : Adam(true, defaults, fused) {}

AdamW::AdamW(const std::vector<Tensor>& params, const nlohmann::json& options, bool fused) : Adam(true, options, fused) {
  add_param_group(params);
}

void Adam::update() {
  if (fused()) update_fused();
  else update_plain();
}

void Adam::update_plain() {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    const AdamParams a = adam_params(options(gi), decoupled_);
    for (size_t j = 0; j < g.params.size(); ++j) {
      const Tensor& p = g.params[j];
      if (!participates(p)) continue;
      const int64_t i = g.indices[j];
      Tensor grad = p.grad().contiguous();
      Tensor& exp_avg = exp_avg_.of(i);
      Tensor& exp_avg_sq = exp_avg_sq_.of(i);
      Tensor max_sq = a.amsgrad ? max_exp_avg_sq_.of(i) : Tensor();
      float& count = step_.host(i);
      count += 1.0f;
      adam_update(p, grad, exp_avg, exp_avg_sq, max_sq, double(count), a);
    }
  }
}

void Adam::update_fused() {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    const AdamParams a = adam_params(options(gi), decoupled_);
    struct Batch {
      std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, copies;
    };
    std::vector<std::pair<Device, Batch>> batches;  // in order of first appearance
    for (size_t j = 0; j < g.params.size(); ++j) {
      const Tensor& p = g.params[j];
      if (!participates(p)) continue;
      const int64_t i = g.indices[j];
      Batch* b = nullptr;
      for (auto& [d, bb] : batches)
        if (d == p.device()) b = &bb;
      if (!b) b = &batches.emplace_back(p.device(), Batch{}).second;
      b->params.push_back(p);
      b->grads.push_back(p.grad().contiguous());
      b->exp_avgs.push_back(exp_avg_.of(i));
      b->exp_avg_sqs.push_back(exp_avg_sq_.of(i));
      if (a.amsgrad) b->max_sqs.push_back(max_exp_avg_sq_.of(i));
      b->steps.push_back(step_.of(i));
      b->copies.push_back(copies_ && p.dtype() == DType::f32 ? copies_->fresh_copy(p) : Tensor());
    }
    for (auto& [d, b] : batches) {
      adam_update_multi(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, b.max_sqs, b.steps, a, b.copies);
      for (size_t k = 0; k < b.params.size(); ++k)
        if (b.copies[k].defined()) copies_->updated(b.params[k], b.copies[k]);
    }
  }
}

}  // namespace lathe::optim
