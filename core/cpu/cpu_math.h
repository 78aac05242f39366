// The math library the op table's formulas (core/op_table.h) use on the CPU. f32 exp and tanh are
// the vectorisable ones of row_math.h (glibc's expf and tanhf do not vectorise, and the activations
// of a training step spend most of their time in them); everything else is the standard library's.
// f64 keeps the library's exp and tanh, so gradchecks see no approximation.
#pragma once

#include <cmath>

#include "core/cpu/row_math.h"

namespace lathe::cpu {

struct CpuMath {
  static LATHE_CPU_INLINE float exp(float x) { return exp_f32(x); }
  static LATHE_CPU_INLINE double exp(double x) { return std::exp(x); }
  static LATHE_CPU_INLINE float log(float x) { return std::log(x); }
  static LATHE_CPU_INLINE double log(double x) { return std::log(x); }
  static LATHE_CPU_INLINE float log1p(float x) { return std::log1p(x); }
  static LATHE_CPU_INLINE double log1p(double x) { return std::log1p(x); }
  static LATHE_CPU_INLINE float sqrt(float x) { return std::sqrt(x); }
  static LATHE_CPU_INLINE double sqrt(double x) { return std::sqrt(x); }
  static LATHE_CPU_INLINE float tanh(float x) { return tanh_f32(x); }
  static LATHE_CPU_INLINE double tanh(double x) { return std::tanh(x); }
  static LATHE_CPU_INLINE float erf(float x) { return std::erf(x); }
  static LATHE_CPU_INLINE double erf(double x) { return std::erf(x); }
  static LATHE_CPU_INLINE float pow(float x, float y) { return std::pow(x, y); }
  static LATHE_CPU_INLINE double pow(double x, double y) { return std::pow(x, y); }
};

}  // namespace lathe::cpu
