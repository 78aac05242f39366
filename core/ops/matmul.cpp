// Matrix product as torch.matmul: batched, batch dims broadcast, 1-D operands promoted to a row
// (left) or a column (right) and the added dim dropped again. Backward beside the forward.
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

namespace {

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// a [..., M, K] @ b [..., K, N], both at least 2-D.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  const int64_t M = a.shape()[size_t(a.dim() - 2)], K = a.shape().back();
  const int64_t N = b.shape().back();
  LATHE_CHECK(b.shape()[size_t(b.dim() - 2)] == K, "matmul: a ", a.desc(), " and b ", b.desc(),
              " cannot be multiplied: a has ", K, " columns but b has ", b.shape()[size_t(b.dim() - 2)], " rows");

  // [..., M, K] @ [K, N] (every linear layer): one tall product instead of a batch of small
  // ones, and the weight gradient comes out as one product instead of a batch summed afterwards.
  if (a.dim() > 2 && b.dim() == 2) {
    Shape out_shape = a.shape();
    out_shape.back() = N;
    const int64_t rows = numel_of(Shape(a.shape().begin(), a.shape().end() - 1));
    return matmul_nd(a.reshape({rows, K}), b).view(out_shape);
  }

  Shape batch = broadcast_shapes(batch_of(a), batch_of(b), "matmul");
  Shape a_shape = batch, b_shape = batch, out_shape = batch;
  a_shape.insert(a_shape.end(), {M, K});
  b_shape.insert(b_shape.end(), {K, N});
  out_shape.insert(out_shape.end(), {M, N});
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  if (out.numel() > 0)
    backend_for(a.device()).matmul(a.detach().expand(a_shape), b.detach().expand(b_shape), out);

  return record("matmul", out, {a, b},
                [a = a.detach(), b = b.detach(), na = a.requires_grad(), nb = b.requires_grad()](const Tensor& g) {
    // ga = g @ b^T, gb = a^T @ g, each summed over the batch dims its operand was broadcast in.
    Tensor ga = na ? sum_to(matmul(g, b.transpose(-2, -1)), a.shape()) : Tensor();
    Tensor gb = nb ? sum_to(matmul(a.transpose(-2, -1), g), b.shape()) : Tensor();
    return std::vector<Tensor>{ga, gb};
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_same_device("matmul", {a, b});
  check_floating("matmul", a, "a");
  check_floating("matmul", b, "b");
  LATHE_CHECK(a.dtype() == b.dtype(), "matmul: operand dtypes differ: a is ", a.desc(), ", b is ", b.desc());
  LATHE_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got a ", a.desc(),
              " and b ", b.desc());
  if (a.dim() == 1 && b.dim() == 1) {
    LATHE_CHECK(a.numel() == b.numel(), "matmul: vectors ", a.desc(), " and ", b.desc(), " differ in length");
    return matmul_nd(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  }
  if (a.dim() == 1) return matmul_nd(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul_nd(a, b.unsqueeze(1)).squeeze(-1);
  return matmul_nd(a, b);
}

}  // namespace lathe
