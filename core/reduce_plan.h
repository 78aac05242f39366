// How a backend lays out a reduction (Backend::reduce), the same on every backend: reduced dims
// that are trailing (rows) or leading (columns) in a contiguous tensor are reduced where they lie;
// any other layout is first permuted, by a copy, so that the reduced dims trail.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace lathe {

struct ReducePlan {
  Tensor x;                 // the input, or its copy with the reduced dims last
  int64_t reduced = 1;      // R: how many elements each output reduces
  int64_t outputs = 0;      // K: the number of outputs
  bool trailing = true;     // each output reduces a row of R; else a column, its elements K apart
};

// `dims` sorted and unique, as Backend::reduce receives them.
ReducePlan plan_reduce(const Tensor& x, const std::vector<int64_t>& dims);

}  // namespace lathe
