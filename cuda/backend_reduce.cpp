// CudaBackend: reductions over any set of dims (cuda/reduce.cu).
#include "core/reduce_plan.h"
#include "cuda/cuda_backend.h"

namespace lathe::cuda {

// The layout is core/reduce_plan.h's, the CPU backend's: rows or columns where they lie, anything
// else permuted to rows by a copy first.
void CudaBackend::reduce(ReduceOp op, const Tensor& x_in, const std::vector<int64_t>& dims, const Tensor& out) {
  LATHE_CHECK(x_in.dtype() != DType::b8, "reduce: bool tensors must be cast first");
  LATHE_CHECK(out.is_contiguous(), "reduce kernel: output ", out.desc(), " must be contiguous");
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const ReducePlan plan = plan_reduce(x_in, dims);  // core/reduce_plan.h, as the CPU's
  const Tensor& x = plan.x;
  const int64_t R = plan.reduced, K = plan.outputs;
  const bool trailing = plan.trailing;
  const DT dt = dt_of(x.dtype());
  const size_t scratch_bytes = reduce_scratch_bytes(op, dt, K, R, trailing, ctx.sm_count);
  Tensor scratch = scratch_bytes ? scratch_like(x, scratch_bytes) : Tensor();
  launch_reduce(op, dt, x.data_ptr(), K, R, trailing, out.data_ptr(), scratch.defined() ? scratch.data_ptr() : nullptr,
                ctx.sm_count, ctx.stream);
}

}  // namespace lathe::cuda
