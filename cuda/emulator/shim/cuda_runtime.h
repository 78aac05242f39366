#pragma once
// Emulator stand-in (see cuda/emulator/README.md).
#include "cuda_runtime_api.h"
