// Dynamic loss scaling for 16-bit training, with torch.cuda.amp.GradScaler's semantics and
// defaults: init_scale 65536, growth_factor 2, backoff_factor 0.5, growth_interval 2000.
//
//   Tensor loss = model(...); scaler.scale(loss).backward();
//   scaler.unscale_(opt);           // optional: before clipping
//   clip_grad_norm(params, 1.0);
//   scaler.step(opt);               // skipped when a gradient held inf or nan
//   scaler.update();                // backs off after an overflow, grows after growth_interval good steps
//
// Its state (scale f32, growth_tracker i32) is declared with the optimizers' slot types, as host
// scalars (the scale multiplies the loss as a host scalar, so it never costs a device read), and
// is exported like optimizer state, as "scaler.scale" and "scaler.growth_tracker".
#pragma once

#include <map>
#include <vector>

#include "optim/optimizer.h"
#include "optim/state.h"

namespace lathe::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});
  // Copies are independent scalers with the same options and state (the slots register with
  // their own owner, so the copy is spelled out).
  GradScaler(const GradScaler& other);
  GradScaler& operator=(const GradScaler& other);

  Tensor scale(const Tensor& loss) const;  // loss * scale (loss unchanged when disabled)
  // Divides the gradients by the scale and records whether any was inf or nan. Once per
  // optimizer between updates (a second call is an error, as in PyTorch).
  void unscale_(Optimizer& opt);
  // Same for a list of parameters that no optimizer holds (e.g. before clipping by hand).
  bool unscale_(const std::vector<Tensor>& params);  // returns found_inf
  // Unscales if not done yet, then steps unless an inf/nan was found. Returns whether it stepped.
  bool step(Optimizer& opt);
  // Adjusts the scale after the iteration's step(s) and forgets the per-optimizer records.
  void update();

  double get_scale() const;
  int64_t growth_tracker() const;
  bool found_inf() const { return found_inf_any_; }
  const GradScalerOptions& options() const { return options_; }

  // Checkpoint API: the two state tensors with their names and policy; load takes the same names.
  std::vector<StateEntry> state_entries() const;
  void load_state(const std::map<std::string, StateSource>& sources);

 private:
  GradScalerOptions options_;
  StateSet state_;
  HostScalar<float, StateScope::global> scale_{state_, "scale"};
  HostScalar<int32_t, StateScope::global> growth_tracker_{state_, "growth_tracker"};
  std::map<const Optimizer*, bool> unscaled_;  // optimizer -> found_inf
  bool found_inf_any_ = false;
};

}  // namespace lathe::optim
