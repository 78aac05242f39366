// Indexing: index_select (whole slices picked by a 1-D index) and gather (one element per index
// entry, torch.gather semantics), each with its backward beside it. The kernels validate the
// index values; the ops check dtypes, devices and shapes.
#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

namespace {
void check_index_tensor(const char* op, const Tensor& idx) {
  LATHE_CHECK(idx.dtype() == DType::i64 || idx.dtype() == DType::i32, op, ": index must be i64 or i32, got ",
              idx.desc());
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx) {
  check_same_device("index_select", {x, idx});
  check_index_tensor("index_select", idx);
  LATHE_CHECK(idx.dim() <= 1, "index_select: index must be 1-D, got ", idx.desc());
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  Shape shape = x.shape();
  if (x.dim() == 0) {
    LATHE_CHECK(idx.numel() == 1, "index_select: a 0-d input ", x.desc(), " takes exactly one index, got ",
                idx.desc());
  } else {
    shape[size_t(d)] = idx.numel();
  }
  Tensor ids = idx.detach();
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  if (out.numel() > 0) backend_for(x.device()).index_select(x.detach(), d, ids, out);
  // Backward: each selected slice's gradient flows back to the slice it came from; repeated
  // indices add up (index_add walks them in order, so the sum is deterministic).
  return record("index_select", out, {x}, [ids, d, xshape = x.shape()](const Tensor& g) {
    Tensor gx = Tensor::zeros(xshape, g.dtype(), g.device());
    if (g.numel() > 0) backend_for(g.device()).index_add(gx, d, ids, g.contiguous());
    return std::vector<Tensor>{gx};
  });
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx) {
  check_same_device("gather", {x, idx});
  check_index_tensor("gather", idx);
  LATHE_CHECK(idx.dim() == x.dim(), "gather: index ", idx.desc(), " must have as many dims as the input ",
              x.desc());
  const int64_t d = wrap_dim(dim, x.dim(), "gather");
  for (int64_t k = 0; k < x.dim(); ++k)
    LATHE_CHECK(k == d || idx.shape()[size_t(k)] <= x.shape()[size_t(k)], "gather: index ", idx.desc(),
                " is larger than the input ", x.desc(), " in dim ", k, " (only dim ", d, " may differ)");
  Tensor ids = idx.detach();
  Tensor out = Tensor::empty(idx.shape(), x.dtype(), x.device());
  if (out.numel() > 0) backend_for(x.device()).gather(x.detach(), d, ids, out);
  // Backward: scatter_add of the gradient to the positions it was gathered from.
  return record("gather", out, {x}, [ids, d, xshape = x.shape()](const Tensor& g) {
    Tensor gx = Tensor::zeros(xshape, g.dtype(), g.device());
    if (g.numel() > 0) backend_for(g.device()).scatter_add(gx, d, ids, g);
    return std::vector<Tensor>{gx};
  });
}

}  // namespace lathe
