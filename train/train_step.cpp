#include "train/train_step.h"

#include <vector>

#include "core/autograd.h"
#include "optim/clip.h"

namespace lathe::train {

namespace {
// The model's cast cache as the optimizer writes it: the fused AdamW rounds each updated weight
// into a new copy, and the next forward reads it as the copy of that version.
class CastCacheCopies : public optim::ParamCopies {
 public:
  explicit CastCacheCopies(nn::WeightCastCache& cache) : cache_(cache) {}
  Tensor fresh_copy(const Tensor& p) override { return cache_.fresh_copy(p); }
  void updated(const Tensor& p, const Tensor& copy) override { cache_.put(p, copy); }

 private:
  nn::WeightCastCache& cache_;
};
}  // namespace

std::unique_ptr<optim::ParamCopies> connect_weight_copies(nn::GPT& model, optim::Optimizer& opt) {
  auto copies = std::make_unique<CastCacheCopies>(model.precision_policy().weight_cache());
  opt.set_param_copies(copies.get());
  return copies;
}

Tensor batch_slice(const Tensor& t, int64_t part, int64_t parts) {
  if (parts == 1) return t;
  const int64_t rows = t.shape()[0] / parts;
  return t.narrow(0, part * rows, rows).contiguous();
}

StepOutcome train_step(nn::GPT& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y, double grad_clip,
                       std::optional<double> lr, optim::GradScaler* scaler, StepSync* sync, int64_t slices) {
  StepOutcome r;
  if (scaler) r.scale = scaler->get_scale();
  for (int64_t k = 0; k < slices; ++k) {
    // The loss alone: the logits' memory becomes their gradient (the fused classifier).
    const Tensor loss = model.loss(batch_slice(x, k, slices), batch_slice(y, k, slices));
    // Only the last backward pass leaves final gradients for the sync to reduce.
    if (sync && k == slices - 1) sync->before_backward();
    if (scaler) scaler->scale(loss).backward();
    else loss.backward();
    r.losses.push_back(loss);
  }
  if (sync) sync->after_backward();
  if (scaler) {
    scaler->unscale_(opt);  // before clipping, so that the norm is the true one
    r.skipped = scaler->found_inf();
  }
  // Clipped on the device: the norm and the scale never visit the host.
  if (grad_clip > 0 && !r.skipped) r.grad_norm = optim::clip_grad_norm(model.parameters(), grad_clip);
  if (lr) opt.set_lr_all(*lr);
  if (scaler) {
    scaler->step(opt);
    scaler->update();
  } else {
    opt.step();
  }
  if (sync) sync->after_update();
  opt.zero_grad();
  return r;  // nothing read: the loss and the norm stay on the device until the caller reads them
}

double StepOutcome::loss() const {
  double sum = 0;
  for (const Tensor& l : losses) sum += l.item();
  return sum / double(losses.size());
}

}  // namespace lathe::train
