// How much memory this machine has: what lathe checks a model's size against before it allocates
// one (nn/gpt.h, train/model_config.h), so that an absurd size is an error naming it, not minutes of
// swapping or an uncaught std::bad_alloc.
#pragma once

#include <cstdint>

namespace lathe {

// Physical memory of the machine in bytes (sysconf); the largest int64 when the system does not say.
int64_t physical_memory_bytes();

}  // namespace lathe
