// Mean cross-entropy of logits against integer targets, with ignore_index; backward beside it.
// The kernels are fused (log-sum-exp per row; softmax minus one-hot written straight into the
// gradient), so no probability tensor is ever materialised. fused_cross_entropy goes one step
// further: its forward writes the gradient too, so that the backward reads no logits at all.
#include <memory>

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

namespace {

// Checks logits [..., V] against targets [...]; returns the number of rows N.
int64_t checked_rows(const char* op, const Tensor& logits, const Tensor& targets) {
  check_same_device(op, {logits, targets});
  check_floating(op, logits, "logits");
  LATHE_CHECK(targets.dtype() == DType::i64 || targets.dtype() == DType::i32, op,
              ": targets must be i64 or i32, got ", targets.desc());
  LATHE_CHECK(logits.dim() >= 1 && logits.shape().back() > 0, op, ": logits need a non-empty class dim, got ",
              logits.desc());
  Shape expect(logits.shape().begin(), logits.shape().end() - 1);
  LATHE_CHECK(targets.shape() == expect, op, ": targets ", targets.desc(), " do not match logits ", logits.desc(),
              " (expected targets of shape ", shape_str(expect), ")");
  return numel_of(expect);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const int64_t N = checked_rows("cross_entropy", logits, targets);
  const int64_t V = logits.shape().back();
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

Tensor fused_cross_entropy(Tensor logits, const Tensor& targets, int64_t ignore_index) {
  const int64_t N = checked_rows("fused_cross_entropy", logits, targets);
  const int64_t V = logits.shape().back();
  const Device device = logits.device();
  // The loss and the gradient's scale in the compute type: 16-bit logits have f32 arithmetic.
  const DType acc = logits.dtype() == DType::f64 ? DType::f64 : DType::f32;
  // Before any view of it below: the logits were handed over, and nothing else holds their memory.
  const bool reuse = owns_its_memory(logits);
  const bool with_grad = needs_grad({logits});
  Tensor x = logits.detach().reshape({N, V}).contiguous();
  Tensor t = targets.detach().reshape({N}).contiguous();
  Tensor losses = Tensor::empty({N}, acc, device);
  // The rows counted, on the device (no host sync); with every row ignored the mean is 0 / 0 = NaN,
  // as in PyTorch, and every gradient row is 0.
  Tensor count = sum(ne(t, Tensor::scalar(double(ignore_index), t.dtype(), device)).to(acc));
  // The gradient of the mean for an upstream gradient of 1: each row's times 1 / count.
  Tensor grad, weight;
  if (with_grad) {
    weight = div(Tensor::ones({}, acc, device), count);
    grad = reuse ? x : Tensor::empty({N, V}, logits.dtype(), device);
  }
  if (N > 0) backend_for(device).cross_entropy_fused(x, t, ignore_index, weight, losses, grad);
  Tensor loss = div(sum(losses), count);
  if (!with_grad) return loss;

  // The gradient exists once: a second backward (retain_graph) would scale it twice.
  auto used = std::make_shared<bool>(false);
  return record("fused_cross_entropy", loss, {logits}, [grad, used, shape = logits.shape()](const Tensor& g) {
    LATHE_CHECK(!*used, "fused_cross_entropy: its gradient is computed once, by the forward, and a backward "
                "already used it; run the forward again to backward again");
    *used = true;
    if (grad.numel() > 0) backend_for(g.device()).scale_by(grad, g.contiguous());
    return std::vector<Tensor>{grad.view(shape)};
  });
}

}  // namespace lathe
