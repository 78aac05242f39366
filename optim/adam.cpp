#include "optim/adam.h"

#include <map>

#include "core/backend.h"
#include "core/error.h"

namespace lathe::optim {

const StateSchema Adam::schema = {
    param_state("exp_avg", Placement::with_param),
    param_state("exp_avg_sq", Placement::with_param),
    param_state("max_exp_avg_sq", Placement::with_param),
    // Read by the host every plain step (it sets the bias corrections), so it lives there; the
    // fused kernel increments it on the device instead and never syncs.
    param_state("step", Placement::host, DType::f32, /*fused:*/ Placement::with_param, /*shaped_like_param=*/false),
};

namespace {
nlohmann::json adam_defaults(bool decoupled, const nlohmann::json& overrides) {
  nlohmann::json d = {{"lr", 1e-3},          {"betas", {0.9, 0.999}}, {"eps", 1e-8},
                      {"weight_decay", decoupled ? 1e-2 : 0.0}, {"amsgrad", false}, {"maximize", false}};
  const char* name = decoupled ? "adamw" : "adam";
  if (!overrides.is_null()) {
    LATHE_CHECK(overrides.is_object(), name, ": defaults must be a JSON object, got ", overrides.dump());
    for (auto it = overrides.begin(); it != overrides.end(); ++it) {
      LATHE_CHECK(d.contains(it.key()), name, ": unknown option \"", it.key(), "\"");
      d[it.key()] = it.value();
    }
  }
  return d;
}
}  // namespace

Adam::Adam(bool decoupled, const nlohmann::json& defaults, bool fused)
    : Optimizer(adam_defaults(decoupled, defaults), schema, fused), decoupled_(decoupled) {
  nlohmann::json check = adam_defaults(decoupled, defaults);
  validate_options(check);
}

Adam::Adam(const nlohmann::json& defaults, bool fused) : Adam(false, defaults, fused) {}

Adam::Adam(const std::vector<Tensor>& params, const nlohmann::json& options, bool fused) : Adam(false, options, fused) {
  add_param_group(params);
}

AdamW::AdamW(const nlohmann::json& defaults, bool fused) : Adam(true, defaults, fused) {}

AdamW::AdamW(const std::vector<Tensor>& params, const nlohmann::json& options, bool fused) : Adam(true, options, fused) {
  add_param_group(params);
}

void Adam::validate_options(nlohmann::json& o) const {
  const std::string k = kind();
  ParamGroup g;
  g.options = o;
  check_lr(k.c_str(), g.number("lr"));
  auto [b1, b2] = g.pair("betas");
  check_beta(k.c_str(), "beta parameter at index 0 (betas[0])", b1);
  check_beta(k.c_str(), "beta parameter at index 1 (betas[1])", b2);
  double eps = g.number("eps");
  LATHE_CHECK(eps > 0, k, ": invalid epsilon value eps = ", eps, " (must be > 0)");
  check_nonnegative(k.c_str(), "weight_decay value", g.number("weight_decay"));
  g.flag("amsgrad");
  g.flag("maximize");
}

namespace {
AdamParams adam_params(const ParamGroup& g, bool decoupled) {
  AdamParams a;
  a.lr = g.number("lr");
  std::tie(a.beta1, a.beta2) = g.pair("betas");
  a.eps = g.number("eps");
  a.weight_decay = g.number("weight_decay");
  a.decoupled_weight_decay = decoupled;
  a.amsgrad = g.flag("amsgrad");
  a.maximize = g.flag("maximize");
  return a;
}
}  // namespace

void Adam::update() {
  if (fused()) update_fused();
  else update_plain();
}

void Adam::update_plain() {
  for (const ParamGroup& g : groups_) {
    const AdamParams a = adam_params(g, decoupled_);
    for (size_t j = 0; j < g.params.size(); ++j) {
      const Tensor& p = g.params[j];
      if (!participates(p)) continue;
      const int64_t i = g.indices[j];
      Tensor grad = p.grad().contiguous();
      Tensor& exp_avg = state_or_zeros(i, "exp_avg");
      Tensor& exp_avg_sq = state_or_zeros(i, "exp_avg_sq");
      Tensor max_sq = a.amsgrad ? state_or_zeros(i, "max_exp_avg_sq") : Tensor();
      Tensor& step = state_or_zeros(i, "step");
      // Host policy: this is host memory whatever the parameter's device.
      float& count = step.data<float>()[0];
      count += 1.0f;
      backend_for(p.device()).adam_update(p, grad, exp_avg, exp_avg_sq, max_sq, double(count), a);
    }
  }
}

void Adam::update_fused() {
  for (const ParamGroup& g : groups_) {
    const AdamParams a = adam_params(g, decoupled_);
    struct Batch {
      std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps;
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
      b->exp_avgs.push_back(state_or_zeros(i, "exp_avg"));
      b->exp_avg_sqs.push_back(state_or_zeros(i, "exp_avg_sq"));
      if (a.amsgrad) b->max_sqs.push_back(state_or_zeros(i, "max_exp_avg_sq"));
      b->steps.push_back(state_or_zeros(i, "step"));
    }
    for (auto& [d, b] : batches)
      backend_for(d).adam_update_multi(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, b.max_sqs, b.steps, a);
  }
}

}  // namespace lathe::optim
