// CudaBackend: rotary position embeddings (cuda/rope.cu).
//
// The op layer (core/ops/nn_rope.cpp) has checked every operand: x and out [B, H, T, D] with unit
// last strides, cos and sin [T, D/2] contiguous in x's compute type.
#include "cuda/cuda_backend.h"

namespace lathe::cuda {

void CudaBackend::rope(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  RopeShape sh{x.size(0), x.size(1), x.size(2), x.size(3), {}, {}};
  for (int d = 0; d < 3; ++d) {
    sh.x_strides[d] = x.strides()[size_t(d)];
    sh.out_strides[d] = out.strides()[size_t(d)];
  }
  launch_rope(dt_of(x.dtype()), x.data_ptr(), cos.data_ptr(), sin.data_ptr(), inverse, out.data_ptr(), sh,
              ctx.stream);
}

}  // namespace lathe::cuda
