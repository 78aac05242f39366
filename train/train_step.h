// One step of nanoGPT's training loop on one batch, shared by the Trainer (`lathe train`) and the
// reference case kind "train", so that what the golden case checks is what `lathe train` runs:
//
//   loss = model(x, y); loss.backward(); clip_grad_norm_(params, grad_clip) if grad_clip > 0
//   [set every group's lr]; optimizer.step(); optimizer.zero_grad(set_to_none=True)
//
// With a loss scaler (fp16 runs, torch.cuda.amp.GradScaler's recipe):
//
//   scaler.scale(loss).backward(); scaler.unscale_(optimizer)
//   clip_grad_norm_(params, grad_clip) unless a gradient held inf or nan
//   scaler.step(optimizer)   (skipped on inf or nan); scaler.update(); optimizer.zero_grad()
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "nn/gpt.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"

namespace lathe::train {

// What a step leaves. The loss and the gradient norm stay on the model's device: reading them
// waits for the step to finish, which the caller does when it needs the numbers (lathe train reads
// a step's while the next one runs on a GPU), so that the step itself never waits for the device.
struct StepOutcome {
  std::vector<Tensor> losses;  // each slice's loss, before the update (unscaled)
  Tensor grad_norm;            // global gradient norm before clipping; undefined when clipping is off or the step was skipped
  bool skipped = false;        // the scaler found inf or nan in the gradients: no update
  double scale = 1;            // the loss scale this step used (1 without a scaler)

  // The batch's loss: the mean of the slices' (reads the device).
  double loss() const;
  // The norm, or 0 without one (reads the device).
  double grad_norm_value() const { return grad_norm.defined() ? grad_norm.item() : 0.0; }
};

// What a data parallel run adds to a step (train/distributed/data_parallel.h), at the three points
// where it must happen; a single process has none.
class StepSync {
 public:
  virtual ~StepSync() = default;
  // Before loss.backward(): gradients may be reduced across processes as they become final.
  virtual void before_backward() = 0;
  // After loss.backward() and before anything reads a gradient (the scaler, the clipping): every
  // gradient is the mean over the processes.
  virtual void after_backward() = 0;
  // After the update (taken or skipped): every process holds the same updated parameters.
  virtual void after_update() = 0;
};

// Slice `part` of `parts` equal blocks of rows of a batch tensor (the rows divide evenly), as its
// own contiguous tensor; the whole tensor when parts is 1. A rank's share of the global batch and
// a step's --grad-slices are both cut with it.
Tensor batch_slice(const Tensor& t, int64_t part, int64_t parts);

// Lets `opt`'s fused update write the 16-bit weight copies that `model`'s mixed-precision forward
// reads (nn/precision.h's cast cache; optim::ParamCopies): after its first step, a step casts no
// weight. The returned connection must outlive the optimizer's steps.
std::unique_ptr<optim::ParamCopies> connect_weight_copies(nn::GPT& model, optim::Optimizer& opt);

// `lr`: the LR every group takes for this step (a schedule's); none keeps the groups' own.
// `scaler`: the loss scaler of an fp16 run, or null. `sync`: a data parallel run's, or null.
// `slices`: the batch's rows are cut into this many equal slices, each run forward and backward on
// its own, their gradients summed in slice order (autograd's accumulation) and the loss reported
// as the mean of the slices' losses; the sync scales the summed gradients (see
// train/distributed/data_parallel.h). It is how one process reproduces the reduction order of a
// data parallel run bitwise (docs/design.md, "Data parallelism").
StepOutcome train_step(nn::GPT& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y, double grad_clip,
                       std::optional<double> lr = std::nullopt, optim::GradScaler* scaler = nullptr,
                       StepSync* sync = nullptr, int64_t slices = 1);

}  // namespace lathe::train
