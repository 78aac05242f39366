// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_ (norm_type 2).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace lathe::optim {

// Scales every defined gradient of `params` by min(1, max_norm / (total_norm + 1e-6)), where
// total_norm is the 2-norm of all gradients together, and returns total_norm as a one-element f32
// tensor on the first gradient's device (reading it is the caller's choice: it costs a sync on a
// device). Parameters without a gradient are skipped; with none at all the norm is 0.
Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace lathe::optim
