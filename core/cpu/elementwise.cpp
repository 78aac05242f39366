// CPU elementwise kernels: unary, binary (operands already broadcast), where.
//
// Each op becomes a lambda instantiated per dtype; the strided loop hands it contiguous runs,
// where the plain `for` vectorises.
#include <cmath>
#include <limits>

#include "core/cpu/loops.h"
#include "core/cpu/scalar_math.h"

namespace lathe {

using cpu::elementwise_loop;

namespace {

// Runs out[i] = f(x[i]) over a strided input, contiguous output.
template <class TO, class TI, class F>
void map1(const Tensor& x, const Tensor& out, F f) {
  std::array<const Strides*, 2> st{&out.strides(), &x.strides()};
  std::array<char*, 2> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(x.data_ptr())};
  std::array<int64_t, 2> elem{sizeof(TO), sizeof(TI)};
  // flatten: `f` must inline into the loops (a call per element stops vectorisation, and GCC's
  // inliner gives up on some of these lambdas in a function this large).
  elementwise_loop<2>(out.shape(), st, base, elem,
                      [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n)
                          __attribute__((flatten)) {
    TO* o = reinterpret_cast<TO*>(p[0]);
    const TI* a = reinterpret_cast<const TI*>(p[1]);
    if (s[0] == 1 && s[1] == 1) {
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<TO>(f(cpu::load(a + k)));
    } else {
      for (int64_t k = 0; k < n; ++k) o[k * s[0]] = static_cast<TO>(f(cpu::load(a + k * s[1])));
    }
  });
}

template <class TO, class TI, class F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  std::array<const Strides*, 3> st{&out.strides(), &a.strides(), &b.strides()};
  std::array<char*, 3> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()),
                            static_cast<char*>(b.data_ptr())};
  std::array<int64_t, 3> elem{sizeof(TO), sizeof(TI), sizeof(TI)};
  elementwise_loop<3>(out.shape(), st, base, elem,
                      [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n)
                          __attribute__((flatten)) {  // as in map1
    TO* o = reinterpret_cast<TO*>(p[0]);
    const TI* x = reinterpret_cast<const TI*>(p[1]);
    const TI* y = reinterpret_cast<const TI*>(p[2]);
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<TO>(f(cpu::load(x + k), cpu::load(y + k)));
    } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {  // tensor op scalar
      auto yv = cpu::load(y);
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<TO>(f(cpu::load(x + k), yv));
    } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {  // scalar op tensor
      auto xv = cpu::load(x);
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<TO>(f(xv, cpu::load(y + k)));
    } else {
      for (int64_t k = 0; k < n; ++k)
        o[k * s[0]] = static_cast<TO>(f(cpu::load(x + k * s[1]), cpu::load(y + k * s[2])));
    }
  });
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  LATHE_CHECK(x.dtype() == out.dtype(), "unary ", unary_op_name(op), ": dtypes differ");
  LATHE_DISPATCH_ALL(x.dtype(), unary_op_name(op), [&]<class T>() {
    using C = typename compute_type<T>::type;
    const C a = static_cast<C>(p0), b = static_cast<C>(p1);
    switch (op) {
      case UnaryOp::neg: return map1<T, T>(x, out, [](C v) { return C(-v); });
      case UnaryOp::abs: return map1<T, T>(x, out, [](C v) { return v < C(0) ? C(-v) : v; });
      case UnaryOp::square: return map1<T, T>(x, out, [](C v) { return C(v * v); });
      case UnaryOp::sign:
        return map1<T, T>(x, out, [](C v) { return C((C(0) < v) - (v < C(0))); });
      case UnaryOp::relu: return map1<T, T>(x, out, [](C v) { return v > C(0) ? v : C(0); });
      case UnaryOp::affine: return map1<T, T>(x, out, [a, b](C v) { return C(v * a + b); });
      case UnaryOp::clamp: {
        const bool has_lo = !std::isnan(p0), has_hi = !std::isnan(p1);
        return map1<T, T>(x, out, [=](C v) {
          if (has_lo && v < a) v = a;
          if (has_hi && v > b) v = b;
          return v;
        });
      }
      default: break;
    }
    if constexpr (std::is_floating_point_v<C>) {
      switch (op) {
        case UnaryOp::exp: return map1<T, T>(x, out, [](C v) { return std::exp(v); });
        case UnaryOp::log: return map1<T, T>(x, out, [](C v) { return std::log(v); });
        case UnaryOp::sqrt: return map1<T, T>(x, out, [](C v) { return std::sqrt(v); });
        case UnaryOp::rsqrt: return map1<T, T>(x, out, [](C v) { return C(1) / std::sqrt(v); });
        case UnaryOp::tanh: return map1<T, T>(x, out, [](C v) { return math::tanh_of(v); });
        case UnaryOp::gelu: return map1<T, T>(x, out, [](C v) { return math::gelu(v); });
        case UnaryOp::sigmoid: return map1<T, T>(x, out, [](C v) { return math::sigmoid(v); });
        case UnaryOp::reciprocal: return map1<T, T>(x, out, [](C v) { return C(1) / v; });
        case UnaryOp::pow_scalar: return map1<T, T>(x, out, [a](C v) { return std::pow(v, a); });
        default: break;
      }
    }
    LATHE_FAIL("unary ", unary_op_name(op), ": not defined for dtype ", dtype_name(x.dtype()));
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  LATHE_CHECK(a.dtype() == b.dtype(), "binary ", binary_op_name(op), ": operand dtypes differ (",
              a.dtype(), ", ", b.dtype(), ")");
  const bool comparison = op >= BinaryOp::eq && op <= BinaryOp::ge;
  LATHE_CHECK(out.dtype() == (comparison ? DType::b8 : a.dtype()), "binary ", binary_op_name(op),
              ": output dtype ", out.dtype(), " does not match");
  LATHE_DISPATCH_ALL(a.dtype(), binary_op_name(op), [&]<class T>() {
    using C = typename compute_type<T>::type;
    switch (op) {
      case BinaryOp::add: return map2<T, T>(a, b, out, [](C x, C y) { return C(x + y); });
      case BinaryOp::sub: return map2<T, T>(a, b, out, [](C x, C y) { return C(x - y); });
      case BinaryOp::mul: return map2<T, T>(a, b, out, [](C x, C y) { return C(x * y); });
      case BinaryOp::maximum:
        return map2<T, T>(a, b, out, [](C x, C y) { return (x != x || x > y) ? x : y; });
      case BinaryOp::minimum:
        return map2<T, T>(a, b, out, [](C x, C y) { return (x != x || x < y) ? x : y; });
      case BinaryOp::eq: return map2<bool, T>(a, b, out, [](C x, C y) { return x == y; });
      case BinaryOp::ne: return map2<bool, T>(a, b, out, [](C x, C y) { return x != y; });
      case BinaryOp::lt: return map2<bool, T>(a, b, out, [](C x, C y) { return x < y; });
      case BinaryOp::le: return map2<bool, T>(a, b, out, [](C x, C y) { return x <= y; });
      case BinaryOp::gt: return map2<bool, T>(a, b, out, [](C x, C y) { return x > y; });
      case BinaryOp::ge: return map2<bool, T>(a, b, out, [](C x, C y) { return x >= y; });
      case BinaryOp::relu_backward:
        return map2<T, T>(a, b, out, [](C x, C g) { return x > C(0) ? g : C(0); });
      default: break;
    }
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
      if (op == BinaryOp::div) {
        // The op layer refuses zero divisors before calling (a throw cannot leave an OpenMP loop).
        return map2<T, T>(a, b, out, [](C x, C y) { return y == 0 ? C(0) : C(x / y); });
      }
    }
    if constexpr (std::is_floating_point_v<C>) {
      switch (op) {
        case BinaryOp::div: return map2<T, T>(a, b, out, [](C x, C y) { return x / y; });
        case BinaryOp::pow: return map2<T, T>(a, b, out, [](C x, C y) { return std::pow(x, y); });
        case BinaryOp::gelu_backward:
          return map2<T, T>(a, b, out, [](C x, C g) { return math::gelu_backward(x, g); });
        case BinaryOp::tanh_backward:
          return map2<T, T>(a, b, out, [](C y, C g) { return g * (C(1) - y * y); });
        case BinaryOp::sigmoid_backward:
          return map2<T, T>(a, b, out, [](C y, C g) { return g * y * (C(1) - y); });
        default: break;
      }
    }
    LATHE_FAIL("binary ", binary_op_name(op), ": not defined for dtype ", dtype_name(a.dtype()));
  });
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  LATHE_CHECK(cond.dtype() == DType::b8, "where: condition must be bool, got ", cond.desc());
  std::array<const Strides*, 4> st{&out.strides(), &cond.strides(), &a.strides(), &b.strides()};
  std::array<char*, 4> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(cond.data_ptr()),
                            static_cast<char*>(a.data_ptr()), static_cast<char*>(b.data_ptr())};
  LATHE_DISPATCH_ALL(out.dtype(), "where", [&]<class T>() {
    std::array<int64_t, 4> elem{sizeof(T), 1, sizeof(T), sizeof(T)};
    elementwise_loop<4>(out.shape(), st, base, elem,
                        [](const std::array<char*, 4>& p, const std::array<int64_t, 4>& s, int64_t n) {
      T* o = reinterpret_cast<T*>(p[0]);
      const bool* c = reinterpret_cast<const bool*>(p[1]);
      const T* x = reinterpret_cast<const T*>(p[2]);
      const T* y = reinterpret_cast<const T*>(p[3]);
      for (int64_t k = 0; k < n; ++k) o[k * s[0]] = c[k * s[1]] ? x[k * s[2]] : y[k * s[3]];
    });
  });
}

}  // namespace lathe
