#include "optim/sgd.h"

#include "core/error.h"
#include "core/ops.h"

namespace lathe::optim {

const StateSchema SGD::schema = {param_state("momentum_buffer", Placement::with_param)};

namespace {
nlohmann::json sgd_defaults(const nlohmann::json& overrides) {
  nlohmann::json d = {{"lr", 1e-3},         {"momentum", 0.0}, {"dampening", 0.0},
                      {"weight_decay", 0.0}, {"nesterov", false}, {"maximize", false}};
  nlohmann::json o = overrides;
  merge_defaults("sgd", o, d);
  return o;
}
}  // namespace

SGD::SGD(const nlohmann::json& defaults) : Optimizer(sgd_defaults(defaults), schema, /*fused=*/false) {
  nlohmann::json check = sgd_defaults(defaults);
  validate_options(check);
}

SGD::SGD(const std::vector<Tensor>& params, const nlohmann::json& options) : SGD(options) { add_param_group(params); }

void SGD::validate_options(nlohmann::json& o) const {
  ParamGroup g;
  g.options = o;
  check_lr("sgd", g.number("lr"));
  const double momentum = g.number("momentum"), dampening = g.number("dampening");
  check_nonnegative("sgd", "momentum value", momentum);
  check_nonnegative("sgd", "dampening value", dampening);
  check_nonnegative("sgd", "weight_decay value", g.number("weight_decay"));
  const bool nesterov = g.flag("nesterov");
  g.flag("maximize");
  LATHE_CHECK(!nesterov || (momentum > 0 && dampening == 0), "sgd: nesterov momentum requires a momentum > 0 and ",
              "zero dampening (got momentum = ", momentum, ", dampening = ", dampening, ")");
}

void SGD::update() {
  for (const ParamGroup& g : groups_) {
    const double lr = g.number("lr"), momentum = g.number("momentum"), dampening = g.number("dampening");
    const double wd = g.number("weight_decay");
    const bool nesterov = g.flag("nesterov"), maximize = g.flag("maximize");
    for (size_t j = 0; j < g.params.size(); ++j) {
      Tensor p = g.params[j];
      if (!participates(p)) continue;
      const int64_t i = g.indices[j];
      Tensor d_p = maximize ? neg(p.grad()) : p.grad();
      if (wd != 0) d_p = add(d_p, mul(p, wd));
      if (momentum != 0) {
        if (Tensor* buf = find_state(i, "momentum_buffer")) {
          buf->copy_(add(mul(*buf, momentum), mul(d_p, 1 - dampening)));
          d_p = nesterov ? add(d_p, mul(*buf, momentum)) : *buf;
        } else {
          Tensor& fresh = set_state(i, "momentum_buffer", d_p);
          d_p = nesterov ? add(d_p, mul(fresh, momentum)) : fresh;
        }
      }
      p.copy_(add(p, mul(d_p, -lr)));
    }
  }
}

}  // namespace lathe::optim
