// The CUDA backend: lathe::Backend for cuda:N devices. Registered with core during static
// initialisation (cuda_backend.cpp); touching no GPU until a cuda tensor is first made.
//
// Host code is split by kernel family, each file translating Tensors into the plain pointers,
// shapes and strides of kernels.h. A family has one stem everywhere: its CPU kernels in
// core/cpu/<stem>.cpp, its CUDA kernels in cuda/<stem>.cu, their host glue in backend_<stem>.cpp:
//   cuda_backend.cpp           memory, copies between host and device, synchronisation
//   backend_copy.cpp           copy, fill, arange, random numbers
//   backend_elementwise.cpp    unary, binary, where, scale_by
//   backend_reduce.cpp         sums, means, maxima over any dims
//   backend_matmul.cpp         cuBLAS batched products, linear layers through cuBLASLt's epilogues
//                              (no .cu of its own)
//   backend_norm.cpp           softmax, layer norm, RMSNorm
//   backend_rope.cpp           rotary position embeddings
//   backend_attention.cpp      fused causal attention (flash attention, forward and backward)
//   backend_tokens.cpp         embedding, cross-entropy, the fused classifier
//   backend_index.cpp          index_select, index_add, gather, scatter_add
//   backend_optim.cpp          Adam and AdamW
// Every kernel runs on the device's one stream; the host waits only in copy_to_host and
// synchronize. tests/test_cuda.cpp checks every kernel against the CPU backend: on a GPU through
// tools/gpu_check.sh, and without one through the CPU emulator of the kernels (cuda/emulator/,
// the ctest tests "emu:...").
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/backend.h"
#include "cuda/allocator.h"
#include "cuda/kernels.h"
#include "cuda/runtime.h"

namespace lathe::cuda {

class CudaBackend final : public Backend {
 public:
  // Every kernel of core/backend.h's list, in the files above by family.
  LATHE_BACKEND_KERNELS(LATHE_BACKEND_OVERRIDE)

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<CachingAllocator>> allocators_;
};

// ---- helpers shared by the backend_*.cpp files ----
DT dt_of(DType t);
// The context of t's device, made current.
DeviceContext& context_of(const Tensor& t);
// Scratch device memory of at least `bytes` on t's device, freed (stream-ordered) when the
// returned tensor dies.
Tensor scratch_like(const Tensor& t, size_t bytes);
// Iteration geometry of `shape` for N operands with the given strides, merged where every operand
// is contiguous across two dims; throws when more than kMaxDims dims remain.
template <int N>
Geometry<N> make_geometry(const Shape& shape, const std::array<const Strides*, N>& strides, const char* op);
}  // namespace lathe::cuda
