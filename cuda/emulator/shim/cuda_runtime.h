#pragma once
// Emulator stand-in (see cuda/emulator/run.sh).
#include "cuda_runtime_api.h"
