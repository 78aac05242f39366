#include "optim/grad_scaler.h"

#include <cmath>

#include "core/autograd.h"
#include "core/error.h"
#include "core/ops.h"

namespace lathe::optim {

GradScaler::GradScaler(GradScalerOptions o) : options_(o) {
  LATHE_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0 && std::isfinite(float(o.init_scale)),
              "GradScaler: invalid init_scale = ", o.init_scale, " (must be > 0 and within f32's range)");
  LATHE_CHECK(o.growth_factor > 1.0, "GradScaler: invalid growth_factor = ", o.growth_factor, " (must be > 1)");
  LATHE_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1.0, "GradScaler: invalid backoff_factor = ",
              o.backoff_factor, " (must be in (0, 1))");
  LATHE_CHECK(o.growth_interval >= 1, "GradScaler: invalid growth_interval = ", o.growth_interval, " (must be >= 1)");
  scale_.reset(float(o.init_scale));
  growth_tracker_.reset(0);
}

GradScaler::GradScaler(const GradScaler& other) : options_(other.options_) { *this = other; }

GradScaler& GradScaler::operator=(const GradScaler& other) {
  if (this == &other) return *this;
  options_ = other.options_;
  scale_.reset(other.scale_.value());
  growth_tracker_.reset(other.growth_tracker_.value());
  unscaled_ = other.unscaled_;
  found_inf_any_ = other.found_inf_any_;
  return *this;
}

double GradScaler::get_scale() const { return options_.enabled ? double(scale_.value()) : 1.0; }
int64_t GradScaler::growth_tracker() const { return growth_tracker_.value(); }

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  return mul(loss, double(scale_.value()));
}

bool GradScaler::unscale_(const std::vector<Tensor>& params) {
  if (!options_.enabled) return false;
  NoGradGuard no_grad;
  // As torch: inv_scale = (1 / scale computed in double) rounded to f32.
  const double inv_scale = double(float(1.0 / double(scale_.value())));
  // Any inf or nan makes g * 0 nan; one sum per device, one read per device.
  std::vector<std::pair<Device, Tensor>> acc;
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    Tensor g = p.grad();
    Tensor probe = sum(mul(g, 0.0)).to(DType::f32);
    bool found = false;
    for (auto& [d, t] : acc)
      if (d == g.device()) t = add(t, probe), found = true;
    if (!found) acc.emplace_back(g.device(), probe);
    g.copy_(mul(g, inv_scale));
  }
  bool inf = false;
  for (auto& [d, t] : acc) inf = inf || !std::isfinite(t.item());
  return inf;
}

void GradScaler::unscale_(Optimizer& opt) {
  if (!options_.enabled) return;
  LATHE_CHECK(!unscaled_.count(&opt), "GradScaler: unscale_() was already called on this optimizer since the "
              "last update()");
  std::vector<Tensor> ps;
  for (int64_t i = 0; i < int64_t(opt.num_params()); ++i) ps.push_back(opt.param(i));
  bool inf = unscale_(ps);
  unscaled_[&opt] = inf;
  found_inf_any_ = found_inf_any_ || inf;
}

bool GradScaler::step(Optimizer& opt) {
  if (!options_.enabled) {
    opt.step();
    return true;
  }
  if (!unscaled_.count(&opt)) unscale_(opt);
  if (unscaled_[&opt]) return false;
  opt.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  float& scale = scale_.value();
  int32_t& tracker = growth_tracker_.value();
  if (found_inf_any_) {
    scale = float(double(scale) * options_.backoff_factor);
    tracker = 0;
  } else {
    tracker += 1;
    if (tracker == options_.growth_interval) {
      scale = float(double(scale) * options_.growth_factor);
      tracker = 0;
    }
  }
  unscaled_.clear();
  found_inf_any_ = false;
}

// Names are "scaler.<key>", in declaration order (scale, then growth_tracker).
std::vector<StateEntry> GradScaler::state_entries() const {
  std::vector<StateEntry> out;
  for (const StateSlot* s : state_.declared_slots())
    out.push_back(StateEntry{"scaler." + s->key(), StateScope::global, -1, s->key(), s->placement(false),
                             s->dtype_for(DType::f32), s->get(-1)});
  return out;
}

void GradScaler::load_state(const std::map<std::string, StateSource>& sources) {
  // Validate everything first, so that a bad entry changes nothing.
  std::vector<std::pair<StateSlot*, Tensor>> loaded;
  for (const auto& [name, src] : sources) {
    StateSlot* slot = name.rfind("scaler.", 0) == 0 ? state_.declared(StateScope::global, name.substr(7)) : nullptr;
    LATHE_CHECK(slot != nullptr, "GradScaler: unknown state \"", name,
                "\" (expected scaler.scale or scaler.growth_tracker)");
    Tensor t;
    if (const auto* tt = std::get_if<Tensor>(&src.value)) {
      LATHE_CHECK(tt->defined(), "GradScaler: state \"", name, "\" is an undefined tensor");
      t = tt->to(Device::cpu());
    } else {
      const auto& hb = std::get<HostBytes>(src.value);
      t = Tensor::from_bytes(hb.data, hb.shape, hb.dtype);
    }
    LATHE_CHECK(t.numel() == 1, "GradScaler: state \"", name, "\" must hold one value, got ", t.desc());
    // Host policy: the value is created in host memory, in the slot's dtype, owning its storage.
    loaded.emplace_back(slot, t.to(slot->dtype_for(DType::f32)).reshape({}).clone());
  }
  for (const auto& [slot, t] : loaded)
    if (slot == &scale_)
      LATHE_CHECK(std::isfinite(t.data<float>()[0]) && t.data<float>()[0] > 0, "GradScaler: loaded scale ",
                  t.data<float>()[0], " is not a positive finite number");
  for (auto& [slot, t] : loaded) slot->at(-1) = t;
}

}  // namespace lathe::optim
