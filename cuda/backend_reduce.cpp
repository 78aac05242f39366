// CudaBackend: reductions over any set of dims (cuda/reduce.cu).
#include <algorithm>

#include "cuda/cuda_backend.h"

namespace lathe::cuda {

// Same layouts as the CPU backend: the reduced dims trailing (rows) or leading (columns) in a
// contiguous tensor are reduced in place; anything else is permuted to rows by a copy first.
void CudaBackend::reduce(ReduceOp op, const Tensor& x_in, const std::vector<int64_t>& dims, const Tensor& out) {
  LATHE_CHECK(x_in.dtype() != DType::b8, "reduce: bool tensors must be cast first");
  LATHE_CHECK(out.is_contiguous(), "reduce kernel: output ", out.desc(), " must be contiguous");
  DeviceContext& ctx = context_of(out);
  const int64_t nd = x_in.dim();
  bool trailing = true, leading = true;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != nd - int64_t(dims.size()) + int64_t(i)) trailing = false;
    if (dims[i] != int64_t(i)) leading = false;
  }
  int64_t R = 1;
  for (int64_t d : dims) R *= x_in.shape()[size_t(d)];
  const int64_t K = out.numel();
  if (K == 0) return;

  Tensor x = x_in;
  if (!(x.is_contiguous() && (trailing || leading))) {
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < nd; ++i)
      if (!std::binary_search(dims.begin(), dims.end(), i)) perm.push_back(i);
    for (int64_t d : dims) perm.push_back(d);
    x = x_in.permute(perm).contiguous();
    trailing = true;
  }
  const DT dt = dt_of(x.dtype());
  const size_t scratch_bytes = reduce_scratch_bytes(op, dt, K, R, trailing, ctx.sm_count);
  Tensor scratch = scratch_bytes ? scratch_like(x, scratch_bytes) : Tensor();
  launch_reduce(op, dt, x.data_ptr(), K, R, trailing, out.data_ptr(), scratch.defined() ? scratch.data_ptr() : nullptr,
                ctx.sm_count, ctx.stream);
}

}  // namespace lathe::cuda
