// Rotary position embeddings, forward and backward side by side; the kernels are the backend's
// (core/cpu/rope.cpp, cuda/rope.cu).
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

Tensor rope(const Tensor& x_in, const Tensor& cos, const Tensor& sin) {
  check_same_device("rope", {x_in, cos, sin});
  check_floating("rope", x_in);
  LATHE_CHECK(x_in.dim() == 4 && x_in.size(3) % 2 == 0, "rope: x ", x_in.desc(),
              " must be [B, H, T, head_size] with an even head_size");
  const int64_t B = x_in.size(0), H = x_in.size(1), T = x_in.size(2), D = x_in.size(3);
  const DType table = x_in.dtype() == DType::f64 ? DType::f64 : DType::f32;
  for (const auto& [t, what] : {std::pair{cos, "cos"}, std::pair{sin, "sin"}}) {
    LATHE_CHECK(t.shape() == Shape({T, D / 2}), "rope: ", what, " ", t.desc(), " must be [T, head_size / 2] = [", T,
                ", ", D / 2, "] for x ", x_in.desc());
    LATHE_CHECK(t.dtype() == table, "rope: ", what, " ", t.desc(), " must be ", dtype_name(table), " for x ",
                x_in.desc(), " (the angles in its compute type)");
  }
  // The kernels read rows with a unit last stride; any other layout is copied once.
  const Tensor x = x_in.strides().back() == 1 ? x_in.detach() : x_in.detach().contiguous();
  const Tensor c = cos.detach().contiguous(), s = sin.detach().contiguous();
  Backend& backend = backend_for(x.device());

  // Written as [B, T, H, D], so that the caller's transpose back to heads side by side is free.
  Tensor out = Tensor::empty({B, T, H, D}, x.dtype(), x.device()).transpose(1, 2);
  if (out.numel() > 0) backend.rope(x, c, s, /*inverse=*/false, out);

  // A rotation's transpose is its inverse: the gradient turns back by the same angles.
  return record("rope", out, {x_in}, [c, s, B, H, T, D](const Tensor& g) {
    const Tensor gu = g.strides().back() == 1 ? g : g.contiguous();
    Tensor gx = Tensor::empty({B, T, H, D}, g.dtype(), g.device()).transpose(1, 2);
    if (gx.numel() > 0) backend_for(g.device()).rope(gu, c, s, /*inverse=*/true, gx);
    return std::vector<Tensor>{gx};
  });
}

}  // namespace lathe
