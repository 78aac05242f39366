// Emulator stand-in for the toolkit's cuda_fp16.h (cuda/emulator/README.md): f16 with the same
// round-to-nearest-even, and the conversions kernels use (emu_half.h writes them, and the
// arithmetic intrinsics, once for both 16-bit types).
#pragma once

#include "emu_half.h"

using __half = emu::Float16<Eigen::half>;
using __half2 = emu::Pair16<__half>;

EMU_16BIT_CONVERSIONS(__half, __half2, half, half2)
