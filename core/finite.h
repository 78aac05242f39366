// Whether a tensor's values are all finite: what a run checks before it saves weights, and what
// `lathe convert` checks before it writes a model another program will load.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace lathe {

// The flat index (in row-major order) of the first NaN or infinity of `t`, or -1 when there is
// none (integer tensors never hold one). Reads a host copy in f32 or f64, one pass; any device.
int64_t first_non_finite(const Tensor& t);

}  // namespace lathe
