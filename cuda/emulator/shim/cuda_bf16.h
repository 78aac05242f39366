// Emulator stand-in for the toolkit's cuda_bf16.h (cuda/emulator/README.md): bf16 with the same
// round-to-nearest-even, and the conversions kernels use (the arithmetic intrinsics, the same
// for both 16-bit types, are emu_half.h's).
#pragma once

#include "emu_half.h"

using __nv_bfloat16 = emu::Float16<Eigen::bfloat16>;
using __nv_bfloat162 = emu::Pair16<__nv_bfloat16>;

inline float __bfloat162float(__nv_bfloat16 v) { return float(v); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(float(d)); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 v) { return v.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { return __nv_bfloat16::from_bits(b); }
inline short __bfloat16_as_short(__nv_bfloat16 v) { return short(v.__x); }
inline __nv_bfloat16 __short_as_bfloat16(short b) { return __nv_bfloat16::from_bits((unsigned short)b); }

inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__nv_bfloat16(a), __nv_bfloat16(b)}; }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return {__nv_bfloat16(a), __nv_bfloat16(a)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return {__nv_bfloat16(f.x), __nv_bfloat16(f.y)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return {float(v.x), float(v.y)}; }
inline float __low2float(__nv_bfloat162 v) { return float(v.x); }
inline float __high2float(__nv_bfloat162 v) { return float(v.y); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return {a, b}; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 v) { return v.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 v) { return v.y; }
