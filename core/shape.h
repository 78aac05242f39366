// Shapes and strides, in elements, row-major ("C order") by default.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace lathe {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// The element count; throws naming the shape when it overflows int64 (an absurd config, a
// hostile file), so no allocation or loop is ever sized by a wrapped product.
int64_t numel_of(const Shape& s);
Strides contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"

// Wraps a possibly negative dim into [0, ndim); the error names the op.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// The broadcast shape of a and b (NumPy rules); the error names the op and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace lathe
