// softmax and log_softmax over any dim, with their backward beside them. The kernels work on the
// last dim; another dim is transposed to the end and back.
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

namespace {

Tensor softmax_op(const Tensor& x_in, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  check_floating(name, x_in);
  // A 0-d tensor is one row of one element.
  const Tensor x = x_in.dim() == 0 ? x_in.reshape({1}) : x_in;
  const int64_t d = wrap_dim(dim, x.dim(), name);
  const int64_t last = x.dim() - 1;
  auto to_last = [d, last](const Tensor& t) { return d == last ? t : t.transpose(d, last); };
  auto from_last = [d, last](const Tensor& t) { return d == last ? t : t.transpose(d, last).contiguous(); };

  Tensor xt = to_last(x.detach()).contiguous();
  Tensor yt = Tensor::empty(xt.shape(), xt.dtype(), xt.device());
  if (yt.numel() > 0) backend_for(x.device()).softmax(xt, yt, log);
  Tensor out = from_last(yt).reshape(x_in.shape());

  return record(name, out, {x_in}, [yt, log, to_last, from_last, shape = x.shape(), in_shape = x_in.shape()](
                                        const Tensor& g) {
    Tensor gt = to_last(g.reshape(shape)).contiguous();
    Tensor gxt = Tensor::empty(gt.shape(), gt.dtype(), gt.device());
    if (gxt.numel() > 0) backend_for(g.device()).softmax_backward(yt, gt, gxt, log);
    return std::vector<Tensor>{from_last(gxt).reshape(in_shape)};
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, /*log=*/false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, /*log=*/true); }

}  // namespace lathe
