// Embedding lookup: rows of a [V, C] table picked by integer ids; backward beside it.
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  check_same_device("embedding", {weight, idx});
  check_floating("embedding", weight, "weight");
  LATHE_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [vocab, dim], got ", weight.desc());
  LATHE_CHECK(idx.dtype() == DType::i64 || idx.dtype() == DType::i32, "embedding: ids must be i64 or i32, got ",
              idx.desc());
  const int64_t C = weight.shape()[1];
  Shape out_shape = idx.shape();
  out_shape.push_back(C);
  Tensor ids = idx.detach().contiguous();
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  // Ids are checked even when there is nothing to copy (C == 0).
  if (ids.numel() > 0) backend_for(weight.device()).embedding(weight.detach(), ids, out);

  return record("embedding", out, {weight}, [ids, wshape = weight.shape(), wtype = weight.dtype()](const Tensor& g) {
    Tensor gw = Tensor::zeros(wshape, wtype, g.device());
    if (ids.numel() > 0) backend_for(g.device()).embedding_backward(ids, g.contiguous(), gw);
    return std::vector<Tensor>{gw};
  });
}

}  // namespace lathe
