// Emulator stand-in for the toolkit's cuda_fp16.h (cuda/emulator/README.md): f16 with the same
// round-to-nearest-even, and the conversions kernels use (the arithmetic intrinsics, the same
// for both 16-bit types, are emu_half.h's).
#pragma once

#include "emu_half.h"

using __half = emu::Float16<Eigen::half>;
using __half2 = emu::Pair16<__half>;

inline float __half2float(__half v) { return float(v); }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half(float(d)); }
inline unsigned short __half_as_ushort(__half v) { return v.__x; }
inline __half __ushort_as_half(unsigned short b) { return __half::from_bits(b); }
inline short __half_as_short(__half v) { return short(v.__x); }
inline __half __short_as_half(short b) { return __half::from_bits((unsigned short)b); }

inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return {__half(a), __half(a)}; }
inline __half2 __float22half2_rn(float2 f) { return {__half(f.x), __half(f.y)}; }
inline float2 __half22float2(__half2 v) { return {float(v.x), float(v.y)}; }
inline float __low2float(__half2 v) { return float(v.x); }
inline float __high2float(__half2 v) { return float(v.y); }
inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }
inline __half __low2half(__half2 v) { return v.x; }
inline __half __high2half(__half2 v) { return v.y; }
