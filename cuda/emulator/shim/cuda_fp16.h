#pragma once
// Emulator stand-in (see cuda/emulator/run.sh): f16 with the same round-to-nearest-even.
#include "emu_core.h"
struct __half {
  uint16_t x;
  __half() = default;
};
inline float __half2float(__half v) { return float(Eigen::numext::bit_cast<Eigen::half>(v.x)); }
inline __half __float2half_rn(float f) { __half r; r.x = Eigen::numext::bit_cast<uint16_t>(Eigen::half(f)); return r; }
