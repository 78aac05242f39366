// Ops that the nn layers are built from and that core does not have: each is one autograd node
// with its forward and backward side by side, because composing it from core ops would cost
// extra passes over memory (a transposed weight gradient, a separate bias pass).
#pragma once

#include "core/tensor.h"

namespace lathe::nn {

// y = x @ weight^T + bias, as torch.nn.functional.linear: x [..., in], weight [out, in], bias [out]
// or undefined -> [..., out]. The weight gradient comes out contiguous in weight's layout.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace lathe::nn
