// Joining and splitting along a dim: cat, stack, split, each with its backward beside it.
// cat copies; split returns narrow views (whose own backward is the view's).
#include <numeric>

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe {

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  LATHE_CHECK(!xs.empty(), "cat: expected a non-empty list of tensors");
  const Tensor& first = xs[0];
  for (size_t i = 0; i < xs.size(); ++i) {
    LATHE_CHECK(xs[i].defined(), "cat: tensor ", i, " is undefined");
    LATHE_CHECK(xs[i].dim() > 0, "cat: tensor ", i, " ", xs[i].desc(), " is 0-d and cannot be concatenated");
  }
  const int64_t d = wrap_dim(dim, first.dim(), "cat");
  DType t = first.dtype();
  Shape shape = first.shape();
  shape[size_t(d)] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    LATHE_CHECK(x.device() == first.device(), "cat: expected all tensors on one device, but tensor ", i, " is ",
                x.desc(), " and tensor 0 is ", first.desc());
    bool same = x.dim() == first.dim();
    for (int64_t k = 0; same && k < x.dim(); ++k)
      if (k != d && x.shape()[size_t(k)] != first.shape()[size_t(k)]) same = false;
    LATHE_CHECK(same, "cat: tensor ", i, " has shape ", shape_str(x.shape()), " but tensor 0 has shape ",
                shape_str(first.shape()), "; they must match in every dim except dim ", d);
    t = promote(t, x.dtype());
    shape[size_t(d)] += x.shape()[size_t(d)];
  }
  Tensor out = Tensor::empty(shape, t, first.device());
  std::vector<int64_t> offsets(xs.size() + 1, 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t n = xs[i].shape()[size_t(d)];
    offsets[i + 1] = offsets[i] + n;
    // The output's pieces are written through views; the kernel casts to the common dtype.
    if (xs[i].numel() > 0) backend_for(out.device()).copy(xs[i].detach(), out.narrow(d, offsets[i], n));
  }
  std::vector<DType> dtypes;
  for (const Tensor& x : xs) dtypes.push_back(x.dtype());
  // Backward: each input gets its own stretch of the gradient, as a view cast to its dtype.
  return record("cat", out, xs, [d, offsets, dtypes](const Tensor& g) {
    std::vector<Tensor> gs;
    for (size_t i = 0; i < dtypes.size(); ++i) {
      Tensor gi = g.narrow(d, offsets[i], offsets[i + 1] - offsets[i]);
      gs.push_back(is_floating(dtypes[i]) ? gi.to(dtypes[i]) : Tensor());
    }
    return gs;
  });
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  LATHE_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < xs.size(); ++i) {
    LATHE_CHECK(xs[i].defined(), "stack: tensor ", i, " is undefined");
    LATHE_CHECK(xs[i].device() == xs[0].device(), "stack: expected all tensors on one device, but tensor ", i,
                " is ", xs[i].desc(), " and tensor 0 is ", xs[0].desc());
    LATHE_CHECK(xs[i].shape() == xs[0].shape(), "stack: tensor ", i, " has shape ", shape_str(xs[i].shape()),
                " but tensor 0 has shape ", shape_str(xs[0].shape()), "; stack needs equal shapes");
  }
  const int64_t d = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(xs.size());
  for (const Tensor& x : xs) parts.push_back(x.unsqueeze(d));
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  LATHE_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor ", x.desc());
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.shape()[size_t(d)];
  int64_t total = 0;
  for (int64_t s : sizes) {
    LATHE_CHECK(s >= 0, "split: negative size ", s, " in sizes ", shape_str(sizes));
    total += s;
  }
  LATHE_CHECK(total == n, "split: sizes ", shape_str(sizes), " sum to ", total, " but dim ", d, " of ", x.desc(),
              " has size ", n);
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t s : sizes) {
    pieces.push_back(x.narrow(d, start, s));
    start += s;
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  LATHE_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor ", x.desc());
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.shape()[size_t(d)];
  // As torch: size 0 is allowed only for an empty dim, which gives one empty piece.
  LATHE_CHECK(split_size > 0 || (split_size == 0 && n == 0), "split: split_size must be positive, got ",
              split_size, " for dim ", d, " of ", x.desc());
  if (n == 0) return {x.narrow(d, 0, 0)};
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += split_size) sizes.push_back(std::min(split_size, n - start));
  return split(x, sizes, d);
}

}  // namespace lathe
