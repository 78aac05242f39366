// Emulator stand-in for the toolkit's cuda_bf16.h (cuda/emulator/README.md): bf16 with the same
// round-to-nearest-even, and the conversions kernels use (emu_half.h writes them, and the
// arithmetic intrinsics, once for both 16-bit types).
#pragma once

#include "emu_half.h"

using __nv_bfloat16 = emu::Float16<Eigen::bfloat16>;
using __nv_bfloat162 = emu::Pair16<__nv_bfloat16>;

EMU_16BIT_CONVERSIONS(__nv_bfloat16, __nv_bfloat162, bfloat16, bfloat162)
