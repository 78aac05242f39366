// The emulator's 16-bit float types (cuda/emulator/README.md): __nv_bfloat16 and __half as
// cuda_bf16.h and cuda_fp16.h declare them (the bits in __x), converted to and from f32 with
// round-to-nearest-even by Eigen's bfloat16 and half, which lathe's CPU backend uses too.
// Arithmetic on them goes through f32 and rounds once, as the toolkit's operators do.
#pragma once

#include "emu_core.h"

namespace emu {

template <class Eigen16>
struct Float16 {
  unsigned short __x;
  Float16() = default;
  Float16(float f) : __x(Eigen::numext::bit_cast<unsigned short>(Eigen16(f))) {}
  Float16(double d) : Float16(float(d)) {}
  template <class I>
    requires std::is_integral_v<I>
  Float16(I v) : Float16(float(v)) {}
  operator float() const { return float(Eigen::numext::bit_cast<Eigen16>(__x)); }
  static Float16 from_bits(unsigned short b) {
    Float16 r;
    r.__x = b;
    return r;
  }
  Float16& operator+=(Float16 o) { return *this = Float16(float(*this) + float(o)); }
  Float16& operator-=(Float16 o) { return *this = Float16(float(*this) - float(o)); }
  Float16& operator*=(Float16 o) { return *this = Float16(float(*this) * float(o)); }
  Float16& operator/=(Float16 o) { return *this = Float16(float(*this) / float(o)); }
  friend Float16 operator+(Float16 a, Float16 b) { return Float16(float(a) + float(b)); }
  friend Float16 operator-(Float16 a, Float16 b) { return Float16(float(a) - float(b)); }
  friend Float16 operator*(Float16 a, Float16 b) { return Float16(float(a) * float(b)); }
  friend Float16 operator/(Float16 a, Float16 b) { return Float16(float(a) / float(b)); }
  friend Float16 operator-(Float16 a) { return from_bits(static_cast<unsigned short>(a.__x ^ 0x8000u)); }
  friend bool operator==(Float16 a, Float16 b) { return float(a) == float(b); }
  friend bool operator!=(Float16 a, Float16 b) { return float(a) != float(b); }
  friend bool operator<(Float16 a, Float16 b) { return float(a) < float(b); }
  friend bool operator<=(Float16 a, Float16 b) { return float(a) <= float(b); }
  friend bool operator>(Float16 a, Float16 b) { return float(a) > float(b); }
  friend bool operator>=(Float16 a, Float16 b) { return float(a) >= float(b); }

  // The toolkit's arithmetic intrinsics, which cuda_fp16.h and cuda_bf16.h declare alike for
  // __half and __nv_bfloat16: written once, found through their arguments (hidden friends).
  friend Float16 __hadd(Float16 a, Float16 b) { return a + b; }
  friend Float16 __hsub(Float16 a, Float16 b) { return a - b; }
  friend Float16 __hmul(Float16 a, Float16 b) { return a * b; }
  friend Float16 __hdiv(Float16 a, Float16 b) { return a / b; }
  friend Float16 __hfma(Float16 a, Float16 b, Float16 c) { return Float16(std::fma(float(a), float(b), float(c))); }
  friend Float16 __hmax(Float16 a, Float16 b) { return Float16(std::fmax(float(a), float(b))); }
  friend Float16 __hmin(Float16 a, Float16 b) { return Float16(std::fmin(float(a), float(b))); }
};

// A pair, as __nv_bfloat162 and __half2 hold two values in 32 bits.
template <class T>
struct alignas(4) Pair16 {
  T x, y;
};

}  // namespace emu

// The conversions that cuda_fp16.h and cuda_bf16.h declare alike for their type T and pair P,
// under the toolkit's names, which differ only in the type's infix: S ("half", "bfloat16") and
// S2 ("half2", "bfloat162"). __half2float is __##S##2float, __floats2bfloat162_rn is
// __floats2##S2##_rn, and so on; __low2float and __high2float are overloads on P.
#define EMU_16BIT_CONVERSIONS(T, P, S, S2)                                                           \
  inline float __##S##2float(T v) { return float(v); }                                               \
  inline T __float2##S(float f) { return T(f); }                                                     \
  inline T __float2##S##_rn(float f) { return T(f); }                                                \
  inline T __double2##S(double d) { return T(float(d)); }                                            \
  inline unsigned short __##S##_as_ushort(T v) { return v.__x; }                                     \
  inline T __ushort_as_##S(unsigned short b) { return T::from_bits(b); }                             \
  inline short __##S##_as_short(T v) { return short(v.__x); }                                        \
  inline T __short_as_##S(short b) { return T::from_bits((unsigned short)b); }                       \
  inline P __floats2##S2##_rn(float a, float b) { return {T(a), T(b)}; }                             \
  inline P __float2##S2##_rn(float a) { return {T(a), T(a)}; }                                       \
  inline P __float22##S2##_rn(float2 f) { return {T(f.x), T(f.y)}; }                                 \
  inline float2 __##S2##2float2(P v) { return {float(v.x), float(v.y)}; }                            \
  inline float __low2float(P v) { return float(v.x); }                                               \
  inline float __high2float(P v) { return float(v.y); }                                              \
  inline P __halves2##S2(T a, T b) { return {a, b}; }                                                \
  inline T __low2##S(P v) { return v.x; }                                                            \
  inline T __high2##S(P v) { return v.y; }
