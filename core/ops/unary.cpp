// Elementwise unary ops, each with its backward beside it.
#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

namespace {
// Checks that the op table defines `op` for x's dtype and runs the kernel on the detached input.
Tensor unary_kernel(UnaryOp op, const Tensor& x, double p0 = 0, double p1 = 0) {
  check_op_dtype(op_name(op), op_dtypes(op), x);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) backend_for(x.device()).unary(op, x.detach(), out, p0, p1);
  return out;
}

// A backward rule of the op table, one elementwise pass: gx = rule(saved, g).
Tensor backward_kernel(BinaryOp rule, const Tensor& saved, const Tensor& g) {
  Tensor gx = Tensor::empty(g.shape(), g.dtype(), g.device());
  if (gx.numel() > 0) backend_for(g.device()).binary(rule, saved, g, gx);
  return gx;
}
}  // namespace

Tensor neg(const Tensor& x) {
  return record("neg", unary_kernel(UnaryOp::neg, x), {x},
                [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor exp(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::exp, x);
  return record("exp", y, {x}, [y = y.detach()](const Tensor& g) { return std::vector<Tensor>{mul(g, y)}; });
}

Tensor log(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::log, x);
  return record("log", y, {x}, [x = x.detach()](const Tensor& g) { return std::vector<Tensor>{div(g, x)}; });
}

Tensor sqrt(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::sqrt, x);
  return record("sqrt", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{div(g, mul(y, 2.0))};
  });
}

Tensor rsqrt(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::rsqrt, x);
  // d/dx x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
  return record("rsqrt", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, mul(pow(y, 3.0), -0.5))};
  });
}

Tensor tanh(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::tanh, x);
  return record("tanh", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{backward_kernel(BinaryOp::tanh_backward, y, g)};
  });
}

Tensor gelu(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::gelu, x);
  return record("gelu", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{backward_kernel(BinaryOp::gelu_backward, x, g)};
  });
}

Tensor gelu_erf(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::gelu_erf, x);
  return record("gelu_erf", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{backward_kernel(BinaryOp::gelu_erf_backward, x, g)};
  });
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::sigmoid, x);
  return record("sigmoid", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{backward_kernel(BinaryOp::sigmoid_backward, y, g)};
  });
}

Tensor log_sigmoid(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::log_sigmoid, x);
  return record("log_sigmoid", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{backward_kernel(BinaryOp::log_sigmoid_backward, x, g)};
  });
}

Tensor silu(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::silu, x);
  return record("silu", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{backward_kernel(BinaryOp::silu_backward, x, g)};
  });
}

Tensor relu(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::relu, x);
  return record("relu", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{backward_kernel(BinaryOp::relu_backward, x, g)};
  });
}

Tensor squared_relu(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::squared_relu, x);
  return record("squared_relu", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{backward_kernel(BinaryOp::squared_relu_backward, x, g)};
  });
}

Tensor softcap(const Tensor& x, double cap) {
  LATHE_CHECK(cap > 0 && std::isfinite(cap), "softcap: the cap must be positive and finite, got ", cap);
  Tensor y = unary_kernel(UnaryOp::softcap, x, cap);
  // d/dx cap tanh(x / cap) = 1 - tanh(x / cap)^2, and tanh(x / cap) = y / cap: tanh's rule on y / cap.
  return record("softcap", y, {x}, [y = y.detach(), cap](const Tensor& g) {
    return std::vector<Tensor>{backward_kernel(BinaryOp::tanh_backward, mul(y, 1.0 / cap), g)};
  });
}

Tensor abs(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::abs, x);
  return record("abs", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, unary_kernel(UnaryOp::sign, x))};
  });
}

Tensor square(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::square, x);
  return record("square", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, mul(x, 2.0))};
  });
}

Tensor pow(const Tensor& x, double p) {
  Tensor y = unary_kernel(UnaryOp::pow_scalar, x, p);
  return record("pow", y, {x}, [x = x.detach(), p](const Tensor& g) {
    // x^0 is constant: its gradient is 0 even at x == 0, where p x^(p-1) would be 0 * inf.
    if (p == 0.0) return std::vector<Tensor>{Tensor::zeros(g.shape(), g.dtype(), g.device())};
    return std::vector<Tensor>{mul(g, mul(pow(x, p - 1.0), p))};
  });
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor y = unary_kernel(UnaryOp::clamp, x, lo.value_or(nan), hi.value_or(nan));
  // The gradient passes where x lies inside [lo, hi] (bounds included, as PyTorch).
  return record("clamp", y, {x}, [x = x.detach(), lo, hi](const Tensor& g) {
    Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
    Tensor gx = g;
    if (lo) gx = where(ge(x, Tensor::scalar(*lo, x.dtype(), x.device())), gx, zero);
    if (hi) gx = where(le(x, Tensor::scalar(*hi, x.dtype(), x.device())), gx, zero);
    return std::vector<Tensor>{gx};
  });
}

}  // namespace lathe
