// Reductions over dims: sum, mean, max, argmax, var, each with its backward beside it.
#include <algorithm>

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

namespace {

// Sorted, unique, wrapped dims; an empty list means every dim.
std::vector<int64_t> normalize_dims(const Tensor& x, const std::vector<int64_t>& dims, const char* op) {
  std::vector<int64_t> d;
  if (dims.empty()) {
    for (int64_t i = 0; i < x.dim(); ++i) d.push_back(i);
    return d;
  }
  for (int64_t v : dims) d.push_back(wrap_dim(v, x.dim(), op));
  std::sort(d.begin(), d.end());
  LATHE_CHECK(std::adjacent_find(d.begin(), d.end()) == d.end(), op, ": a dim appears twice");
  if (x.dim() == 0) d.clear();
  return d;
}

Shape kept_shape(const Tensor& x, const std::vector<int64_t>& dims) {
  Shape s = x.shape();
  for (int64_t d : dims) s[size_t(d)] = 1;
  return s;
}

Shape dropped_shape(const Tensor& x, const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (!std::binary_search(dims.begin(), dims.end(), i)) s.push_back(x.shape()[size_t(i)]);
  return s;
}

Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, DType out_dtype) {
  Tensor out = Tensor::empty(kept_shape(x, dims), out_dtype, x.device());
  if (out.numel() == 0) return out;
  if (dims.empty()) {
    out.copy_(x.detach());
    return out;
  }
  backend_for(x.device()).reduce(op, x.detach(), dims, out);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  auto dims = normalize_dims(x, dims_in, "sum");
  DType t = x.dtype() == DType::b8 || x.dtype() == DType::i32 ? DType::i64 : x.dtype();
  Tensor out = reduce_kernel(ReduceOp::sum, x.to(t).detach(), dims, t);
  if (!keepdim) out = out.reshape(dropped_shape(x, dims));
  Shape keep = kept_shape(x, dims);
  return record("sum", out, {x}, [keep, shape = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{g.reshape(keep).expand(shape)};
  });
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  check_floating("mean", x);
  auto dims = normalize_dims(x, dims_in, "mean");
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[size_t(d)];
  return div(sum(x, dims, keepdim), double(count));
}

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  int64_t d = wrap_dim(dim, x.dim(), "max");
  LATHE_CHECK(x.dim() == 0 || x.shape()[size_t(d)] > 0, "max: cannot reduce an empty dim of ", x.desc());
  std::vector<int64_t> dims = x.dim() ? std::vector<int64_t>{d} : std::vector<int64_t>{};
  Tensor idx = reduce_kernel(ReduceOp::argmax, x, dims, DType::i64);
  Tensor values = reduce_kernel(ReduceOp::max, x, dims, x.dtype());
  Tensor out = keepdim ? values : values.reshape(dropped_shape(x, dims));
  Shape keep = kept_shape(x, dims);
  return record("max", out, {x}, [keep, shape = x.shape(), idx, d](const Tensor& g) {
    Tensor gx = Tensor::zeros(shape, g.dtype(), g.device());
    if (shape.empty()) return std::vector<Tensor>{g};
    backend_for(g.device()).scatter_add(gx, d, idx, g.reshape(keep).contiguous());
    return std::vector<Tensor>{gx};
  });
}

Tensor max(const Tensor& x) {
  LATHE_CHECK(x.numel() > 0, "max: cannot reduce an empty tensor ", x.desc());
  auto dims = normalize_dims(x, {}, "max");
  Tensor out = reduce_kernel(ReduceOp::max, x, dims, x.dtype()).reshape({});
  // Ties share the gradient evenly, as PyTorch's full reduction does.
  return record("max", out, {x}, [x = x.detach(), v = out.detach()](const Tensor& g) {
    Tensor hit = eq(x, v).to(g.dtype());
    return std::vector<Tensor>{mul(hit, div(g, sum(hit)))};
  });
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  int64_t d = wrap_dim(dim, x.dim(), "argmax");
  LATHE_CHECK(x.dim() == 0 || x.shape()[size_t(d)] > 0, "argmax: cannot reduce an empty dim of ", x.desc());
  std::vector<int64_t> dims = x.dim() ? std::vector<int64_t>{d} : std::vector<int64_t>{};
  Tensor idx = reduce_kernel(ReduceOp::argmax, x, dims, DType::i64);
  if (x.dim() == 0) return Tensor::zeros({}, DType::i64, x.device());
  return keepdim ? idx : idx.reshape(dropped_shape(x, dims));
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim, int64_t correction) {
  check_floating("var", x);
  auto dims = normalize_dims(x, dims_in, "var");
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[size_t(d)];
  Tensor centered = sub(x, mean(x, dims, /*keepdim=*/true));
  return div(sum(square(centered), dims, keepdim), double(std::max<int64_t>(count - correction, 0)));
}

}  // namespace lathe
