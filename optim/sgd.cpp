#include "optim/sgd.h"

#include "core/error.h"
#include "core/ops.h"

namespace lathe::optim {

namespace {
const OptionList<SGDOptions>& sgd_options() {
  using O = SGDOptions;
  static const OptionList<O> list = {
      {number("lr", &O::lr, 1e-3, learning_rate()),
       number("momentum", &O::momentum, 0.0, at_least_zero("momentum value")),
       number("dampening", &O::dampening, 0.0, at_least_zero("dampening value")),
       number("weight_decay", &O::weight_decay, 0.0, at_least_zero("weight_decay value")),
       flag("nesterov", &O::nesterov, false), flag("maximize", &O::maximize, false)},
      [](const O& o, const char* opt) {
        LATHE_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), opt,
                    ": nesterov momentum requires a momentum > 0 and zero dampening (got momentum = ", o.momentum,
                    ", dampening = ", o.dampening, ")");
      }};
  return list;
}
}  // namespace

SGD::SGD(const nlohmann::json& defaults) : TypedOptimizer("sgd", sgd_options(), defaults, /*fused=*/false) {}

SGD::SGD(const std::vector<Tensor>& params, const nlohmann::json& options) : SGD(options) { add_param_group(params); }

void SGD::update() {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    const SGDOptions& o = options(gi);
    for (size_t j = 0; j < g.params.size(); ++j) {
      Tensor p = g.params[j];
      if (!participates(p)) continue;
      const int64_t i = g.indices[j];
      Tensor d_p = o.maximize ? neg(p.grad()) : p.grad();
      if (o.weight_decay != 0) d_p = add(d_p, mul(p, o.weight_decay));
      if (o.momentum != 0) {
        if (Tensor* buf = momentum_buffer_.find(i)) {
          buf->copy_(add(mul(*buf, o.momentum), mul(d_p, 1 - o.dampening)));
          d_p = o.nesterov ? add(d_p, mul(*buf, o.momentum)) : *buf;
        } else {
          Tensor& fresh = momentum_buffer_.set(i, d_p);
          d_p = o.nesterov ? add(d_p, mul(fresh, o.momentum)) : fresh;
        }
      }
      p.copy_(add(p, mul(d_p, -o.lr)));
    }
  }
}

}  // namespace lathe::optim
