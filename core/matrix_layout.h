// How a backend reads the matrices of a matrix product's operand (Backend::matmul), the same on
// every backend: the trailing two dims as row-major (unit column stride) or column-major (unit row
// stride) with an outer stride, so that plain and transposed views need no copy; any other layout
// is copied first (compact_matrices), its broadcast batch dims kept broadcast.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace lathe {

// Where one operand's matrices lie: row-major or column-major, with `outer` the stride between
// rows (row-major) or columns (column-major). A dim of size 1 never moves the address, so a single
// row reads as row-major with `outer` its length.
struct MatrixLayout {
  bool usable = false;
  bool row_major = true;
  int64_t outer = 0;
};

// The layout of t's trailing two dims (t at least 2-D).
MatrixLayout matrix_layout(const Tensor& t);

// A contiguous copy of t in `dtype` whose broadcast batch dims stay broadcast: the copy has size 1
// there and is expanded back, so a weight shared across a batch is copied (or converted) once.
Tensor compact_matrices(const Tensor& t, DType dtype);

}  // namespace lathe
