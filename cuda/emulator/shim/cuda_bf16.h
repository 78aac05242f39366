#pragma once
// Emulator stand-in (see cuda/emulator/run.sh): bf16 with the same round-to-nearest-even.
#include "emu_core.h"
struct __nv_bfloat16 {
  uint16_t x;
  __nv_bfloat16() = default;
};
inline float __bfloat162float(__nv_bfloat16 v) { return float(Eigen::numext::bit_cast<Eigen::bfloat16>(v.x)); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { __nv_bfloat16 r; r.x = Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(f)); return r; }
