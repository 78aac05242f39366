#include "train/train_step.h"

#include "core/autograd.h"
#include "optim/clip.h"

namespace lathe::app {

StepOutcome train_step(nn::GPT& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y, double grad_clip,
                       std::optional<double> lr, optim::GradScaler* scaler, StepSync* sync) {
  StepOutcome r;
  nn::GPTOutput out = model.forward(x, y);
  if (sync) sync->before_backward();
  if (scaler) {
    r.scale = scaler->get_scale();
    scaler->scale(out.loss).backward();
    if (sync) sync->after_backward();
    scaler->unscale_(opt);  // before clipping, so that the norm is the true one
    r.skipped = scaler->found_inf();
  } else {
    out.loss.backward();
    if (sync) sync->after_backward();
  }
  if (grad_clip > 0 && !r.skipped) r.grad_norm = optim::clip_grad_norm(model.parameters(), grad_clip).item();
  if (lr) opt.set_lr_all(*lr);
  if (scaler) {
    scaler->step(opt);
    scaler->update();
  } else {
    opt.step();
  }
  if (sync) sync->after_update();
  opt.zero_grad();
  // Read after the update, so that on a GPU the host does not wait for the forward pass before
  // queueing the backward pass and the update.
  r.loss = out.loss.item();
  return r;
}

}  // namespace lathe::app
