// What the two norm ops (nn_layer_norm.cpp, nn_rms_norm.cpp) share: their operand checks, and
// what they do with the residual stream they read: the branch a norm adds into the stream as it
// reads it, and the stream's gradient that its backward adds into its own.
#pragma once

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe::norm_residual {

// Checks a norm's parameter (weight or bias; undefined: none): [D] for x's last dim D, x's dtype.
inline void check_param(const char* op, const Tensor& x, const Tensor& p, const char* what) {
  if (!p.defined()) return;
  const int64_t D = x.shape().back();
  LATHE_CHECK(p.shape() == Shape{D}, op, ": ", what, " ", p.desc(), " does not match the last dim of ", x.desc(),
              " (expected [", D, "])");
  LATHE_CHECK(p.dtype() == x.dtype(), op, ": ", what, " ", p.desc(), " has another dtype than the input ", x.desc());
}

// The checks every norm makes of its input, eps and output dtype (x's, or 16 bits for an f32 x:
// the copy the next product reads); returns that dtype.
inline DType check_input(const char* op, const Tensor& x, double eps, std::optional<DType> out_dtype) {
  check_floating(op, x);
  LATHE_CHECK(x.dim() >= 1 && x.shape().back() > 0, op, ": input needs a non-empty last dim, got ", x.desc());
  LATHE_CHECK(eps >= 0, op, ": eps must be >= 0, got ", eps);
  const DType out_dt = out_dtype.value_or(x.dtype());
  LATHE_CHECK(out_dt == x.dtype() || (x.dtype() == DType::f32 && (out_dt == DType::bf16 || out_dt == DType::f16)),
              op, ": a ", dtype_name(out_dt), " output is for an f32 input (its 16-bit copy); got ", x.desc());
  return out_dt;
}

// Whether the norm kernels add `branch` themselves: x's shape, and x's dtype or 16 bits for an f32
// x (what add widens as it reads). Any other branch is added by add first.
inline bool fusable(const Tensor& x, const Tensor& branch) {
  const bool narrow = x.dtype() == DType::f32 && (branch.dtype() == DType::bf16 || branch.dtype() == DType::f16);
  return branch.shape() == x.shape() && (branch.dtype() == x.dtype() || narrow);
}

// `sum`, the kernel's x + branch, recorded as add records it: each input's gradient is the sum's,
// in the input's dtype.
inline Tensor record_add(Tensor sum, const Tensor& x, const Tensor& branch) {
  const bool nx = x.requires_grad(), nb = branch.requires_grad();
  return record("add", std::move(sum), {x, branch}, [tx = x.dtype(), tb = branch.dtype(), nx, nb](const Tensor& g) {
    return std::vector<Tensor>{nx ? g.to(tx) : Tensor(), nb ? g.to(tb) : Tensor()};
  });
}

// The gradient the stream already holds, as the backward kernels read it (undefined if none).
inline Tensor gathered_as(const Tensor& gathered, const Tensor& stream) {
  return gathered.defined() ? gathered.to(stream.dtype()).contiguous() : Tensor();
}

}  // namespace lathe::norm_residual
