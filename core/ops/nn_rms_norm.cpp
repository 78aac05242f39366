// RMSNorm over the last dim, with an optional elementwise weight; backward beside. An f32 input may
// be normalised into a 16-bit output (the next product's input in a 16-bit run), as layer_norm's:
// the backward then reads a 16-bit gradient and gives the input an f32 one, with no cast between.
// add_rms_norm adds a residual branch into the stream as the kernel reads it (norm_residual.h).
#include "core/ops/norm_residual.h"

namespace lathe {

namespace {

// The norm of x, or with a branch, of x + branch (the sum returned beside it).
SumAndNorm rms_norm_of(const Tensor& x, const Tensor& branch, const Tensor& weight, double eps,
                       std::optional<DType> out_dtype) {
  const char* op = branch.defined() ? "add_rms_norm" : "rms_norm";
  check_same_device(op, {x, branch, weight});
  const DType out_dt = norm_residual::check_input(op, x, eps, out_dtype);
  const int64_t D = x.shape().back();
  norm_residual::check_param(op, x, weight, "weight");

  Tensor xc = x.detach().contiguous();
  Tensor rc = branch.defined() ? branch.detach().contiguous() : Tensor();
  Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  // f64 inputs keep an f64 statistic so that gradchecks see no f32 rounding.
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Shape rows(x.shape().begin(), x.shape().end() - 1);
  Tensor sum = branch.defined() ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
  Tensor out = Tensor::empty(x.shape(), out_dt, x.device());
  Tensor rstd = Tensor::empty(rows, stat, x.device());
  if (out.numel() > 0) backend_for(x.device()).rms_norm(xc, rc, w, eps, out, rstd, sum);

  // The rows normalised, which the backward reads, and the tensor they stand for in the graph.
  const Tensor rows_in = branch.defined() ? sum.detach() : xc;
  const Tensor input = branch.defined() ? norm_residual::record_add(sum, x, branch) : x;
  const bool need_w = weight.defined() && weight.requires_grad();
  Tensor normed = record_folding("rms_norm", out, {input, weight}, [=](const Tensor& g, const Tensor& gathered) {
    Tensor gx = Tensor::empty(rows_in.shape(), rows_in.dtype(), rows_in.device());
    Tensor gw = need_w ? Tensor::empty({D}, w.dtype(), w.device()) : Tensor();
    if (gx.numel() > 0)
      backend_for(g.device()).rms_norm_backward(rows_in, w, rstd, g.to(out_dt).contiguous(),
                                                norm_residual::gathered_as(gathered, rows_in), gx, gw);
    else if (gw.defined())
      gw.zero_();  // no rows: the weight gradient is an empty sum
    return std::vector<Tensor>{gx, gw};
  });
  return {branch.defined() ? input : Tensor(), normed};
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps, std::optional<DType> out_dtype) {
  return rms_norm_of(x, Tensor(), weight, eps, out_dtype).normed;
}

SumAndNorm add_rms_norm(const Tensor& x, const Tensor& branch, const Tensor& weight, double eps,
                        std::optional<DType> out_dtype) {
  LATHE_CHECK(branch.defined(), "add_rms_norm: the branch is undefined (use rms_norm)");
  check_same_device("add_rms_norm", {x, branch});
  if (!norm_residual::fusable(x, branch)) {
    Tensor sum = add(x, branch);
    return {sum, rms_norm(sum, weight, eps, out_dtype)};
  }
  return rms_norm_of(x, branch, weight, eps, out_dtype);
}

}  // namespace lathe
