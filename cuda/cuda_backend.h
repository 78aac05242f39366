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
  std::string name() const override { return "cuda"; }

  Allocator& allocator(int index) override;
  int device_count() const override { return gpu_count(); }
  void copy_to_host(void* dst, const void* src, size_t nbytes, int index) override;
  void copy_from_host(void* dst, const void* src, size_t nbytes, int index) override;
  void synchronize(int index) override;

  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& dst, double value) override;
  void arange(const Tensor& dst, double start, double step) override;
  void random_uniform(const Tensor& dst, uint64_t seed, uint64_t offset, double lo, double hi) override;
  void random_normal(const Tensor& dst, uint64_t seed, uint64_t offset, double mean, double std) override;

  void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void scale_by(const Tensor& x, const Tensor& s) override;

  void reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out) override;
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, LinearEpilogue epilogue, const Tensor& out,
              const Tensor& pre) override;
  void linear_backward_weight(const Tensor& g, const Tensor& x, const Tensor& gweight, const Tensor& gbias) override;

  void softmax(const Tensor& x, const Tensor& out, bool log) override;
  void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) override;
  bool fuses(FusedKernel kernel, DType dtype, int64_t width) const override;
  void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out,
                        const Tensor& lse) override;
  void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                 const Tensor& lse, const Tensor& gout, double scale, const Tensor& gq,
                                 const Tensor& gk, const Tensor& gv) override;
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  const Tensor& out, const Tensor& mean, const Tensor& rstd) override;
  void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                           const Tensor& rstd, const Tensor& gy, const Tensor& gx,
                           const Tensor& gweight, const Tensor& gbias) override;
  void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& out, const Tensor& rstd) override;
  void rms_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& gy, const Tensor& gx,
                         const Tensor& gweight) override;
  void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) override;
  void embedding(const Tensor& weight, const Tensor& idx, const Tensor& out) override;
  void embedding_backward(const Tensor& idx, const Tensor& gout, const Tensor& gweight) override;
  void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     const Tensor& losses) override;
  void cross_entropy_backward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                              const Tensor& gloss, const Tensor& glogits) override;
  void cross_entropy_fused(const Tensor& logits, const Tensor& targets, int64_t ignore_index, const Tensor& weight,
                           const Tensor& losses, const Tensor& glogits) override;

  void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) override;
  void index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) override;
  void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) override;
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) override;

  void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, double step,
                   const AdamParams& p) override;
  void adam_update_multi(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                         const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                         const AdamParams& p, const std::vector<Tensor>& copies) override;

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
