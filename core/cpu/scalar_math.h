// The scalar definitions of lathe's elementwise functions: one place that says what gelu or
// sigmoid means, shared by the CPU kernels (and mirrored by the CUDA ones).
#pragma once

#include <cmath>

namespace lathe::math {

// GPT-2's GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class T>
inline T gelu(T x) {
  const T k = T(0.7978845608028654);  // sqrt(2 / pi)
  const T c = T(0.044715);
  return T(0.5) * x * (T(1) + std::tanh(k * (x + c * x * x * x)));
}

template <class T>
inline T gelu_backward(T x, T g) {
  const T k = T(0.7978845608028654);
  const T c = T(0.044715);
  T u = k * (x + c * x * x * x);
  T th = std::tanh(u);
  T sech2 = T(1) - th * th;
  T du = k * (T(1) + T(3) * c * x * x);
  return g * (T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * du);
}

template <class T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

}  // namespace lathe::math
