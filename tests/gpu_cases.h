// Test cases that need a GPU (cuda:0). Without one they are skipped, and ctest must say so rather
// than count them passed: GPU_CASE() prints kGpuSkipMarker and returns, and tests/CMakeLists.txt
// gives every discovered case SKIP_REGULAR_EXPRESSION on that marker, so ctest lists the case as
// "Skipped" with the reason in its output (ctest -V). On the GPU machine tools/gpu_check.sh sets
// LATHE_REQUIRE_GPU=1, which turns a skip into a failure.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "core/backend.h"
#include "core/error.h"

namespace lathe::testing {

// ctest's skip rule matches this text (tests/CMakeLists.txt); nothing else prints it.
inline const std::string kGpuSkipMarker = "gpu case skipped: ";

// Number of CUDA devices; -1 when this build has no CUDA backend.
inline int gpu_count() {
  if (!backend_available(DeviceType::cuda)) return -1;
  try {
    return backend_for(Device::cuda(0)).device_count();
  } catch (const Error&) {
    return 0;
  }
}

// True when cuda:0 exists; otherwise reports the skip (or, under LATHE_REQUIRE_GPU=1, fails).
inline bool gpu_or_skip() {
  const int n = gpu_count();
  if (n > 0) return true;
  const std::string why = n < 0 ? "no GPU: this build has no CUDA backend (configure with -DLATHE_CUDA=ON)"
                                : "no GPU: the CUDA backend is compiled in, but no device was found";
  const char* require = std::getenv("LATHE_REQUIRE_GPU");
  if (require != nullptr && require[0] == '1') FAIL_CHECK("LATHE_REQUIRE_GPU=1, but there is " << why);
  else MESSAGE(kGpuSkipMarker << why);
  return false;
}

}  // namespace lathe::testing

// The first statement of a case that needs a GPU.
#define GPU_CASE() \
  if (!::lathe::testing::gpu_or_skip()) return
