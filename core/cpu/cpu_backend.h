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
  std::string name() const override;

  Allocator& allocator(int index) override;
  int device_count() const override;
  void copy_to_host(void* dst, const void* src, size_t nbytes, int index) override;
  void copy_from_host(void* dst, const void* src, size_t nbytes, int index) override;
  void synchronize(int index) override {}

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
  // Attention in every float dtype and head size (core/cpu/attention.cpp).
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
  DeviceType type_;
  std::vector<std::unique_ptr<HostAllocator>> allocators_;
};

// Elements per parallel chunk for elementwise loops: below this, one thread does the work.
constexpr int64_t kParallelGrain = 32768;

}  // namespace lathe
