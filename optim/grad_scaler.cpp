#include "optim/grad_scaler.h"

#include <cmath>

#include "core/autograd.h"
#include "core/error.h"
#include "core/ops.h"

namespace lathe::optim {

const StateSchema GradScaler::schema = {
    global_state("scale", Placement::host, DType::f32, /*fused:*/ Placement::with_group),
    global_state("growth_tracker", Placement::host, DType::i32, /*fused:*/ Placement::with_group),
};

GradScaler::GradScaler(GradScalerOptions o) : options_(o) {
  LATHE_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0, "GradScaler: invalid init_scale = ", o.init_scale,
              " (must be > 0)");
  LATHE_CHECK(o.growth_factor > 1.0, "GradScaler: invalid growth_factor = ", o.growth_factor, " (must be > 1)");
  LATHE_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1.0, "GradScaler: invalid backoff_factor = ",
              o.backoff_factor, " (must be in (0, 1))");
  LATHE_CHECK(o.growth_interval >= 1, "GradScaler: invalid growth_interval = ", o.growth_interval, " (must be >= 1)");
  scale_ = Tensor::scalar(o.init_scale, DType::f32);
  growth_tracker_ = Tensor::zeros({}, DType::i32);
}

double GradScaler::get_scale() const { return options_.enabled ? double(scale_.data<float>()[0]) : 1.0; }
int64_t GradScaler::growth_tracker() const { return growth_tracker_.data<int32_t>()[0]; }

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  return mul(loss, double(scale_.data<float>()[0]));
}

bool GradScaler::unscale_(const std::vector<Tensor>& params) {
  if (!options_.enabled) return false;
  NoGradGuard no_grad;
  // As torch: inv_scale = (1 / scale computed in double) rounded to f32.
  const double inv_scale = double(float(1.0 / double(scale_.data<float>()[0])));
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
  float& scale = scale_.data<float>()[0];
  int32_t& tracker = growth_tracker_.data<int32_t>()[0];
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

std::vector<StateEntry> GradScaler::state_entries() const {
  return {StateEntry{"scaler.scale", StateScope::global, -1, "scale", Placement::host, DType::f32, scale_},
          StateEntry{"scaler.growth_tracker", StateScope::global, -1, "growth_tracker", Placement::host, DType::i32,
                     growth_tracker_}};
}

void GradScaler::load_state(const std::map<std::string, StateSource>& sources) {
  Tensor scale = scale_, tracker = growth_tracker_;
  for (const auto& [name, src] : sources) {
    Tensor t;
    if (const auto* tt = std::get_if<Tensor>(&src.value)) {
      LATHE_CHECK(tt->defined(), "GradScaler: state \"", name, "\" is an undefined tensor");
      t = tt->to(Device::cpu());
    } else {
      const auto& hb = std::get<HostBytes>(src.value);
      t = Tensor::from_bytes(hb.data, hb.shape, hb.dtype);
    }
    LATHE_CHECK(t.numel() == 1, "GradScaler: state \"", name, "\" must hold one value, got ", t.desc());
    if (name == "scaler.scale") scale = t.to(DType::f32).reshape({}).clone();
    else if (name == "scaler.growth_tracker") tracker = t.to(DType::i32).reshape({}).clone();
    else LATHE_FAIL("GradScaler: unknown state \"", name, "\" (expected scaler.scale or scaler.growth_tracker)");
  }
  LATHE_CHECK(std::isfinite(scale.data<float>()[0]) && scale.data<float>()[0] > 0, "GradScaler: loaded scale ",
              scale.data<float>()[0], " is not a positive finite number");
  scale_ = scale;
  growth_tracker_ = tracker;
}

}  // namespace lathe::optim
