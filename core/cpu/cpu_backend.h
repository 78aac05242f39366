// The CPU backend: Eigen for matrix products, OpenMP across cores for large ops, templates over
// the element type so that inner loops have no dispatch. It serves `cpu` and the `sim` devices
// (host memory standing in for an accelerator's). Its kernels live in one file per family, under the
// stem the CUDA backend uses too (cuda/cuda_backend.h): copy.cpp, elementwise.cpp, reduce.cpp,
// matmul.cpp (products, linear layers), attention.cpp, norm.cpp (softmax, layer norm, RMSNorm),
// rope.cpp (rotary embeddings), tokens.cpp (embedding, cross-entropy, the fused classifier),
// index.cpp, optim.cpp.
//
// Determinism: work is split into chunks whose boundaries depend only on the problem size, never
// on the thread count, and partial results are combined in a fixed order. A run is bitwise
// reproducible for any thread count.
#pragma once

#include <array>
#include <memory>

#include "core/backend.h"

namespace lathe {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(DeviceType type);
  // Every kernel of core/backend.h's list. Attention is fused in every float dtype and head size
  // (core/cpu/attention.cpp).
  LATHE_BACKEND_KERNELS(LATHE_BACKEND_OVERRIDE)

 private:
  DeviceType type_;
  std::vector<std::unique_ptr<HostAllocator>> allocators_;
};

// Elements per parallel chunk for elementwise loops: below this, one thread does the work.
constexpr int64_t kParallelGrain = 32768;

}  // namespace lathe
