#include "core/matrix_layout.h"

#include "core/backend.h"

namespace lathe {

MatrixLayout matrix_layout(const Tensor& t) {
  const int64_t nd = t.dim();
  const int64_t rows = t.shape()[size_t(nd - 2)], cols = t.shape()[size_t(nd - 1)];
  const int64_t s_row = rows == 1 ? cols : t.strides()[size_t(nd - 2)];
  const int64_t s_col = cols == 1 ? 1 : t.strides()[size_t(nd - 1)];
  if (s_col == 1) return {true, true, s_row};
  if (rows == 1 || t.strides()[size_t(nd - 2)] == 1) return {true, false, s_col};
  return {};
}

Tensor compact_matrices(const Tensor& t, DType dtype) {
  Tensor src = t;
  for (int64_t d = 0; d + 2 < t.dim(); ++d)
    if (t.strides()[size_t(d)] == 0 && t.shape()[size_t(d)] > 1) src = src.narrow(d, 0, 1);
  Tensor dst = Tensor::empty(src.shape(), dtype, t.device());
  backend_for(t.device()).copy(src, dst);
  return dst.expand(t.shape());
}

}  // namespace lathe
