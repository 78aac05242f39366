// The scalar definitions of lathe's elementwise functions: one place that says what gelu or
// sigmoid means, shared by the CPU kernels (and mirrored by the CUDA ones).
#pragma once

#include <cmath>
#include <type_traits>

#include "core/cpu/row_math.h"

namespace lathe::math {

// f32 takes the vectorisable tanh of row_math.h; f64 (gradchecks) keeps the library's.
template <class T>
LATHE_CPU_INLINE T tanh_of(T x) {
  if constexpr (std::is_same_v<T, float>) return cpu::tanh_f32(x);
  else return std::tanh(x);
}

// GPT-2's GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class T>
LATHE_CPU_INLINE T gelu(T x) {
  const T k = T(0.7978845608028654);  // sqrt(2 / pi)
  const T c = T(0.044715);
  return T(0.5) * x * (T(1) + tanh_of(k * (x + c * x * x * x)));
}

template <class T>
LATHE_CPU_INLINE T gelu_backward(T x, T g) {
  const T k = T(0.7978845608028654);
  const T c = T(0.044715);
  T u = k * (x + c * x * x * x);
  T th = tanh_of(u);
  T sech2 = T(1) - th * th;
  T du = k * (T(1) + T(3) * c * x * x);
  return g * (T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * du);
}

template <class T>
LATHE_CPU_INLINE T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

}  // namespace lathe::math
