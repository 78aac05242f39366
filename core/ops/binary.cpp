// Elementwise binary ops with broadcasting, each with its backward beside it.
#include <cmath>

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

namespace {

// Checks devices, broadcasts shapes, promotes dtypes and runs the kernel on detached operands.
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_same_device(name, {a, b});
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  DType t = promote(a.dtype(), b.dtype());
  // Division is true division, as torch's `/`: integer (and bool) operands divide in f32.
  if (op == BinaryOp::div && !is_floating(t)) t = DType::f32;
  LATHE_CHECK(op_dtypes(op) != OpDTypes::floating || is_floating(t), name, ": not defined for dtype ",
              dtype_name(t));
  // An f32 tensor plus a 16-bit one (a 16-bit branch joining the f32 residual stream): the kernel
  // widens the 16-bit operand as it reads it, instead of a cast pass over it first.
  const auto is_16bit = [](DType d) { return d == DType::bf16 || d == DType::f16; };
  const bool b_narrow = a.dtype() == DType::f32 && is_16bit(b.dtype());
  if (op == BinaryOp::add && (b_narrow || (b.dtype() == DType::f32 && is_16bit(a.dtype())))) {
    Tensor wide = (b_narrow ? a : b).detach().expand(shape), narrow = (b_narrow ? b : a).detach().expand(shape);
    Tensor out = Tensor::empty(shape, t, a.device());
    if (out.numel() > 0) backend_for(out.device()).binary(op, wide, narrow, out);
    return out;
  }
  Tensor ad = a.detach().to(t).expand(shape);
  Tensor bd = b.detach().to(t).expand(shape);
  Tensor out = Tensor::empty(shape, is_predicate(op) ? DType::b8 : t, a.device());
  if (out.numel() > 0) backend_for(out.device()).binary(op, ad, bd, out);
  return out;
}

// Gradient for an input: summed over broadcast dims, cast back to the input's dtype.
Tensor reduce_grad(const Tensor& g, const Shape& shape, DType dtype) { return sum_to(g, shape).to(dtype); }
Tensor reduce_grad(const Tensor& g, const Tensor& like) { return reduce_grad(g, like.shape(), like.dtype()); }

// The scalar of a tensor-scalar op, in the tensor's dtype (a 16-bit float tensor rounds the scalar
// to 16 bits first, as torch 1.13 does on the CPU), or f32 when an integer tensor meets a fraction.
Tensor scalar_like(const Tensor& a, double v) {
  DType t = a.dtype();
  if (!is_floating(t) && (v != std::floor(v) || t == DType::b8)) t = DType::f32;
  return Tensor::scalar(v, t, a.device());
}

}  // namespace

// add's and sub's backward read their inputs' shapes and dtypes, not their data, which is not kept
// for them (a residual add would otherwise hold both branches of every block until the backward).
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::add, a, b);
  return record("add", out, {a, b}, [sa = a.shape(), ta = a.dtype(), sb = b.shape(), tb = b.dtype(),
                                     na = a.requires_grad(), nb = b.requires_grad()](const Tensor& g) {
    return std::vector<Tensor>{na ? reduce_grad(g, sa, ta) : Tensor(), nb ? reduce_grad(g, sb, tb) : Tensor()};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::sub, a, b);
  return record("sub", out, {a, b}, [sa = a.shape(), ta = a.dtype(), sb = b.shape(), tb = b.dtype(),
                                     na = a.requires_grad(), nb = b.requires_grad()](const Tensor& g) {
    return std::vector<Tensor>{na ? reduce_grad(g, sa, ta) : Tensor(), nb ? reduce_grad(neg(g), sb, tb) : Tensor()};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::mul, a, b);
  return record("mul", out, {a, b},
                [a = a.detach(), b = b.detach(), na = a.requires_grad(), nb = b.requires_grad()](const Tensor& g) {
    return std::vector<Tensor>{na ? reduce_grad(mul(g, b), a) : Tensor(),
                               nb ? reduce_grad(mul(g, a), b) : Tensor()};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::div, a, b);
  return record("div", out, {a, b},
                [a = a.detach(), b = b.detach(), na = a.requires_grad(), nb = b.requires_grad()](const Tensor& g) {
    Tensor ga = div(g, b);
    return std::vector<Tensor>{na ? reduce_grad(ga, a) : Tensor(), nb ? reduce_grad(neg(mul(ga, div(a, b))), b) : Tensor()};
  });
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryOp::pow, a, b);
  return record("pow", out, {a, b}, [a = a.detach(), b = b.detach(), y = out.detach(), na = a.requires_grad(),
                                     nb = b.requires_grad()](const Tensor& g) {
    // d/da a^b = b a^(b-1), 0 where b == 0 (not 0 * inf at a == 0);
    // d/db a^b = a^b log(a), 0 where a == 0 and b >= 0 (the limit), as PyTorch.
    Tensor zero = Tensor::scalar(0, y.dtype(), y.device());
    std::vector<Tensor> grads(2);
    if (na) grads[0] = reduce_grad(where(eq(b, zero), zero, mul(g, mul(b, pow(a, sub(b, 1.0))))), a);
    if (nb) {
      Tensor base_zero = mul(eq(a, zero), ge(b, zero));
      grads[1] = reduce_grad(where(base_zero, zero, mul(g, mul(y, log(a)))), b);
    }
    return grads;
  });
}

// maximum/minimum: the gradient goes to the larger (smaller) operand, split evenly on ties.
static Tensor extremum(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(op, a, b);
  return record(op_name(op), out, {a, b}, [op, a = a.detach(), b = b.detach(), na = a.requires_grad(),
                                                   nb = b.requires_grad()](const Tensor& g) {
    Tensor a_wins = (op == BinaryOp::maximum ? gt(a, b) : lt(a, b)).to(g.dtype());
    Tensor half_tie = mul(eq(a, b).to(g.dtype()), 0.5);
    std::vector<Tensor> grads(2);
    if (na) grads[0] = reduce_grad(mul(g, add(a_wins, half_tie)), a);
    if (nb) grads[1] = reduce_grad(mul(g, sub(sub(Tensor::ones({}, g.dtype(), g.device()), a_wins), half_tie)), b);
    return grads;
  });
}
Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::minimum, a, b); }

Tensor eq(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::ge, a, b); }

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }

}  // namespace lathe
