// Mean cross-entropy of logits against integer targets, with ignore_index; backward beside it.
// The kernels are fused (log-sum-exp per row; softmax minus one-hot written straight into the
// gradient), so no probability tensor is ever materialised.
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  check_same_device("cross_entropy", {logits, targets});
  check_floating("cross_entropy", logits, "logits");
  LATHE_CHECK(targets.dtype() == DType::i64 || targets.dtype() == DType::i32,
              "cross_entropy: targets must be i64 or i32, got ", targets.desc());
  LATHE_CHECK(logits.dim() >= 1 && logits.shape().back() > 0,
              "cross_entropy: logits need a non-empty class dim, got ", logits.desc());
  Shape expect(logits.shape().begin(), logits.shape().end() - 1);
  LATHE_CHECK(targets.shape() == expect, "cross_entropy: targets ", targets.desc(), " do not match logits ",
              logits.desc(), " (expected targets of shape ", shape_str(expect), ")");

  const int64_t V = logits.shape().back();
  const int64_t N = numel_of(expect);
  Tensor x = logits.detach().reshape({N, V}).contiguous();
  Tensor t = targets.detach().reshape({N}).contiguous();
  Tensor losses = Tensor::empty({N}, logits.dtype(), logits.device());
  if (N > 0) backend_for(logits.device()).cross_entropy(x, t, ignore_index, losses);

  // The mean over counted rows stays on the device (no host sync); with every row ignored it is
  // 0 / 0 = NaN, as in PyTorch.
  Tensor count = sum(ne(t, Tensor::scalar(double(ignore_index), t.dtype(), t.device()))).to(logits.dtype());
  Tensor loss = div(sum(losses), count);

  return record("cross_entropy", loss, {logits}, [x, t, count, ignore_index, N, shape = logits.shape()](const Tensor& g) {
    Tensor gx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (N > 0) {
      Tensor gloss = div(g, count).reshape({1}).expand({N});
      backend_for(g.device()).cross_entropy_backward(x, t, ignore_index, gloss, gx);
    }
    return std::vector<Tensor>{gx.view(shape)};
  });
}

}  // namespace lathe
