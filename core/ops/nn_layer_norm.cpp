// Layer normalisation over the last dim, with optional elementwise weight and bias; backward beside.
// An f32 input may be normalised into a 16-bit output (the next product's input in a 16-bit run):
// the backward then reads a 16-bit gradient and gives the input an f32 one, with no cast between.
// add_layer_norm adds a residual branch into the stream as the kernel reads it (norm_residual.h).
#include "core/ops/norm_residual.h"

namespace lathe {

namespace {

// The norm of x, or with a branch, of x + branch (the sum returned beside it).
SumAndNorm layer_norm_of(const Tensor& x, const Tensor& branch, const Tensor& weight, const Tensor& bias,
                         double eps, std::optional<DType> out_dtype) {
  const char* op = branch.defined() ? "add_layer_norm" : "layer_norm";
  check_same_device(op, {x, branch, weight, bias});
  const DType out_dt = norm_residual::check_input(op, x, eps, out_dtype);
  const int64_t D = x.shape().back();
  norm_residual::check_param(op, x, weight, "weight");
  norm_residual::check_param(op, x, bias, "bias");

  Tensor xc = x.detach().contiguous();
  Tensor rc = branch.defined() ? branch.detach().contiguous() : Tensor();
  Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  // f64 inputs keep f64 statistics so that gradchecks see no f32 rounding.
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Shape rows(x.shape().begin(), x.shape().end() - 1);
  Tensor sum = branch.defined() ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
  Tensor out = Tensor::empty(x.shape(), out_dt, x.device());
  Tensor mean = Tensor::empty(rows, stat, x.device()), rstd = Tensor::empty(rows, stat, x.device());
  if (out.numel() > 0) backend_for(x.device()).layer_norm(xc, rc, w, b, eps, out, mean, rstd, sum);

  // The rows normalised, which the backward reads, and the tensor they stand for in the graph.
  const Tensor rows_in = branch.defined() ? sum.detach() : xc;
  const Tensor input = branch.defined() ? norm_residual::record_add(sum, x, branch) : x;
  const bool need_w = weight.defined() && weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  Tensor normed = record_folding("layer_norm", out, {input, weight, bias},
                                 [=](const Tensor& g, const Tensor& gathered) {
    Tensor gx = Tensor::empty(rows_in.shape(), rows_in.dtype(), rows_in.device());
    Tensor gw = need_w ? Tensor::empty({D}, w.dtype(), w.device()) : Tensor();
    Tensor gb = need_b ? Tensor::empty({D}, b.dtype(), b.device()) : Tensor();
    if (gx.numel() > 0) {
      backend_for(g.device()).layer_norm_backward(rows_in, w, mean, rstd, g.to(out_dt).contiguous(),
                                                  norm_residual::gathered_as(gathered, rows_in), gx, gw, gb);
    } else {  // no rows: the parameter gradients are empty sums
      if (gw.defined()) gw.zero_();
      if (gb.defined()) gb.zero_();
    }
    return std::vector<Tensor>{gx, gw, gb};
  });
  return {branch.defined() ? input : Tensor(), normed};
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  std::optional<DType> out_dtype) {
  return layer_norm_of(x, Tensor(), weight, bias, eps, out_dtype).normed;
}

SumAndNorm add_layer_norm(const Tensor& x, const Tensor& branch, const Tensor& weight, const Tensor& bias, double eps,
                          std::optional<DType> out_dtype) {
  LATHE_CHECK(branch.defined(), "add_layer_norm: the branch is undefined (use layer_norm)");
  check_same_device("add_layer_norm", {x, branch});
  if (!norm_residual::fusable(x, branch)) {
    Tensor sum = add(x, branch);
    return {sum, layer_norm(sum, weight, bias, eps, out_dtype)};
  }
  return layer_norm_of(x, branch, weight, bias, eps, out_dtype);
}

}  // namespace lathe
