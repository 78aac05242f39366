// Ops that the nn layers are built from and that core does not have: each is one autograd node
// with its forward and backward side by side, because composing it from core ops would cost
// extra passes over memory (a transposed weight gradient, a separate bias pass, a GELU pass).
#pragma once

#include "core/tensor.h"

namespace lathe::nn {

// A 16-bit product's copies of its f32 master parameters in the product's dtype (the precision
// policy's weight cast cache: once per step, nn/precision.h). An undefined copy is cast on the spot.
struct WeightCopies {
  Tensor weight, bias;
};

// y = x @ weight^T + bias, as torch.nn.functional.linear: x [..., in], weight [out, in], bias [out]
// or undefined -> [..., out]. The weight gradient comes out contiguous in weight's layout.
//
// x may be 16-bit while weight and bias are f32, the master parameters of a 16-bit run: the product
// reads their copies in x's dtype (`copies`), sums in f32, adds the bias in f32 and rounds once,
// and the gradients of weight and bias are f32 sums, never rounded to 16 bits.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const WeightCopies& copies = {});

// gelu(linear(x, weight, bias)) in one pass over the output (cuBLASLt's epilogue on CUDA): the GELU
// (tanh approximation) of the unrounded sum, rounded once; the rounded sum is kept for the backward.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                   const WeightCopies& copies = {});

}  // namespace lathe::nn
