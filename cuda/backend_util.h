// What the host glue of several kernel families shares: a tensor seen as rows or around a dim,
// and the launch limits the kernels assume.
#pragma once

#include <climits>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace lathe::cuda {

struct Rows {
  int64_t rows, len;
};
// A contiguous tensor as rows of its last dim (a 0-dim tensor is one row of one).
inline Rows rows_of(const Tensor& x) {
  const int64_t len = x.dim() ? x.shape().back() : 1;
  return {len ? x.numel() / len : 0, len};
}

// Row kernels launch one block per row: the grid's x dimension is at most 2^31 - 1.
inline void check_grid(int64_t blocks, const char* op, const Tensor& t) {
  LATHE_CHECK(blocks <= INT_MAX, op, ": ", t.desc(), " has more rows than one CUDA launch takes (2^31 - 1)");
}

// Optional operands (an affine-less LayerNorm's weight and bias) pass through as null pointers.
inline Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? t.contiguous() : t; }
inline const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
inline void* mut_ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// A tensor seen as [outer, size, inner] around `dim`.
inline void split_around(const Tensor& t, int64_t dim, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.shape()[size_t(d)];
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.shape()[size_t(d)];
}

}  // namespace lathe::cuda
